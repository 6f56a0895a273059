package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// notifySocket listens like systemd's NOTIFY_SOCKET and returns the
// messages it receives.
func notifySocket(t *testing.T) <-chan string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	msgs := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	return msgs
}

func next(t *testing.T, msgs <-chan string) string {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	return ""
}

func TestSystemdNotify(t *testing.T) {
	msgs := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "100000") // 100 ms: a ping every 50 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	done := make(chan int)
	go func() { done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-interval", "200ms"}, io.Discard, nil) }()

	if m := next(t, msgs); m != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", m)
	}
	// The first report needs a baseline reading and one interval.
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("READY=1 after %v, before the first sample could exist", d)
	}
	for range 3 {
		if m := next(t, msgs); m != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1", m)
		}
	}
	cancel()
	for {
		m := next(t, msgs)
		if m == "STOPPING=1" {
			break
		}
		if !strings.HasPrefix(m, "WATCHDOG=1") {
			t.Fatalf("notification %q while stopping", m)
		}
	}
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}
