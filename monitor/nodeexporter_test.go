package monitor

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/nodeexp"
	"lvs-feedback/policy"
)

// exposition is a node_exporter reply of a 1-CPU server with the given
// CPU seconds, 2 of 8 GB used, 3 runnable tasks (node_exporter's reader
// and two more), sda with ioSeconds of I/O and / 10 % full.
func exposition(idle, user, ioSeconds, boot float64) string {
	return fmt.Sprintf(`# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} %g
node_cpu_seconds_total{cpu="0",mode="user"} %g
# TYPE node_memory_MemTotal_bytes gauge
node_memory_MemTotal_bytes 8e+09
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes 6e+09
# TYPE node_procs_running gauge
node_procs_running 3
# TYPE node_boot_time_seconds gauge
node_boot_time_seconds %g
# TYPE node_disk_io_time_seconds_total counter
node_disk_io_time_seconds_total{device="sda"} %g
# TYPE node_filesystem_size_bytes gauge
node_filesystem_size_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 100
# TYPE node_filesystem_free_bytes gauge
node_filesystem_free_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 90
# TYPE node_filesystem_avail_bytes gauge
node_filesystem_avail_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 90
`, idle, user, boot, ioSeconds)
}

// scripted serves one exposition after another on a loopback socket, the
// last one again once they run out; stop closes it.
type scripted struct {
	mu      sync.Mutex
	replies []string
}

func (s *scripted) push(r ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r...)
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	body := s.replies[0]
	if len(s.replies) > 1 {
		s.replies = s.replies[1:]
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(body))
}

// A server whose source is node_exporter, polled by the real monitor over
// loopback: the first cycle measures nothing and keeps the weight, without
// a warning; the second uses the figures derived from the two scrapes; a
// reboot between scrapes is again no data; an exporter that stops
// answering is an agent failure like any other.
func TestNodeExporterSource(t *testing.T) {
	exp := &scripted{}
	exp.push(
		exposition(100, 50, 10, 1.7e9),
		exposition(101, 54, 12, 1.7e9),      // +5 s: 4 busy, 1 idle; 2 s of I/O
		exposition(1, 2, 0, 1.7e9+3600),     // rebooted
		exposition(2.5, 5.5, 3, 1.7e9+3600), // +5 s: 3.5 busy, 1.5 idle; 3 s of I/O
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: exp, ReadHeaderTimeout: time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	rs1, _ := startBackend(t, "127.0.0.1:0")

	conf := fmt.Sprintf(`
interval = "2s"
agent_timeout = "1s"
probe_timeout = "1s"
state_dir = %q
[weight]
controller = "lvs"
[coefficients]
input = 0.0
cpu = 0.4
memory = 0.2
disk = 0.2
response = 0.0
process = 0.2
[[service]]
address = "192.0.2.1:80/tcp"
[[service.server]]
address = %q
weight = 10
source = "node_exporter"
agent = "http://%s/metrics"
`, t.TempDir(), rs1, ln.Addr())
	cfg, err := ParseConfig("nodeexp.toml", []byte(conf))
	must(t, err)
	if got, want := cfg.Services[0].Servers[0].AgentAddr, "http://"+ln.Addr().String()+"/metrics"; got != want {
		t.Fatalf("agent address %q, want %q", got, want)
	}
	table := ipvs.NewMem()
	svc := cfg.Services[0].Key
	must(t, table.AddService(svc, "wrr"))
	must(t, table.AddDestination(svc, rs1, 10))
	store, err := NewFileStore(cfg.StateDir)
	must(t, err)
	var logs bytes.Buffer
	m, err := New(cfg, Deps{Table: table, Agents: NewHTTPAgentClient(), Prober: NetProber{}, Store: store,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}, false)
	must(t, err)

	weight := 10
	notMeasured := func(when string) {
		t.Helper()
		s := statusOf(t, cycle(t, m), rs1)
		if !errors.Is(s.AgentErr, nodeexp.ErrNoBaseline) || !math.IsNaN(s.Decision.Trace.Load) || s.KernelWeight != weight {
			t.Fatalf("%s: agent error %v, load %v, weight %d; want not measured, weight %d kept", when, s.AgentErr, s.Decision.Trace.Load, s.KernelWeight, weight)
		}
		if strings.Contains(logs.String(), "agent not answering") {
			t.Errorf("%s: a scrape that answered was logged as a failure:\n%s", when, logs.String())
		}
	}
	measured := func(when string, cpu, disk float64) {
		t.Helper()
		s := statusOf(t, cycle(t, m), rs1)
		in := s.Decision.Trace.Inputs
		// memory 1 − 6/8; processes (3 − 1) per CPU; disk: I/O over the
		// 5 s the CPU counters say passed (/ is 10 % full).
		if s.AgentErr != nil || math.Abs(in.CPU-cpu) > 1e-9 || in.Memory != 0.25 || math.Abs(in.Disk-disk) > 1e-9 || in.Process != 2 ||
			s.Report.Source != nodeexp.SourceName {
			t.Fatalf("%s: agent error %v, inputs %+v; want cpu %v, memory 0.25, disk %v, process 2", when, s.AgentErr, in, cpu, disk)
		}
		if want := 0.4*cpu + 0.2*0.25 + 0.2*disk + 0.2*2; math.Abs(s.Decision.Trace.Load-want) > 1e-9 {
			t.Errorf("%s: load %v, want %v", when, s.Decision.Trace.Load, want)
		}
		weight = s.KernelWeight
	}
	notMeasured("first scrape")
	measured("second scrape", 0.8, 0.4)
	notMeasured("after the reboot")
	measured("after the reboot, second scrape", 0.7, 0.6)

	srv.Close()
	s := statusOf(t, cycle(t, m), rs1)
	if s.AgentErr == nil || errors.Is(s.AgentErr, nodeexp.ErrNoBaseline) || s.State != policy.Managed || s.KernelWeight != weight {
		t.Errorf("exporter gone: error %v, state %s, weight %d; want a failure, managed, weight %d kept", s.AgentErr, s.State, s.KernelWeight, weight)
	}
	if !strings.Contains(logs.String(), "agent not answering") {
		t.Errorf("an exporter that stopped answering was not logged:\n%s", logs.String())
	}
}

func TestNodeExporterSourceConfig(t *testing.T) {
	base := `
[[service]]
address = "192.0.2.1:80/tcp"
[[service.server]]
address = "[2001:db8::11]:80"
weight = 10
`
	for _, tc := range []struct {
		extra, want, err string
	}{
		{`source = "node_exporter"`, "http://[2001:db8::11]:9100/metrics", ""},
		{"source = \"node_exporter\"\nagent = \"https://n1.example:9100/metrics\"", "https://n1.example:9100/metrics", ""},
		{`source = "lvs-agent"`, "[2001:db8::11]:9771", ""},
		{"source = \"node_exporter\"\nagent = \"10.0.0.5:9100\"", "", "service[0].server[0].agent: want the node_exporter URL"},
		{"source = \"node_exporter\"\nagent = \"http://10.0.0.5:9100\"", "", "has no path"},
		{`source = "prometheus"`, "", `service[0].server[0].source: must be "lvs-agent" (the default) or "node_exporter", got "prometheus"`},
	} {
		cfg, err := ParseConfig("t.toml", []byte(base+tc.extra+"\n"))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.extra, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.extra, err)
			continue
		}
		if got := cfg.Services[0].Servers[0].AgentAddr; got != tc.want {
			t.Errorf("%q: agent %q, want %q", tc.extra, got, tc.want)
		}
	}
}
