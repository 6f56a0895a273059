package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"lvs-feedback/internal/sdnotifytest"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lvs-feedback/control/controltest"
	"lvs-feedback/monitor"
	"lvs-feedback/scheduler"
)

var discard = slog.New(slog.DiscardHandler)

// metricsRig is a monitor after a few cycles with a drained server and a
// failing agent, its series on a registry with the Go and process
// collectors, as lvs-monitor serves it.
func metricsRig(t *testing.T) *controltest.Rig {
	r := controltest.New(t, "")
	r.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.Cycle()
	if err := r.Monitor.Drain(controltest.Service, controltest.B); err != nil {
		t.Fatal(err)
	}
	r.Agents.Fail(controltest.C)
	r.Prober.Set(controltest.A, 30*time.Millisecond)
	r.Cycle()
	r.Cycle()
	return r
}

func scrape(t *testing.T, r *controltest.Rig) []byte {
	t.Helper()
	srv := httptest.NewServer(newMetricsServer(r.Registry, discard).Handler)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return body
}

func TestMetricsEndpoint(t *testing.T) {
	r := metricsRig(t)
	body := scrape(t, r)
	for _, want := range []string{
		`lvs_monitor_server_weight{server="198.51.100.12:80",service="192.0.2.10:80/tcp"} 0`,
		`lvs_monitor_server_drained{server="198.51.100.12:80",service="192.0.2.10:80/tcp"} 1`,
		`lvs_monitor_server_input{input="response",server="198.51.100.11:80",service="192.0.2.10:80/tcp"} 0.3`,
		`lvs_monitor_agent_poll_errors_total{server="198.51.100.13:80",service="192.0.2.10:80/tcp"} 2`,
		`lvs_monitor_config_last_reload_successful 1`,
		`lvs_monitor_cycle_duration_seconds_count 3`,
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if problems, err := testutil.GatherAndLint(r.Registry); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// promtool (Debian package prometheus) must find nothing to say about
// what /metrics serves.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install --no-install-recommends prometheus); the series are still linted by TestMetricsEndpoint")
	}
	body := scrape(t, metricsRig(t))
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestMetricsServerTimeouts(t *testing.T) {
	s := newMetricsServer(metricsRig(t).Registry, discard)
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("a timeout or limit is unset: %+v", s)
	}
	srv := httptest.NewServer(s.Handler)
	defer srv.Close()
	for path, want := range map[string]int{"/": 200, "/nothing": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d", resp.StatusCode)
	}
}

// 200 connections from one address that send half a request header and
// hold it hold at most metricsMaxConns descriptors, and a scrape from
// another address (Prometheus) is answered meanwhile.
func TestMetricsServerBoundsConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, limiter := serveMetrics(ln, metricsRig(t).Registry, discard)
	defer srv.Close()
	var holders []net.Conn
	defer func() {
		for _, c := range holders {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, c)
	}
	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext,
	}}
	for range 3 {
		resp, err := scraper.Get("http://" + ln.Addr().String() + "/metrics")
		if err != nil {
			t.Fatalf("scrape during the flood: %v (limiter %+v)", err, limiter.Stats())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "lvs_monitor_build_info") {
			t.Fatalf("scrape during the flood: %d, %d bytes", resp.StatusCode, len(body))
		}
	}
	st := limiter.Stats()
	if st.Open > metricsMaxConns || st.Accepted < 200 || st.Evicted < 200-metricsMaxConns {
		t.Errorf("limiter %+v: want at most %d open, every connection accepted, the flood's evicted", st, metricsMaxConns)
	}
}

// The main loop sends READY=1 after the first complete cycle and
// WATCHDOG=1 after every cycle.
func TestMainLoopNotifies(t *testing.T) {
	msgs := sdnotifytest.Listen(t)
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	r := controltest.New(t, strings.Replace(controltest.Config, `interval = "1s"
agent_timeout = "500ms"
probe_timeout = "500ms"`, `interval = "100ms"
agent_timeout = "50ms"
probe_timeout = "50ms"`, 1))
	n := newNotifier(discard)
	if n.watchdog != 30*time.Second {
		t.Fatalf("watchdog %v", n.watchdog)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- scheduler.Run(ctx, r.Monitor, scheduler.Config{Monitor: r.Monitor.Status().Config, AfterCycle: func(rep monitor.CycleReport, err error) {
			n.cycleDone(rep, err)
		}})
	}()
	first := sdnotifytest.Next(t, msgs)
	if !strings.HasPrefix(first, "READY=1\nSTATUS=cycle at ") || !strings.Contains(first, "3 servers") || !strings.HasSuffix(first, "\nWATCHDOG=1") {
		t.Errorf("first notification %q", first)
	}
	for range 2 {
		if m := sdnotifytest.Next(t, msgs); strings.Contains(m, "READY=1") || !strings.HasSuffix(m, "WATCHDOG=1") {
			t.Errorf("later notification %q", m)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
