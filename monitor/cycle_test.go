package monitor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// stubAgents answers agent polls from a map; a missing address fails.
// With mirror set, every report's CPU is mirrored around the LVS target
// (1.9 − cpu): a benchmark flips it to move every weight every cycle.
type stubAgents struct {
	mu      sync.RWMutex // polls run concurrently: they only read
	reports map[string]agent.Report
	mirror  bool
}

func (s *stubAgents) Fetch(_ context.Context, addr string, _ time.Duration) (agent.Report, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.reports[addr]
	if !ok {
		return agent.Report{}, fmt.Errorf("agent %s: connection refused", addr)
	}
	if s.mirror {
		r.CPU = 1.9 - r.CPU
	}
	return r, nil
}

func (s *stubAgents) set(addr string, cpu float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports[addr] = agent.Report{Schema: agent.SchemaVersion, Time: time.Now(), CPU: cpu}
}

func (s *stubAgents) remove(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reports, addr)
}

// stubProber answers probes with a fixed time; servers in down fail.
type stubProber struct {
	mu   sync.Mutex
	down map[netip.AddrPort]bool
	slow map[netip.AddrPort]bool // its probes time out
}

func (p *stubProber) Probe(_ context.Context, s netip.AddrPort, _ ProbeConfig, _ time.Duration) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.down[s]:
		return 0, fmt.Errorf("tcp probe %s: connection refused", s)
	case p.slow[s]:
		return 0, fmt.Errorf("tcp probe %s: %w", s, context.DeadlineExceeded)
	}
	return time.Millisecond, nil
}

func (p *stubProber) setSlow(s netip.AddrPort, slow bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slow == nil {
		p.slow = map[netip.AddrPort]bool{}
	}
	p.slow[s] = slow
}

func (p *stubProber) setDown(s netip.AddrPort, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down[s] = down
}

var (
	svcKey = ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.MustParseAddrPort("192.0.2.10:80")}
	rsA    = netip.MustParseAddrPort("198.51.100.11:80")
	rsB    = netip.MustParseAddrPort("198.51.100.12:80")
	rsC    = netip.MustParseAddrPort("198.51.100.13:80")
	rsX    = netip.MustParseAddrPort("198.51.100.99:80") // in the table, not in the config
)

func agentOf(rs netip.AddrPort) string { return netip.AddrPortFrom(rs.Addr(), 9771).String() }

// cpuOnly makes the aggregate load equal the CPU input, so expected weights
// are easy to compute by hand.
// cpuOnlyConfig runs the LVS formula on CPU alone; the tests built on it
// check the formula's weights. capacityConfig switches it to the capacity
// controller.
const cpuOnlyConfig = `
interval = "1s"
agent_timeout = "500ms"
probe_timeout = "500ms"
[availability]
fall = 1
rise = 1
[weight]
controller = "lvs"
[coefficients]
input = 0.0
cpu = 1.0
memory = 0.0
disk = 0.0
response = 0.0
process = 0.0
[[service]]
address = "192.0.2.10:80/tcp"
[[service.server]]
address = "198.51.100.11:80"
weight = 10
[[service.server]]
address = "198.51.100.12:80"
weight = 10
[[service.server]]
address = "198.51.100.13:80"
weight = 10
`

type rig struct {
	t      *testing.T
	cfg    Config
	table  *ipvs.Mem
	agents *stubAgents
	prober *stubProber
	dir    string
	now    time.Time // the monitor's clock; advance it with r.advance
}

func (r *rig) clock() time.Time { return r.now }

func (r *rig) advance(d time.Duration) { r.now = r.now.Add(d) }

func newRig(t *testing.T) *rig {
	t.Helper()
	cfg, err := ParseConfig("test.toml", []byte(cpuOnlyConfig))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{
		t:      t,
		cfg:    cfg,
		table:  ipvs.NewMem(),
		agents: &stubAgents{reports: map[string]agent.Report{}},
		prober: &stubProber{down: map[netip.AddrPort]bool{}},
		dir:    t.TempDir(),
		now:    time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	}
	r.cfg.StateDir = r.dir
	must(t, r.table.AddService(svcKey, "wrr"))
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC, rsX} {
		must(t, r.table.AddDestination(svcKey, rs, 10))
		r.agents.set(agentOf(rs), 0.95) // at target: weights stay
	}
	return r
}

func (r *rig) monitor(dryRun bool) *Monitor {
	r.t.Helper()
	store, err := NewFileStore(r.dir)
	must(r.t, err)
	m, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock}, dryRun)
	must(r.t, err)
	return m
}

// monitorLogging is r.monitor(false) logging at the info level into buf.
func (r *rig) monitorLogging(buf *bytes.Buffer) *Monitor {
	r.t.Helper()
	store, err := NewFileStore(r.dir)
	must(r.t, err)
	m, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock,
		Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}, false)
	must(r.t, err)
	return m
}

func (r *rig) weight(rs netip.AddrPort) int {
	r.t.Helper()
	dests, err := r.table.Destinations(svcKey)
	must(r.t, err)
	for _, d := range dests {
		if d.Addr == rs {
			return d.Weight
		}
	}
	r.t.Fatalf("%s not in table", rs)
	return -1
}

// operatorSets changes a weight the way ipvsadm -e would.
func (r *rig) operatorSets(rs netip.AddrPort, w int) {
	r.t.Helper()
	must(r.t, r.table.SetWeight(svcKey, rs, r.weight(rs), w))
}

func cycle(t *testing.T, m *Monitor) CycleReport {
	t.Helper()
	rep, err := m.Cycle(context.Background())
	if err != nil {
		t.Fatalf("cycle: %v", err)
	}
	return rep
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCycleFollowsLoad(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	r.agents.set(agentOf(rsA), 0.825) // 10 + 5·∛0.125 = 12.5 → 13
	r.agents.set(agentOf(rsB), 1.95)  // 10 + 5·∛(−1) = 5
	rep := cycle(t, m)
	if got := r.weight(rsA); got != 13 {
		t.Errorf("light server A: weight %d, want 13", got)
	}
	if got := r.weight(rsB); got != 5 {
		t.Errorf("hot server B: weight %d, want 5", got)
	}
	if got := r.weight(rsC); got != 10 {
		t.Errorf("server C at target: weight %d, want 10", got)
	}
	if got := r.weight(rsX); got != 10 {
		t.Errorf("unlisted server X touched: weight %d, want 10", got)
	}
	if rep.Writes != 2 {
		t.Errorf("writes %d, want 2", rep.Writes)
	}
	// Second cycle, same loads: A 12.5 + 2.5 = 15, B 5 − 5 → floor 1.
	cycle(t, m)
	if got := r.weight(rsA); got != 15 {
		t.Errorf("A after two cycles: %d, want 15", got)
	}
	if got := r.weight(rsB); got != 1 {
		t.Errorf("B after two cycles: %d, want 1 (weight.min; only unreachability gives 0)", got)
	}
	// Recovery: B idle → 1 + 5·∛0.95 = 5.915 → 6.
	r.agents.set(agentOf(rsB), 0)
	cycle(t, m)
	if got := r.weight(rsB); got != 6 {
		t.Errorf("B recovering: %d, want 6", got)
	}
}

func TestOperatorDrainIsLeftAloneAcrossRestart(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	cycle(t, m)
	r.operatorSets(rsB, 0) // ipvsadm -e … -w 0
	r.agents.set(agentOf(rsB), 0)
	r.prober.setDown(rsB, true) // even unreachable, it is the operator's
	for range 3 {
		cycle(t, m)
	}
	if got := r.weight(rsB); got != 0 {
		t.Fatalf("drained server B: weight %d, want 0", got)
	}
	// Restart: the drain is remembered even after the server answers again.
	r.prober.setDown(rsB, false)
	m2 := r.monitor(false)
	rep := cycle(t, m2)
	if got := r.weight(rsB); got != 0 {
		t.Fatalf("after restart B un-drained: weight %d", got)
	}
	if st := statusOf(t, rep, rsB).State; st != policy.DrainedByOperator {
		t.Errorf("B state %s, want %s", st, policy.DrainedByOperator)
	}
	// Undrain with ipvsadm: picked up, and the value becomes the default.
	r.operatorSets(rsB, 7)
	rep = cycle(t, m2)
	s := statusOf(t, rep, rsB)
	if s.State != policy.Managed || s.DefaultWeight != 7 {
		t.Errorf("after undrain: state %s default %d, want managed 7", s.State, s.DefaultWeight)
	}
	// The same cycle runs the formula from 7 at load 0: 7 + 5·∛0.95 = 11.9,
	// and slow start begins at 10 %: 1.19 → 1.
	if got := r.weight(rsB); got != 1 {
		t.Errorf("after undrain at load 0: weight %d, want 1 (slow start)", got)
	}
	r.advance(15 * time.Second) // half the 30 s window: 50 % of 11.9 + 4.9 = 16.8 → 8.4 → 8
	cycle(t, m2)
	if got := r.weight(rsB); got != 8 {
		t.Errorf("half-way through slow start: weight %d, want 8", got)
	}
	r.advance(15 * time.Second) // ramp over: 16.8 + 4.9 = 21.7 → 22
	cycle(t, m2)
	if got := r.weight(rsB); got != 22 {
		t.Errorf("after slow start: weight %d, want 22", got)
	}
}

func TestRestartRestoresServerTheDaemonZeroed(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	r.agents.set(agentOf(rsC), 0.825)
	cycle(t, m) // C: 12.5 → 13
	r.prober.setDown(rsC, true)
	rep := cycle(t, m)
	if got := r.weight(rsC); got != 0 {
		t.Fatalf("unreachable C: weight %d, want 0", got)
	}
	if s := statusOf(t, rep, rsC); s.State != policy.Down || s.ProbeErr == nil {
		t.Errorf("C status %+v", s)
	}
	// The daemon restarts while C is down; C comes back.
	r.prober.setDown(rsC, false)
	m2 := r.monitor(false)
	cycle(t, m2)
	// Slow start from 10 % of the weight it had before it went down: 1.3 → 1.
	if got := r.weight(rsC); got != 1 {
		t.Errorf("C after restart and recovery: weight %d, want 1 (10 %% of 13)", got)
	}
	r.advance(30 * time.Second) // ramp over; the formula continues from 13: 15.5 → 16
	cycle(t, m2)
	if got := r.weight(rsC); got != 16 {
		t.Errorf("C after slow start: weight %d, want 16", got)
	}
}

func TestMissingOrCorruptStateStartsSafe(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		r := newRig(t)
		r.operatorSets(rsA, 0) // a 0 the daemon cannot explain
		if corrupt {
			must(t, os.WriteFile(filepath.Join(r.dir, "state.json"), []byte("{not json"), 0o600))
		}
		m := r.monitor(false)
		rep := cycle(t, m)
		if got := r.weight(rsA); got != 0 {
			t.Errorf("corrupt=%v: unexplained 0 changed to %d", corrupt, got)
		}
		if s := statusOf(t, rep, rsA); s.State != policy.DrainedByOperator {
			t.Errorf("corrupt=%v: state %s", corrupt, s.State)
		}
	}
}

func TestDeadAgentKeepsWeight(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	r.agents.set(agentOf(rsA), 0.825)
	cycle(t, m) // 13
	r.agents.remove(agentOf(rsA))
	rep := cycle(t, m)
	if got := r.weight(rsA); got != 13 {
		t.Errorf("agent dead, service answering: weight %d, want 13 kept", got)
	}
	if s := statusOf(t, rep, rsA); s.AgentErr == nil || s.State != policy.Managed {
		t.Errorf("status %+v", s)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	r := newRig(t)
	m := r.monitor(true)
	r.agents.set(agentOf(rsB), 1.95)
	r.prober.setDown(rsC, true)
	rep := cycle(t, m)
	if r.weight(rsB) != 10 || r.weight(rsC) != 10 || rep.Writes != 0 {
		t.Errorf("dry run wrote: B=%d C=%d writes=%d", r.weight(rsB), r.weight(rsC), rep.Writes)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run wrote the state file: %v", err)
	}
}

// vanishingTable removes the destination just before the write reaches it,
// as another tool might.
type vanishingTable struct {
	*ipvs.Mem
	victim netip.AddrPort
}

func (v vanishingTable) SetWeights(svc ipvs.ServiceKey, changes []ipvs.WeightChange) []error {
	for _, c := range changes {
		if c.Dest == v.victim {
			if err := v.Mem.RemoveDestination(svc, c.Dest); err != nil {
				return []error{err}
			}
		}
	}
	return v.Mem.SetWeights(svc, changes)
}

// meddlingTable changes the weight just before the write, as ipvsadm might.
type meddlingTable struct {
	*ipvs.Mem
	victim netip.AddrPort
}

func (v meddlingTable) SetWeights(svc ipvs.ServiceKey, changes []ipvs.WeightChange) []error {
	for _, c := range changes {
		if c.Dest == v.victim {
			if err := v.Mem.SetWeight(svc, c.Dest, c.From, 3); err != nil {
				return []error{err}
			}
		}
	}
	return v.Mem.SetWeights(svc, changes)
}

func TestRacesBetweenReadAndWrite(t *testing.T) {
	r := newRig(t)
	store, _ := NewFileStore(r.dir)
	m, err := New(r.cfg, Deps{Table: vanishingTable{r.table, rsB}, Agents: r.agents, Prober: r.prober, Store: store}, false)
	must(t, err)
	r.agents.set(agentOf(rsA), 1.95)
	r.agents.set(agentOf(rsB), 1.95)
	rep, err := m.Cycle(context.Background())
	if err != nil {
		t.Fatalf("a vanished destination is a normal event, got error %v", err)
	}
	if rep.Writes != 1 || r.weight(rsA) != 5 {
		t.Errorf("writes %d, A weight %d; want 1 write, A 5", rep.Writes, r.weight(rsA))
	}

	r2 := newRig(t)
	store2, _ := NewFileStore(r2.dir)
	m2, err := New(r2.cfg, Deps{Table: meddlingTable{r2.table, rsB}, Agents: r2.agents, Prober: r2.prober, Store: store2}, false)
	must(t, err)
	r2.agents.set(agentOf(rsB), 1.95)
	if _, err := m2.Cycle(context.Background()); err != nil {
		t.Fatalf("a concurrent change is a normal event, got error %v", err)
	}
	if got := r2.weight(rsB); got != 3 {
		t.Errorf("the other writer's weight was overwritten: %d, want 3", got)
	}
	rep2, _ := m2.Cycle(context.Background())
	if s := statusOf(t, rep2, rsB); s.DefaultWeight != 3 {
		t.Errorf("next cycle: default %d, want 3 (another tool's weight is the new default)", s.DefaultWeight)
	}
}

func statusOf(t *testing.T, rep CycleReport, rs netip.AddrPort) DestStatus {
	t.Helper()
	for _, s := range rep.Dests {
		if s.Key.Dest == rs {
			return s
		}
	}
	t.Fatalf("%s not in cycle report", rs)
	return DestStatus{}
}

// TestTableChangesBetweenCycles: services and servers removed and added by
// other tools are normal events.
func TestTableChangesBetweenCycles(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	must(t, r.table.RemoveDestination(svcKey, rsC))
	rep := cycle(t, m)
	if len(rep.Dests) != 2 {
		t.Fatalf("C missing from the table: %d rows, want 2", len(rep.Dests))
	}
	must(t, r.table.AddDestination(svcKey, rsC, 4)) // keepalived adds it back
	r.agents.set(agentOf(rsC), 0.95)
	rep = cycle(t, m)
	if s := statusOf(t, rep, rsC); s.State != policy.Managed || s.KernelWeight != 4 {
		t.Errorf("C re-added at 4: %s weight %d, want managed 4", s.State, s.KernelWeight)
	}
	must(t, r.table.RemoveService(svcKey))
	rep, err := m.Cycle(context.Background())
	if err != nil || len(rep.Dests) != 0 {
		t.Errorf("service removed: err %v rows %d, want no error and no rows", err, len(rep.Dests))
	}
	must(t, r.table.AddService(svcKey, "wlc"))
	must(t, r.table.AddDestination(svcKey, rsA, 10))
	r.agents.set(agentOf(rsA), 1.95)
	cycle(t, m)
	// A is back, created anew: slow start from its floor, 10 % of the
	// formula's 5 (not the 10 it was re-added at).
	if got := r.weight(rsA); got != 1 {
		t.Errorf("service back: A weight %d, want 1 (slow start)", got)
	}
}

// capacityConfig is cpuOnlyConfig with the capacity controller, the given
// extra [weight] lines and the shipped coefficients: cpu = 1.0 would count
// a CPU busier than its service's with sensitivity 1.0 ÷ 0.3, where these
// tests want the CPU read as measured (the rig's agents report no disk or
// memory pressure, so the CPU is the bottleneck).
func capacityConfig(weight string) string {
	c := strings.Replace(cpuOnlyConfig, "controller = \"lvs\"\n", "controller = \"capacity\"\n"+weight, 1)
	return strings.Replace(c, "input = 0.0\ncpu = 1.0\nmemory = 0.0\ndisk = 0.0\nresponse = 0.0\nprocess = 0.0\n",
		"input = 0.1\ncpu = 0.3\nmemory = 0.1\ndisk = 0.1\nresponse = 0.3\nprocess = 0.1\n", 1)
}
