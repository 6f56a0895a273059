package monitor

import (
	"context"
	"errors"
	"fmt"
	"lvs-feedback/replica"
	"net/netip"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// ErrNotManaged means an operator request named a service or real server
// that is not in the configuration: lvs-monitor does not own its weight
// (use ipvsadm for it).
var ErrNotManaged = errors.New("not a configured service and real server of lvs-monitor")

// Operator requests. Each waits for a running cycle to finish (they share
// one lock) and takes effect at once in the kernel and in the state file.

// Drain sets a configured real server's weight to 0 as an operator drain,
// exactly as `ipvsadm -e … -w 0` would, but held: persisted, never touched
// by the monitor, and any weight found on it later (a rebuilt table,
// another tool) put back to 0, until lvsctl undrain (policy.Drain). In a
// director pair the drain is applied here at once and reaches the peer
// with the next message; DrainConfirmed waits for it.
func (m *Monitor) Drain(svc ipvs.ServiceKey, dst netip.AddrPort) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	key, _, err := m.configured(svc, dst)
	if err != nil {
		return err
	}
	if err := m.drainLocked(key, policy.KindOperator, "drained by operator (lvsctl)"); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	if m.follower {
		m.localEdits = append(m.localEdits, replica.Edit{Key: replica.DestKey(key), Weight: 0, Op: replica.OpDrain})
	}
	return nil
}

// drainLocked applies policy.Drain to key; the caller holds opMu.
func (m *Monitor) drainLocked(key DestKey, kind policy.Kind, reason string) error {
	cur, err := m.tableEntry(key.Service, key.Dest)
	if err != nil {
		return err
	}
	rec, known := m.state[key]
	d := policy.Drain(rec, known, cur)
	if !d.RecordChanged {
		return nil // already drained
	}
	d.Kind, d.Reason = kind, reason
	_, err = m.applyOne(key, &d)
	return err
}

// Undrain gives a drained (or down) real server back its default weight —
// the configured one, or the operator's override — ramped by slow start
// (policy.Undrain). It is the only end of a drain made with Drain.
func (m *Monitor) Undrain(svc ipvs.ServiceKey, dst netip.AddrPort) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	key, server, err := m.configured(svc, dst)
	if err != nil {
		return err
	}
	w, err := m.undrainLocked(key, server, policy.KindOperator, "")
	if err != nil {
		return fmt.Errorf("undrain: %w", err)
	}
	if m.follower {
		// The writer undrains too, with its own slow start.
		m.localEdits = append(m.localEdits, replica.Edit{Key: replica.DestKey(key), Weight: w, Op: replica.OpUndrain})
	}
	return nil
}

// undrainLocked applies policy.Undrain to key and returns its default
// weight; the caller holds opMu. reason, if not empty, replaces the
// decision's.
func (m *Monitor) undrainLocked(key DestKey, server *ServerConfig, kind policy.Kind, reason string) (int, error) {
	cur, err := m.kernelWeight(key.Service, key.Dest)
	if err != nil {
		return 0, err
	}
	d := policy.Undrain(m.state[key], cur, server.Weight, m.cfg.Availability, m.cfg.Weight.Min)
	d.Kind = kind
	if reason != "" {
		d.Reason = reason
	}
	if _, err := m.applyOne(key, &d); err != nil {
		return 0, err
	}
	return d.Record.DefaultWeight(server.Weight), nil
}

// DrainConfirmed is Drain, then, in a director pair, a wait until the
// peer holds the drain (it applied and persisted a snapshot with it, or,
// made on the follower, the writer acknowledged it) or cannot: the
// Replication says which. The drain stands here either way.
func (m *Monitor) DrainConfirmed(ctx context.Context, svc ipvs.ServiceKey, dst netip.AddrPort) (Replication, error) {
	if err := m.Drain(svc, dst); err != nil {
		return Replication{}, err
	}
	return m.confirm(ctx, DestKey{Service: svc, Dest: dst}, "drained"), nil
}

// UndrainConfirmed is Undrain, then the wait of DrainConfirmed.
func (m *Monitor) UndrainConfirmed(ctx context.Context, svc ipvs.ServiceKey, dst netip.AddrPort) (Replication, error) {
	if err := m.Undrain(svc, dst); err != nil {
		return Replication{}, err
	}
	return m.confirm(ctx, DestKey{Service: svc, Dest: dst}, "undrained"), nil
}

// Reload replaces the configuration from the next cycle on. Weights,
// drains, controller and slow-start state are kept; servers added to the
// configuration are adopted at their kernel weight, removed ones are no
// longer touched.
func (m *Monitor) Reload(cfg Config) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	engine, err := policy.NewEngine(cfg.Policy())
	if err != nil { // ParseConfig refuses such a configuration
		m.ReloadFailed(err)
		return
	}
	m.mu.Lock()
	m.cfg, m.engine, m.byConfig = cfg, engine, nil
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

// Status returns the latest cycle's report (a copy: the cycle after next
// reuses the monitor's) and the running configuration. It does not wait
// for a running cycle.
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Status{LastCycle: m.last.Clone(), Config: m.cfg, ReloadedAt: m.reloadedAt, ReloadErr: m.reloadErr, Sync: m.sync}
}

// Explanation is the record of one server's weight in the last cycle,
// for `lvsctl explain`: what was observed, the decision with its trace,
// and the settings it was made with.
type Explanation struct {
	Dest   DestStatus
	Params policy.Params
	Terms  []Term // coefficient × normalised input, in the formula's order
	// Decision says what was done and why, in words.
	Decision string
}

// Term is one input's part of the aggregate load.
type Term struct {
	Name        string
	Input       float64 // normalised
	Coefficient float64
	Product     float64
}

// Explain returns the last cycle's record for one real server.
func (m *Monitor) Explain(svc ipvs.ServiceKey, dst netip.AddrPort) (Explanation, error) {
	// One record copied under the lock, not the whole report.
	var d *DestStatus
	m.mu.Lock()
	for i := range m.last.Dests {
		if k := m.last.Dests[i].Key; k.Service == svc && k.Dest == dst {
			d = new(m.last.Dests[i])
			d.copied(&m.last.Dests[i])
		}
	}
	p := m.last.Params
	m.mu.Unlock()
	if d == nil {
		return Explanation{}, fmt.Errorf("%s %s: %w (or not in the IPVS table at the last cycle)", svc, dst, ErrNotManaged)
	}
	c, in := p.Coefficients, d.Decision.Trace.Inputs
	e := Explanation{Dest: *d, Params: p, Decision: Verdict(*d, p)}
	for _, t := range []Term{
		{"input", in.Input, c.Input, 0}, {"cpu", in.CPU, c.CPU, 0}, {"memory", in.Memory, c.Memory, 0},
		{"disk", in.Disk, c.Disk, 0}, {"response", in.Response, c.Response, 0}, {"process", in.Process, c.Process, 0},
	} {
		t.Product = t.Input * t.Coefficient
		e.Terms = append(e.Terms, t)
	}
	return e, nil
}

// Verdict says what became of a destination's decision (made with p): the
// decision's own verdict, and for a write how it went.
func Verdict(d DestStatus, p policy.Params) string {
	v := d.Decision.Verdict(p, &d.Observed)
	switch o := d.Outcome; {
	case o.Wrote:
		return "written: " + v
	case o.DryRun:
		return "not written (dry run): " + v
	case o.Err != nil:
		return fmt.Sprintf("not written (%v): %s", o.Err, v)
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
	t, err := m.tableEntry(svc, dst)
	return t.Weight, err
}

// tableEntry reads one destination's weight and counter from the table.
func (m *Monitor) tableEntry(svc ipvs.ServiceKey, dst netip.AddrPort) (policy.TableEntry, error) {
	dests, err := m.deps.Table.Destinations(svc)
	if err != nil {
		return policy.TableEntry{}, fmt.Errorf("read %s: %w", svc, err)
	}
	for _, d := range dests {
		if d.Addr == dst {
			return policy.TableEntry{Weight: d.Weight, Counter: d.Connections}, nil
		}
	}
	return policy.TableEntry{}, fmt.Errorf("%s %s: %w", svc, dst, ipvs.ErrNotFound)
}

// memory returns what the monitor remembers of a destination, creating it.
func (m *Monitor) memory(key DestKey) *destMemory {
	mem := m.mem[key]
	if mem == nil {
		mem = &destMemory{}
		m.mem[key] = mem
	}
	return mem
}

// memoryAt is memory for the configuration's server j of service i.
func (m *Monitor) memoryAt(i, j int, key DestKey) *destMemory {
	if len(m.byConfig) != len(m.cfg.Services) {
		m.byConfig = make([][]*destMemory, len(m.cfg.Services))
	}
	if len(m.byConfig[i]) != len(m.cfg.Services[i].Servers) {
		m.byConfig[i] = make([]*destMemory, len(m.cfg.Services[i].Servers))
	}
	mem := m.byConfig[i][j]
	if mem == nil {
		mem = m.memory(key)
		m.byConfig[i][j] = mem
	}
	return mem
}

// markMissing notes that the configuration's server j of service i (every
// server of the service, for j < 0) is not in the table: when it appears
// again it was created anew. It returns how many were not noted missing
// already (each disappearance is logged once).
func (m *Monitor) markMissing(i, j int) int {
	svc := &m.cfg.Services[i]
	n := 0
	for k := range svc.Servers {
		if j < 0 || k == j {
			seen := &m.memoryAt(i, k, DestKey{Service: svc.Key, Dest: svc.Servers[k].Addr}).seen
			if !seen.missing {
				n++
			}
			seen.missing = true
		}
	}
	return n
}

// serviceState returns what policy remembers of a service, creating it.
func (m *Monitor) serviceState(svc ipvs.ServiceKey) *policy.ServiceState {
	st := m.services[svc]
	if st == nil {
		st = &policy.ServiceState{}
		m.services[svc] = st
	}
	return st
}
