package monitor

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// Prober measures a real server's response time, giving up after timeout
// (probe_timeout) or when ctx ends. An error means the server is
// unreachable for this interval.
type Prober interface {
	Probe(ctx context.Context, server netip.AddrPort, p ProbeConfig, timeout time.Duration) (time.Duration, error)
}

// NetProber probes over real sockets: a TCP connect, or an HTTP GET whose
// status must match.
type NetProber struct{}

// Probe implements Prober.
func (NetProber) Probe(ctx context.Context, server netip.AddrPort, p ProbeConfig, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	port := server.Port()
	if p.Port != 0 {
		port = uint16(p.Port)
	}
	addr := net.JoinHostPort(server.Addr().String(), strconv.Itoa(int(port)))
	var d net.Dialer
	start := time.Now()
	switch p.Type {
	case "tcp":
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, fmt.Errorf("tcp probe %s: %w", addr, err)
		}
		rtt := time.Since(start)
		conn.Close()
		return rtt, nil
	case "http":
		return httpProbe(ctx, addr, p, start)
	}
	return 0, fmt.Errorf("probe %s: unknown probe type %q", addr, p.Type)
}

func httpProbe(ctx context.Context, addr string, p ProbeConfig, start time.Time) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+p.Path, nil)
	if err != nil {
		return 0, fmt.Errorf("http probe %s: %w", addr, err)
	}
	if p.Host != "" {
		req.Host = p.Host
	}
	req.Header.Set("User-Agent", "lvs-monitor-probe")
	// A fresh transport per probe: each probe measures a new connection,
	// as a new client would see it, and keeps no idle sockets around.
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("http probe %s%s: %w", addr, p.Path, err)
	}
	defer resp.Body.Close()
	// Read (a bounded part of) the body: the response time includes it.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	rtt := time.Since(start)
	if resp.StatusCode != p.ExpectStatus {
		return 0, fmt.Errorf("http probe %s%s: status %d, want %d", addr, p.Path, resp.StatusCode, p.ExpectStatus)
	}
	return rtt, nil
}
