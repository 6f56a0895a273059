package sim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"strings"
	"sync"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
)

// The simulated service and its servers' addresses.
var simService = ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.MustParseAddrPort("192.0.2.1:80")}

func serverAddr(k int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(k / 250), byte(k%250 + 1)}), 80)
}

func agentAddr(k int) string {
	a := serverAddr(k).Addr()
	return netip.AddrPortFrom(a, agent.DefaultPort).String()
}

// MonitorConfig builds the monitor configuration a policy runs with: base
// (monitor TOML without [[service]]) followed by the scenario's service and
// servers (http probe with the scenario's reference, the servers'
// configured weights), checked by monitor.ParseConfig like a file.
func MonitorConfig(name, base string, sc *Scenario) (monitor.Config, error) {
	var b strings.Builder
	b.WriteString(base)
	fmt.Fprintf(&b, "\n[[service]]\naddress = %q\n[service.probe]\ntype = \"http\"\npath = \"/\"\nreference = %q\n",
		simService.String(), sc.Probe.Reference.String())
	for k, s := range sc.Servers {
		fmt.Fprintf(&b, "[[service.server]]\naddress = %q\nweight = %d\nagent = %q\n", serverAddr(k).String(), s.Weight, agentAddr(k))
	}
	cfg, err := monitor.ParseConfig(name, []byte(b.String()))
	if err != nil {
		return monitor.Config{}, fmt.Errorf("monitor configuration of policy %q: %w", name, err)
	}
	return cfg, nil
}

// monitorPolicy runs the real lvs-monitor (monitor.Monitor) in the loop:
// every configured interval the simulator calls Cycle, which reads the
// simulated table, probes and polls the simulated agents, and writes
// weights back through the table.
type monitorPolicy struct {
	name string
	cfg  monitor.Config
	m    *monitor.Monitor
	tab  *simTable
	ag   *simAgents
	pr   *simProber
	// With the backlog guard on, Tick runs every tick (the greatest
	// common divisor of the interval and the check period) and calls
	// Cycle at nextCycle, Guard at nextGuard in between.
	tick, nextCycle, nextGuard float64
	// For diagnostics (tests): dryRun runs the monitor without writing
	// weights, onCycle receives every cycle's report.
	dryRun  bool
	onCycle func(now float64, rep monitor.CycleReport)
}

func newMonitorPolicy(name, base string, sc *Scenario) (*monitorPolicy, error) {
	cfg, err := MonitorConfig(name, base, sc)
	if err != nil {
		return nil, err
	}
	tick := cfg.Interval.Seconds()
	if cfg.Guard.Enabled() {
		tick = gcd(cfg.Interval, cfg.Guard.Check).Seconds()
	}
	return &monitorPolicy{name: name, cfg: cfg, tick: tick}, nil
}

// phase puts the first cycle at fraction u of the interval, as every
// policy's, and the ticks (guard checks) on a grid through it.
func (p *monitorPolicy) phase(u float64) float64 {
	p.nextCycle = u * p.cfg.Interval.Seconds()
	return math.Mod(p.nextCycle, p.tick)
}

func (p *monitorPolicy) Name() string      { return p.name }
func (p *monitorPolicy) Kernel() bool      { return true }
func (p *monitorPolicy) Interval() float64 { return p.tick }

// gcd is the greatest common divisor of two durations, in whole
// milliseconds (at least 1 ms).
func gcd(a, b time.Duration) time.Duration {
	x, y := a.Milliseconds(), b.Milliseconds()
	for y != 0 {
		x, y = y, x%y
	}
	return time.Duration(max(x, 1)) * time.Millisecond
}
func (p *monitorPolicy) Start(r *run) error {
	// The operator's table: every server at its configured weight.
	for k, s := range r.sc.Servers {
		r.dests[k].Weight = s.Weight
	}
	p.tab = &simTable{r: r, sched: r.schedN}
	p.ag = &simAgents{r: r}
	p.pr = &simProber{r: r, timeout: p.cfg.ProbeTimeout}
	m, err := monitor.New(p.cfg, monitor.Deps{
		Table:  p.tab,
		Agents: p.ag,
		Prober: p.pr,
		Store:  &memStore{},
		Now:    r.simTime,
	}, p.dryRun)
	if err != nil {
		return err
	}
	p.m = m
	return nil
}

func (p *monitorPolicy) Tick(r *run) {
	const eps = 1e-6
	var err error
	switch {
	case r.now+eps >= p.nextCycle:
		p.nextCycle = r.now + p.cfg.Interval.Seconds()
		p.nextGuard = r.now + p.cfg.Guard.Check.Seconds()
		p.pr.measure()
		var rep monitor.CycleReport
		rep, err = p.m.Cycle(context.Background())
		if p.onCycle != nil {
			p.onCycle(r.now, rep)
		}
	case p.cfg.Guard.Enabled() && r.now+eps >= p.nextGuard:
		p.nextGuard = r.now + p.cfg.Guard.Check.Seconds()
		_, err = p.m.Guard(context.Background())
	}
	if err != nil {
		r.tickErrs++
		if r.firstErr == nil {
			r.firstErr = err
		}
	}
}
func (p *monitorPolicy) AfterEvent(*run, *EventSpec) {}
func (p *monitorPolicy) Route(*run, int) int         { return -1 }

// simTable is the simulated director's IPVS table (ipvs.Table): one
// service whose destinations are the run's servers in list order, with the
// live weights and connection gauges and the estimator-refreshed
// connection counters. SetWeight is a compare-and-set like the kernel
// implementation's, and runs the scheduler's upd_dest.
type simTable struct {
	mu    sync.Mutex
	r     *run
	sched string
}

var _ ipvs.Table = (*simTable)(nil)

func (t *simTable) Services() ([]ipvs.Service, error) {
	return []ipvs.Service{{Key: simService, Scheduler: t.sched}}, nil
}

func (t *simTable) Destinations(svc ipvs.ServiceKey) ([]ipvs.Destination, error) {
	if svc != simService {
		return nil, fmt.Errorf("list destinations of %s: %w", svc, ipvs.ErrNotFound)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ipvs.Destination, len(t.r.dests))
	for k, d := range t.r.dests {
		out[k] = ipvs.Destination{
			Addr: serverAddr(k), Weight: d.Weight,
			ActiveConns: d.Active, InactiveConns: d.Inactive,
			Connections: t.r.pub[k],
		}
	}
	return out, nil
}

func (t *simTable) SetWeight(svc ipvs.ServiceKey, dst netip.AddrPort, from, to int) error {
	op := fmt.Sprintf("set weight of %s in %s", dst, svc)
	if to < 0 || to > ipvs.MaxWeight {
		return fmt.Errorf("%s: weight %d: %w", op, to, ipvs.ErrWeightRange)
	}
	if svc != simService {
		return fmt.Errorf("%s: %w", op, ipvs.ErrNotFound)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.r.dests {
		if serverAddr(k) != dst {
			continue
		}
		if t.r.dests[k].Weight != from {
			return fmt.Errorf("%s: table holds weight %d, not %d: %w", op, t.r.dests[k].Weight, from, ipvs.ErrWeightChanged)
		}
		t.r.setWeight(k, to, true)
		return nil
	}
	return fmt.Errorf("%s: %w", op, ipvs.ErrNotFound)
}

// SetWeights applies each change as SetWeight does, in order: the
// simulated table is in memory, so there is no dump to share.
func (t *simTable) SetWeights(svc ipvs.ServiceKey, changes []ipvs.WeightChange) []error {
	errs := make([]error, len(changes))
	for i, c := range changes {
		errs[i] = t.SetWeight(svc, c.Dest, c.From, c.To)
	}
	return errs
}

// simAgents answers the monitor's agent polls with each simulated agent's
// latest sample (monitor.AgentClient). An agent whose server is down or
// whose agent is stopped does not answer; a just-started agent has no
// sample for its first window.
type simAgents struct{ r *run }

var errAgentUnreachable = errors.New("sim: agent unreachable")

func (a *simAgents) Fetch(_ context.Context, addr string, timeout time.Duration) (agent.Report, error) {
	for k := range a.r.sc.Servers {
		if agentAddr(k) != addr {
			continue
		}
		s := a.r.srv[k]
		if s.down || s.agentDown {
			return agent.Report{}, fmt.Errorf("fetch %s: %w", addr, errAgentUnreachable)
		}
		if !a.r.agents[k].have {
			return agent.Report{}, fmt.Errorf("fetch %s: %w", addr, agent.ErrNotReady)
		}
		return a.r.agents[k].report, nil
	}
	return agent.Report{}, fmt.Errorf("fetch %s: no such agent", addr)
}

// simProber answers the monitor's response probes (monitor.Prober). The
// simulator measures every server just before each cycle (measure): a
// probe is a small request of the scenario's probe demand that would share
// the server with the n requests present, so it takes rtt +
// demand/rate(n+1), times (1 + noise). A down server refuses; a probe
// slower than probe_timeout times out, as a real one would. A probe
// between cycles (the backlog guard's) answers from the last measurement,
// but whether the server is down is read at the time.
type simProber struct {
	r       *run
	timeout time.Duration
	rtt     []time.Duration
	err     []error
}

var errRefused = errors.New("sim: connection refused")

func (p *simProber) measure() {
	n := len(p.r.sc.Servers)
	p.rtt = make([]time.Duration, n)
	p.err = make([]error, n)
	pm := p.r.sc.Probe
	for k := 0; k < n; k++ {
		s := p.r.srv[k]
		nz := p.r.probeR[k].NormFloat64()
		if s.down {
			p.err[k] = errRefused
			continue
		}
		sec := pm.RTT.Seconds()
		if rate := s.rate(len(s.jobs) + 1); rate > 0 {
			sec += pm.Demand.Seconds() / rate
		} else {
			sec = math.Inf(1)
		}
		sec *= math.Max(0.1, 1+pm.Noise*nz)
		if sec >= p.timeout.Seconds() {
			p.err[k] = context.DeadlineExceeded
			continue
		}
		p.rtt[k] = time.Duration(sec * float64(time.Second))
	}
}

func (p *simProber) Probe(_ context.Context, server netip.AddrPort, _ monitor.ProbeConfig, _ time.Duration) (time.Duration, error) {
	for k := range p.rtt {
		if serverAddr(k) == server {
			// Between cycles (the backlog guard probes a suspect) a server
			// is up or down as it is now; the rest as last measured. At a
			// cycle, measure has just run: the same answer.
			switch {
			case p.r.srv[k].down:
				return 0, fmt.Errorf("probe %s: %w", server, errRefused)
			case errors.Is(p.err[k], errRefused):
				return p.r.sc.Probe.RTT, nil
			}
			if p.err[k] != nil {
				return 0, fmt.Errorf("probe %s: %w", server, p.err[k])
			}
			return p.rtt[k], nil
		}
	}
	return 0, fmt.Errorf("probe %s: %w", server, errRefused)
}

// memStore is an in-memory monitor.Store.
type memStore struct {
	mu sync.Mutex
	st monitor.State
}

func (s *memStore) Load() (monitor.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		return monitor.State{}, fmt.Errorf("sim state: %w", fs.ErrNotExist)
	}
	return copyState(s.st), nil
}

func (s *memStore) Save(st monitor.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st = copyState(st)
	return nil
}

func copyState(st monitor.State) monitor.State {
	out := make(monitor.State, len(st))
	for k, v := range st {
		out[k] = v
	}
	return out
}
