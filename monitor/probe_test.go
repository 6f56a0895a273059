package monitor

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func addrOf(t *testing.T, hostport string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func TestNetProberTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	up := addrOf(t, ln.Addr().String())
	p := ProbeConfig{Type: "tcp", Reference: 100 * time.Millisecond}
	ctx := context.Background()
	rtt, err := NetProber{}.Probe(ctx, up, p, 2*time.Second)
	if err != nil || rtt <= 0 {
		t.Errorf("tcp probe of a listening port: rtt %v err %v", rtt, err)
	}
	ln.Close()
	if _, err := (NetProber{}).Probe(ctx, up, p, 2*time.Second); err == nil {
		t.Error("tcp probe of a closed port succeeded")
	}
}

func TestNetProberHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "www.example.test" {
			http.Error(w, "wrong host "+r.Host, http.StatusBadRequest)
			return
		}
		w.Write([]byte("hello"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	target := addrOf(t, strings.TrimPrefix(srv.URL, "http://"))

	tests := []struct {
		name    string
		p       ProbeConfig
		timeout time.Duration
		wantErr string
	}{
		{"status matches", ProbeConfig{Type: "http", Path: "/ok", Host: "www.example.test", ExpectStatus: 200}, 2 * time.Second, ""},
		{"wrong Host header gets 400", ProbeConfig{Type: "http", Path: "/ok", ExpectStatus: 200}, 2 * time.Second, "status 400, want 200"},
		{"404", ProbeConfig{Type: "http", Path: "/missing", ExpectStatus: 200}, 2 * time.Second, "status 404"},
		{"slower than the timeout", ProbeConfig{Type: "http", Path: "/slow", ExpectStatus: 200}, 200 * time.Millisecond, "deadline exceeded"},
	}
	for _, tt := range tests {
		rtt, err := NetProber{}.Probe(context.Background(), target, tt.p, tt.timeout)
		if tt.wantErr == "" {
			if err != nil || rtt <= 0 {
				t.Errorf("%s: rtt %v err %v", tt.name, rtt, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}
