package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"lvs-feedback/agent"
)

func TestBadFlagsExit2(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-interval", "5ms"}, "-interval 5ms"},
		{[]string{"-interval", "2h"}, "-interval 2h"},
		{[]string{"-interval", "soon"}, `invalid value "soon" for flag -interval: "soon" is not a duration; write e.g. 1s or 500ms`},
		{[]string{"-interval", "5"}, `invalid value "5" for flag -interval: "5" has no unit; write e.g. 5s or 5ms`},
		{[]string{"-sample", "often"}, `-sample "often": want poll or interval`},
		{[]string{"-listen", "nowhere"}, "-listen"},
		{[]string{"-listen", ":99999"}, "bad port"},
		{[]string{"-source", "vm:3"}, "want host, cgroup:PATH"},
		{[]string{"-source", "process:abc"}, "positive integer"},
		{[]string{"-source", "process:999999999"}, "no such process"},
		{[]string{"-source", "cgroup:/nonexistent"}, "not a cgroup v2 directory"},
		{[]string{"-disk-mounts", ""}, "-disk-mounts is empty"},
		{[]string{"-disk-mounts", "/,relative"}, "not an absolute path"},
		{[]string{"-disk-mounts", "/no/such/mount"}, "/no/such/mount"},
		{[]string{"-disk-devices", ""}, "-disk-devices is empty (leave it out to count every disk)"},
		{[]string{"-disk-devices", " "}, "-disk-devices is empty"},
		{[]string{"-disk-devices", "sda,"}, `-disk-devices "sda,": empty disk device name`},
		{[]string{"-disk-devices", "sda,,sdb"}, `-disk-devices "sda,,sdb": empty disk device name`},
		{[]string{"-disk-devices", "/dev/sda"}, `-disk-devices "/dev/sda": disk device "/dev/sda": want a name as in /proc/diskstats (sda, not /dev/sda)`},
		{[]string{"-disk-devices", "sda, sda"}, `disk device "sda" named twice`},
		{[]string{"-max-conns", "0"}, "-max-conns 0: want 1 to 65536"},
		{[]string{"-max-conns", "70000"}, "-max-conns 70000"},
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-nope"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), tt.args, io.Discard, &stderr, nil)
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

func TestHelpExit0(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &stdout, &stderr, nil); code != 0 || !strings.Contains(stdout.String(), "-source") || stderr.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and the flags on stdout alone", code, stdout.String(), stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunServesAndStops runs the agent on this process, fetches a report
// and stops it as SIGTERM would.
func TestRunServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	addr, exit := startRun(t, ctx, []string{"-listen", "127.0.0.1:0", "-interval", "100ms", "-source", "process:" + strconv.Itoa(os.Getpid())}, &stderr)
	url := "http://" + addr
	deadline := time.Now().Add(5 * time.Second)
	for {
		rep, err := agent.Fetch(ctx, nil, url)
		if err == nil {
			if rep.Raw.PID != os.Getpid() || rep.Source != "process:"+strconv.Itoa(os.Getpid()) {
				t.Errorf("report %+v", rep)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no graceful shutdown")
	}
	log := stderr.String()
	if n := strings.Count(log, "\n"); n != 2 || !strings.Contains(log, "lvs-agent started") || !strings.Contains(log, "shutting down") {
		t.Errorf("log at info should be one line at start and one at stop:\n%s", log)
	}
}

// TestRunWarnsAbsentDiskDevice: a -disk-devices name missing from
// /proc/diskstats is accepted (a disk may be attached later) with one
// warning at start; the report then counts no device.
func TestRunWarnsAbsentDiskDevice(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	addr, exit := startRun(t, ctx, []string{"-listen", "127.0.0.1:0", "-interval", "100ms", "-disk-devices", "nosuchdisk7"}, &stderr)
	url := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err := agent.Fetch(ctx, nil, url)
		if err == nil {
			if rep.Raw.DiskIOBusy != 0 || rep.Raw.DiskIODevice != "" {
				t.Errorf("absent device: disk_io_busy %v device %q, want 0 and none", rep.Raw.DiskIOBusy, rep.Raw.DiskIODevice)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("exit %d", code)
	}
	log := stderr.String()
	warn := `level=WARN msg="-disk-devices not in /proc/diskstats: they count nothing until they appear" devices=nosuchdisk7`
	if strings.Count(log, warn) != 1 || !strings.Contains(log, "disk_devices=nosuchdisk7") {
		t.Errorf("want one warning %q and disk_devices in the start line:\n%s", warn, log)
	}
}

// startRun runs lvs-agent's run with args until ctx ends, and returns the
// address it listens on and the channel its exit code arrives on; it fails
// the test when run exits before it listens.
func startRun(t *testing.T, ctx context.Context, args []string, stderr *syncBuffer) (addr string, exit <-chan int) {
	t.Helper()
	addrs := make(chan net.Addr, 1)
	code := make(chan int, 1)
	go func() { code <- run(ctx, args, io.Discard, stderr, func(a net.Addr) { addrs <- a }) }()
	select {
	case a := <-addrs:
		return a.String(), code
	case c := <-code:
		t.Fatalf("lvs-agent %v exited %d: %s", args, c, stderr.String())
	}
	return "", nil
}
