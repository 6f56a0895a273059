// Package sdnotifytest stands in for systemd's notification socket in
// tests: it listens on a unix datagram socket, points NOTIFY_SOCKET at it
// and hands over every message a daemon sends (READY=1, WATCHDOG=1, …).
// It must not be imported outside tests.
package sdnotifytest

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// Listen sets NOTIFY_SOCKET for the test and returns the messages sent to
// it, in order.
func Listen(t *testing.T) <-chan string {
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

// Next returns the next message, failing the test after 10 s without one.
func Next(t *testing.T, msgs <-chan string) string {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10 s")
	}
	return ""
}
