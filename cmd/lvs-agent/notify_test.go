package main

import (
	"context"
	"io"
	"lvs-feedback/internal/sdnotifytest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSystemdNotify(t *testing.T) {
	msgs := sdnotifytest.Listen(t)
	t.Setenv("WATCHDOG_USEC", "100000") // 100 ms: a ping every 50 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-interval", "200ms"}, io.Discard, io.Discard, nil)
	}()

	if m := sdnotifytest.Next(t, msgs); m != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", m)
	}
	// The first report needs a baseline reading and one interval.
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("READY=1 after %v, before the first sample could exist", d)
	}
	for range 3 {
		if m := sdnotifytest.Next(t, msgs); m != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1", m)
		}
	}
	cancel()
	for {
		m := sdnotifytest.Next(t, msgs)
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
