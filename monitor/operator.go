package monitor

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"lvs-feedback/ipvs"
)

// ErrNotManaged means an operator request named a service or real server
// that is not in the configuration: lvs-monitor does not own its weight
// (use ipvsadm for it).
var ErrNotManaged = errors.New("not a configured service and real server of lvs-monitor")

// Operator requests. Each waits for a running cycle to finish (they share
// one lock) and takes effect at once in the kernel and in the state file.

// Drain sets a configured real server's weight to 0 as an operator drain,
// exactly as `ipvsadm -e … -w 0` would: persisted, and never touched by the
// monitor until undrained.
func (m *Monitor) Drain(svc ipvs.ServiceKey, dst netip.AddrPort) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	key, _, err := m.configured(svc, dst)
	if err != nil {
		return err
	}
	cur, err := m.kernelWeight(svc, dst)
	if err != nil {
		return err
	}
	rec, known := m.state[key]
	if known && rec.State == DrainedByOperator && cur == 0 {
		return nil // already drained
	}
	if cur != 0 {
		if err := m.deps.Table.SetWeight(svc, dst, cur, 0); err != nil {
			return fmt.Errorf("drain %s: %w", key, err)
		}
	}
	m.state[key] = DestRecord{State: DrainedByOperator, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig}
	if m.follower {
		m.localEdits = append(m.localEdits, LocalEdit{Key: key, Weight: 0})
	}
	m.log.Info("drained by operator (lvsctl)", "service", svc, "server", dst, "old", cur, "new", 0)
	return m.saveState()
}

// Undrain gives a drained (or down) real server back its default weight —
// the configured one, or the operator's override — ramped by slow start.
func (m *Monitor) Undrain(svc ipvs.ServiceKey, dst netip.AddrPort) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	key, server, err := m.configured(svc, dst)
	if err != nil {
		return err
	}
	cur, err := m.kernelWeight(svc, dst)
	if err != nil {
		return err
	}
	rec := m.state[key]
	def := rec.DefaultWeight(server.Weight)
	av := m.cfg.Availability
	to := rampWeight(float64(def), SlowStartFactor(0, av.SlowStart, av.SlowStartFloor), m.cfg.Weight.Min)
	if err := m.deps.Table.SetWeight(svc, dst, cur, to); err != nil {
		return fmt.Errorf("undrain %s: %w", key, err)
	}
	m.state[key] = DestRecord{State: Managed, Written: to, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig}
	if m.follower {
		// The writer replays the default weight: its reconcile sees an
		// undrain at the server's default and starts its own slow start.
		m.localEdits = append(m.localEdits, LocalEdit{Key: key, Weight: def})
	}
	mem := m.memory(key)
	mem.ctrl, mem.ctrlSet = float64(def), true
	if to != def {
		mem.rampStart = m.deps.Now()
	}
	m.log.Info("undrained by operator (lvsctl)", "service", svc, "server", dst, "old", cur, "new", to, "default", def)
	return m.saveState()
}

// Reload replaces the configuration from the next cycle on. Weights,
// drains, controller and slow-start state are kept; servers added to the
// configuration are adopted at their kernel weight, removed ones are no
// longer touched.
func (m *Monitor) Reload(cfg Config) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	m.cfg = cfg
	m.reloadedAt, m.reloadErr = m.deps.Now(), nil
	m.mu.Unlock()
	m.deps.Metrics.reload(true, float64(m.reloadedAt.Unix()))
	select {
	case m.reloaded <- struct{}{}:
	default: // Run has a signal pending already
	}
	m.log.Info("configuration reloaded", "services", len(cfg.Services))
}

// ReloadFailed records a configuration that could not be loaded: the
// running configuration stays, and Status shows the error.
func (m *Monitor) ReloadFailed(err error) {
	m.mu.Lock()
	m.reloadedAt, m.reloadErr = m.deps.Now(), err
	at := m.reloadedAt
	m.mu.Unlock()
	m.deps.Metrics.reload(false, float64(at.Unix()))
	m.log.Error("configuration reload failed; the running configuration stays", "error", err)
}

// Status is what `lvsctl status` shows.
type Status struct {
	LastCycle  CycleReport
	Config     Config
	ReloadedAt time.Time   // last reload attempt; zero if none
	ReloadErr  error       // non-nil when the last reload failed
	Sync       *SyncStatus // nil for a director that runs alone
}

// Status returns the latest cycle's report and the running configuration.
// It does not wait for a running cycle.
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Status{LastCycle: m.last, Config: m.cfg, ReloadedAt: m.reloadedAt, ReloadErr: m.reloadErr, Sync: m.sync}
}

// Explanation is the whole computation of one server's weight in the last
// cycle, for `lvsctl explain`.
type Explanation struct {
	Dest         DestStatus
	Coefficients Coefficients
	Weight       WeightParams
	Terms        []Term // coefficient × normalised input, in the formula's order
	// Step is gain·∛(target − load), the formula's change this cycle
	// (NaN when the formula did not run).
	Step float64
	// Max is the weight cap, scale × default weight.
	Max float64
	// Decision says what was done with the result and why.
	Decision string
}

// Term is one input's part of the aggregate load.
type Term struct {
	Name        string
	Input       float64 // normalised
	Coefficient float64
	Product     float64
}

// Explain returns the last cycle's computation for one real server.
func (m *Monitor) Explain(svc ipvs.ServiceKey, dst netip.AddrPort) (Explanation, error) {
	st := m.Status()
	var d *DestStatus
	for i := range st.LastCycle.Dests {
		if k := st.LastCycle.Dests[i].Key; k.Service == svc && k.Dest == dst {
			d = &st.LastCycle.Dests[i]
		}
	}
	if d == nil {
		return Explanation{}, fmt.Errorf("%s %s: %w (or not in the IPVS table at the last cycle)", svc, dst, ErrNotManaged)
	}
	c, p := st.Config.Coefficients, st.Config.Weight
	in := d.Inputs
	e := Explanation{Dest: *d, Coefficients: c, Weight: p, Step: math.NaN(), Max: maxWeightFor(d.DefaultWeight, p)}
	for _, t := range []Term{
		{"input", in.Input, c.Input, 0}, {"cpu", in.CPU, c.CPU, 0}, {"memory", in.Memory, c.Memory, 0},
		{"disk", in.Disk, c.Disk, 0}, {"response", in.Response, c.Response, 0}, {"process", in.Process, c.Process, 0},
	} {
		t.Product = t.Input * t.Coefficient
		e.Terms = append(e.Terms, t)
	}
	if !math.IsNaN(d.Load) && p.Controller != "capacity" {
		e.Step = p.Gain * math.Cbrt(p.Target-d.Load)
	}
	e.Decision = explainDecision(*d, p, st.Config.Guard)
	return e, nil
}

func explainDecision(d DestStatus, p WeightParams, g GuardConfig) string {
	switch {
	case d.State == DrainedByOperator:
		return "drained by the operator: not touched"
	case d.Frozen:
		return "service frozen (fail static): too many servers unreachable at once; weight left as it was"
	case d.Wrote:
		return fmt.Sprintf("written: %s", d.Reason)
	case d.ProbeErr != nil:
		return fmt.Sprintf("unreachable (%v): weight 0 until the server answers", d.ProbeErr)
	case math.IsNaN(d.Load) && d.AgentErr != nil:
		return fmt.Sprintf("agent failed (%v), service answering: weight kept", d.AgentErr)
	case math.IsNaN(d.Load):
		return "no load computed: weight kept"
	}
	next := RoundWeight(d.ControllerAfter * d.Ramp)
	if d.GuardHeld > 0 && d.GuardRaised {
		return fmt.Sprintf("backlog guard: weight held at %d (raised from %d: far below its share of active connections while the service's backlog grew) until its active connections per unit of its weight %d are back to at least 1/%.1f of the service's median; the controller's weight is not written below it",
			d.GuardHeld, d.GuardFrom, d.GuardFrom, g.Release)
	}
	if d.GuardHeld > 0 {
		return fmt.Sprintf("backlog guard: weight held at %d (cut from %d) until the server's active connections per unit of its weight %d are back within %.1f× the service's median; the controller's weight is not written above it",
			d.GuardHeld, d.GuardFrom, d.GuardFrom, g.Release)
	}
	if p.Controller == "capacity" {
		if d.ControllerAfter == 0 || (p.Anchor > 0 && math.IsNaN(d.CapacityFactor)) {
			return fmt.Sprintf("capacity controller: no capacity decision this cycle (a server is measured at CPU ≥ %.0f%% with a connection count; below it has capacity to spare, and under %.0f%% it returns to its default weight): weight kept",
				MinCapacityBusy*100, MinCapacityBusy*50)
		}
		if p.Anchor > 0 {
			what := fmt.Sprintf("capacity per unit of default weight %.2f× the service's median", d.CapacityFactor)
			if next == d.DefaultWeight {
				what += fmt.Sprintf(" (within the anchor: the default weight %d)", next)
			}
			if next == d.KernelWeight {
				return fmt.Sprintf("not written: %s; the kernel has %d already", what, next)
			}
			return fmt.Sprintf("not written: %s; weight %d differs from the kernel's %d by %d, not more than %.0f%% of it",
				what, next, d.KernelWeight, abs(next-d.KernelWeight), p.Band*100)
		}
		return fmt.Sprintf("not written: capacity weight %d differs from the kernel's %d by %d, not more than %.0f%% of it",
			next, d.KernelWeight, abs(next-d.KernelWeight), p.Band*100)
	}
	return fmt.Sprintf("not written: new weight %d differs from the kernel's %d by %d, not more than the threshold %d",
		next, d.KernelWeight, abs(next-d.KernelWeight), p.Threshold)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// configured finds a configured service and real server.
func (m *Monitor) configured(svc ipvs.ServiceKey, dst netip.AddrPort) (DestKey, *ServerConfig, error) {
	for i := range m.cfg.Services {
		s := &m.cfg.Services[i]
		if s.Key != svc {
			continue
		}
		for j := range s.Servers {
			if s.Servers[j].Addr == dst {
				return DestKey{Service: svc, Dest: dst}, &s.Servers[j], nil
			}
		}
	}
	return DestKey{}, nil, fmt.Errorf("%s %s: %w", svc, dst, ErrNotManaged)
}

// kernelWeight reads one destination's weight from the table.
func (m *Monitor) kernelWeight(svc ipvs.ServiceKey, dst netip.AddrPort) (int, error) {
	dests, err := m.deps.Table.Destinations(svc)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", svc, err)
	}
	for _, d := range dests {
		if d.Addr == dst {
			return d.Weight, nil
		}
	}
	return 0, fmt.Errorf("%s %s: %w", svc, dst, ipvs.ErrNotFound)
}

// memory returns the in-memory record of a destination, creating it.
func (m *Monitor) memory(key DestKey) *destMemory {
	mem := m.mem[key]
	if mem == nil {
		mem = &destMemory{}
		m.mem[key] = mem
	}
	return mem
}
