package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeAndClient runs the server on a 1 MiB file (O_DIRECT; the test's
// temporary directory must be on a filesystem that allows it, as ext4 does)
// and the client against it, on loopback.
func TestServeAndClient(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "disk")
	if err := os.WriteFile(dev, bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logPath := filepath.Join(dir, "probe.log")
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, []string{"-listen", addr, "-disk", dev, "-name", "rs9", "-reads", "2", "-log", logPath})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b, _ := os.ReadFile(logPath); !strings.HasPrefix(string(b), "127.0.0.1:") || !strings.HasSuffix(string(b), ": GET /health\n") {
		t.Errorf("probe log %q, want ADDRESS:PORT: GET /health", b)
	}
	counts, stop := filepath.Join(dir, "counts"), filepath.Join(dir, "stop")
	clientDone := make(chan error, 1)
	go func() {
		clientDone <- client(ctx, []string{"-url", "http://" + addr + "/", "-workers", "2", "-stop", stop, "-counts", counts})
	}()
	for {
		b, _ := os.ReadFile(counts)
		if strings.Contains(string(b), "rs9 ") {
			break
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("counts %q: no answer from rs9", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-clientDone; err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(counts); strings.Contains(string(b), "fail") {
		t.Errorf("failed requests: %q", b)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func TestServeRefuses(t *testing.T) {
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-name", "a"}, "serve needs -disk"},
		{[]string{"-disk", "/nonexistent", "-name", "a"}, "open /nonexistent with O_DIRECT"},
		{[]string{"-disk", small, "-name", "a"}, "1 bytes, want at least 4096"},
	} {
		err := serve(context.Background(), tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.args, err, tt.want)
		}
	}
}
