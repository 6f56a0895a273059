package monitor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"testing"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// startAgent runs a real lvs-agent handler with a real sampler of this test
// process on a loopback socket and waits for its first sample.
func startAgent(t *testing.T) (addr string, stop func()) {
	t.Helper()
	src, err := agent.NewProcessSource(os.Getpid(), agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := agent.NewSampler(src, agent.MinInterval, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go s.Run(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := agent.NewServer("", agent.NewHandler(s), nil)
	go srv.Serve(ln)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := s.Latest(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("agent produced no sample in 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			srv.Close()
			cancel()
		}
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// startBackend runs an HTTP "real server" on addr (":0" picks a port).
func startBackend(t *testing.T, addr string) (netip.AddrPort, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }), ReadHeaderTimeout: time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return netip.MustParseAddrPort(ln.Addr().String()), func() { srv.Close() }
}

// TestRealAgentsAndProbes drives one cycle after another over real sockets:
// a real agent's /v1/load, real HTTP probes of real servers.
func TestRealAgentsAndProbes(t *testing.T) {
	agentAddr, stopAgent := startAgent(t)
	rs1, _ := startBackend(t, "127.0.0.1:0")
	rs2, stopRS2 := startBackend(t, "127.0.0.1:0")

	conf := fmt.Sprintf(`
interval = "2s"
agent_timeout = "1s"
probe_timeout = "1s"
state_dir = %q
[weight]
controller = "lvs"
[availability]
fall = 1
rise = 1
slow_start = "0s"
[[service]]
address = "192.0.2.1:80/tcp"
[service.probe]
type = "http"
path = "/"
reference = "100ms"
[[service.server]]
address = %q
weight = 10
agent = %q
[[service.server]]
address = %q
weight = 10
agent = %q
`, t.TempDir(), rs1, agentAddr, rs2, agentAddr)
	cfg, err := ParseConfig("real.toml", []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	table := ipvs.NewMem()
	svc := cfg.Services[0].Key
	must(t, table.AddService(svc, "wrr"))
	must(t, table.AddDestination(svc, rs1, 10))
	must(t, table.AddDestination(svc, rs2, 10))
	store, err := NewFileStore(cfg.StateDir)
	must(t, err)
	m, err := New(cfg, Deps{Table: table, Agents: NewHTTPAgentClient(), Prober: NetProber{}, Store: store}, false)
	must(t, err)

	rep := cycle(t, m)
	for _, s := range rep.Dests {
		if s.AgentErr != nil || s.ProbeErr != nil {
			t.Fatalf("%s: agent error %v, probe error %v", s.Key, s.AgentErr, s.ProbeErr)
		}
		if s.ProbeRTT <= 0 || s.Decision.Trace.Load < 0 || s.Decision.Trace.Load > 1 {
			t.Errorf("%s: rtt %v load %v", s.Key, s.ProbeRTT, s.Decision.Trace.Load)
		}
		// A lightly loaded test process: the weight rises from 10.
		if s.KernelWeight <= 10 {
			t.Errorf("%s: weight %d, want above 10 for a light load %.3f", s.Key, s.KernelWeight, s.Decision.Trace.Load)
		}
	}

	// The real agent's running CPU totals: the next cycle, a few samples
	// later, averages CPU over the time between the two polls.
	if s := statusOf(t, rep, rs1); s.CPUSpan != 0 || s.Report.CPUTime == nil {
		t.Errorf("first poll: cpu span %v, cpu_time %+v; want 0 and totals", s.CPUSpan, s.Report.CPUTime)
	}
	time.Sleep(5 * agent.MinInterval)
	rep = cycle(t, m)
	if s := statusOf(t, rep, rs1); !(s.CPUSpan >= 2*agent.MinInterval.Seconds()) || s.Decision.Trace.Inputs.CPU < 0 || s.Decision.Trace.Inputs.CPU > 1 {
		t.Errorf("second poll: cpu %v over %vs, want a busy fraction over at least %v", s.Decision.Trace.Inputs.CPU, s.CPUSpan, 2*agent.MinInterval)
	}

	// The real server stops answering: weight 0; it answers again: restored.
	before := statusOf(t, rep, rs2).KernelWeight
	stopRS2()
	rep = cycle(t, m)
	if s := statusOf(t, rep, rs2); s.KernelWeight != 0 || s.State != policy.Down {
		t.Fatalf("stopped server: weight %d state %s, want 0 down", s.KernelWeight, s.State)
	}
	startBackend(t, rs2.String())
	rep = cycle(t, m)
	if s := statusOf(t, rep, rs2); s.KernelWeight < before || s.State != policy.Managed {
		t.Errorf("restarted server: weight %d state %s, want ≥ %d managed", s.KernelWeight, s.State, before)
	}

	// The agent dies while the servers answer: weights kept.
	w1 := statusOf(t, rep, rs1).KernelWeight
	stopAgent()
	rep = cycle(t, m)
	s := statusOf(t, rep, rs1)
	if s.KernelWeight != w1 || s.State != policy.Managed {
		t.Errorf("dead agent: weight %d state %s, want %d kept", s.KernelWeight, s.State, w1)
	}
	var opErr *net.OpError
	if !errors.As(s.AgentErr, &opErr) {
		t.Errorf("dead agent: error %v, want a connection error", s.AgentErr)
	}
}
