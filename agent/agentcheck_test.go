package agent

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAgentCheckPercent(t *testing.T) {
	for _, tt := range []struct {
		name                     string
		cpu, mem, disk, runnable float64
		want                     int
	}{
		{"idle", 0, 0, 0, 0, 100},
		// load = 0.5 × 1 = 0.5
		{"one CPU figure full", 1, 0, 0, 0, 50},
		// 0.5 × 0.5 + 0.5/6 = 0.3333 → 66.67
		{"one spinner on two CPUs", 0.5, 0, 0, 0.5, 67},
		// (0.3 + 0.6)/6 = 0.15: a full-ish disk and some memory on an idle server
		{"static use only", 0, 0.3, 0.6, 0, 85},
		// 0.1 + (0.1 + 0.15 + 0.4)/6 = 0.2083 → 79.17
		{"mixed", 0.2, 0.1, 0.15, 0.4, 79},
		// 0.5 × 0.9 + (0.2 + 0.1 + 1.2)/6 = 0.45 + 0.25 = 0.7 → 30
		{"busy", 0.9, 0.2, 0.1, 1.2, 30},
		// load exactly 1 would be 0 % (a drain): clamped to 1
		{"every figure full", 1, 1, 1, 1, 1},
		// 0.5 + 100/6: far overloaded, still 1
		{"overloaded", 1, 0, 0, MaxLoad, 1},
		// 0.5 × 0.018 = 0.009 → 99.1
		{"almost idle", 0.018, 0, 0, 0, 99},
	} {
		got := AgentCheckPercent(Report{CPU: tt.cpu, Memory: tt.mem, Disk: tt.disk, Processes: tt.runnable})
		if got != tt.want {
			t.Errorf("%s: %d%%, want %d%%", tt.name, got, tt.want)
		}
	}
	if got := AgentCheckPercent(Report{CPU: nan()}); got != 100 {
		t.Errorf("NaN load: %d%%, want 100%%", got)
	}
}

func TestAgentCheckLine(t *testing.T) {
	busy := Report{CPU: 1} // 50 %
	failed := errors.New("process:42: process has exited")
	for _, tt := range []struct {
		rep          Report
		err          error
		drain, ready bool
		want         string
	}{
		{busy, nil, false, false, "50%\n"},
		{busy, nil, false, true, "ready 50%\n"},
		{busy, nil, true, false, "drain\n"},
		{busy, nil, true, true, "drain\n"}, // drain wins
		{Report{}, failed, false, false, "100%\n"},
		{Report{}, ErrNotReady, false, true, "ready 100%\n"},
		{Report{}, failed, true, false, "drain\n"},
	} {
		if got := AgentCheckLine(tt.rep, tt.err, tt.drain, tt.ready); got != tt.want {
			t.Errorf("AgentCheckLine(cpu %v, %v, drain %v, ready %v) = %q, want %q",
				tt.rep.CPU, tt.err, tt.drain, tt.ready, got, tt.want)
		}
	}
}

func TestNewAgentCheckRefuses(t *testing.T) {
	s, err := NewSampler(&fakeSource{}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		s    *Sampler
		opts AgentCheckOptions
		want string
	}{
		{nil, AgentCheckOptions{MaxConns: 1}, "nil sampler"},
		{s, AgentCheckOptions{MaxConns: 0}, "max conns 0"},
		{s, AgentCheckOptions{MaxConns: 1, DrainFile: "run/drain"}, "not an absolute path"},
		{s, AgentCheckOptions{MaxConns: 1, DrainFile: "/no/such/dir/drain"}, "no such file or directory"},
		{s, AgentCheckOptions{MaxConns: 1, DrainFile: file + "/drain"}, "is not a directory"},
	} {
		if _, err := NewAgentCheck(tt.s, tt.opts, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err %v, want %q", tt.opts, err, tt.want)
		}
	}
}

// TestAgentCheckAnswer follows the drain file and the ready window on a
// fake clock.
func TestAgentCheckAnswer(t *testing.T) {
	s, err := NewSampler(&fakeSource{}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	drain := filepath.Join(t.TempDir(), "drain")
	a, err := NewAgentCheck(s, AgentCheckOptions{DrainFile: drain, MaxConns: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	now := start
	a.now = func() time.Time { return now }
	a.readyUntil = start.Add(AgentCheckReadyWindow)
	s.now = func() time.Time { return now } // the sample stays fresh on the fake clock

	check := func(step, want string) {
		t.Helper()
		if got := a.Answer(); got != want {
			t.Errorf("%s: %q, want %q", step, got, want)
		}
	}
	check("before the first sample", "ready 100%\n")
	s.publish(Report{Schema: 1, CPU: 0.5, Processes: 0.5}, nil)
	check("just started", "ready 67%\n")
	now = start.Add(AgentCheckReadyWindow)
	s.publish(Report{Schema: 1, CPU: 0.5, Processes: 0.5}, nil)
	check("window over", "67%\n")

	if err := os.WriteFile(drain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s.publish(Report{Schema: 1, CPU: 0.5, Processes: 0.5}, nil)
	check("drain file", "drain\n")
	now = now.Add(10 * time.Minute)
	s.publish(Report{Schema: 1, CPU: 0.5, Processes: 0.5}, nil)
	check("still there 10 min later", "drain\n")
	lastDrain := now
	if err := os.Remove(drain); err != nil {
		t.Fatal(err)
	}
	now = lastDrain.Add(AgentCheckReadyWindow - time.Millisecond)
	s.publish(Report{Schema: 1, CPU: 1}, nil)
	check("removed, within the window", "ready 50%\n")
	now = lastDrain.Add(AgentCheckReadyWindow)
	s.publish(Report{Schema: 1, CPU: 1}, nil)
	check("removed, window over", "50%\n")

	s.publish(Report{}, errors.New("boom"))
	check("sampling failed", "100%\n")
}

// TestAgentCheckServe talks to the server over loopback as HAProxy does:
// connect, optionally send an agent-send string, read one line, see the
// connection end.
func TestAgentCheckServe(t *testing.T) {
	s, err := NewSampler(&fakeSource{}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.publish(Report{Schema: 1, CPU: 0.2, Memory: 0.1, Disk: 0.15, Processes: 0.4}, nil)
	a, err := NewAgentCheck(s, AgentCheckOptions{MaxConns: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, ln) }()

	for _, send := range []string{"", "backend-name\n", strings.Repeat("x", 5000)} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if send != "" {
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
		}
		got, err := io.ReadAll(c) // to EOF: the agent ends the connection
		c.Close()
		if err != nil || string(got) != "ready 79%\n" {
			t.Errorf("sent %d bytes: read %q, %v; want %q then EOF", len(send), got, err, "ready 79%\n")
		}
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	// Ask the listener itself: a dial to the freed port can reach another
	// process that took the port meanwhile, or connect to itself.
	// The deadline makes an open listener fail at once instead of blocking.
	_ = ln.(*net.TCPListener).SetDeadline(time.Now())
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Serve returned: %v, want net.ErrClosed (listener closed)", err)
	}
}

// TestAgentCheckBoundsConnections: 40 connections from one address that
// never close hold at most MaxConns slots, and pollers from another
// address still get their line.
func TestAgentCheckBoundsConnections(t *testing.T) {
	s, err := NewSampler(&fakeSource{}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.publish(Report{Schema: 1}, nil)
	const maxConns = 4
	a, err := NewAgentCheck(s, AgentCheckOptions{MaxConns: maxConns}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = a.Serve(ctx, ln) }()

	var holders []net.Conn
	defer func() {
		for _, c := range holders {
			c.Close()
		}
	}()
	for range 40 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// Sends without ever closing, so the agent's read sees no EOF.
		_, _ = io.WriteString(c, "x")
		holders = append(holders, c)
	}
	// The pollers come from another address, as HAProxy on a front end
	// would, so the holders' address is the one that loses its slots.
	// One after another, as one HAProxy checks one server: five at once
	// would compete for the four slots among themselves, and one would be
	// evicted by another.
	other := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	for range 5 {
		func() {
			c, err := other.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "ready 100%\n" {
				t.Errorf("poller read %q, %v", got, err)
			}
		}()
	}
	st := a.Stats()
	t.Logf("limiter: %+v", st)
	if st.Open > maxConns || st.Accepted != 45 || st.Evicted == 0 || st.Refused != 0 {
		t.Errorf("limiter %+v: want at most %d open, 45 accepted, some evicted, none refused", st, maxConns)
	}
}
