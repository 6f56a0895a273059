package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// DestStatus is one destination's outcome of a cycle: what was observed,
// the decision made (policy.Decision, with its trace), and how applying it
// went. Logs, metrics, status and explain read it; none recomputes it.
type DestStatus struct {
	Key           DestKey
	State         policy.Ownership // after this cycle's write, if any
	KernelWeight  int              // after this cycle's write, if any
	DefaultWeight int
	ActiveConns   int
	InactiveConns int
	NewConns      int64 // connections in the interval; -1 when unknown
	ProbeRTT      time.Duration
	ProbeErr      error
	AgentErr      error
	Report        agent.Report  // the agent's reply this cycle (zero if none)
	AgentDuration time.Duration // how long the agent poll took (0 if none)
	// CPUSpan is how many seconds of the agent's sampling the CPU input
	// averages (IntervalCPU); 0 when it is the agent's last window.
	CPUSpan    float64
	AgentOK    time.Time // last good agent reply (zero: none since start)
	AgentStale bool      // the agent has been silent longer than agent_expiry

	// Decision is the cycle's decision for the destination; Decision.Before
	// is the kernel weight as read.
	Decision policy.Decision
	// Outcome is how applying the decision went.
	Outcome Outcome
	// Reason says why the weight or ownership changed, if it did: the
	// decision's reason when written, else the ownership change found when
	// reading the table.
	Reason string
}

// CycleReport is the outcome of one cycle.
type CycleReport struct {
	Start    time.Time
	Duration time.Duration
	Dests    []DestStatus
	Writes   int
	// Params are the settings the cycle decided with.
	Params policy.Params
}

// destRow carries one configured destination through a cycle.
type destRow struct {
	key    DestKey
	svc    *ServiceConfig
	server *ServerConfig
	kernel ipvs.Destination
	seen   *observed
	state  *policy.ServerState
	obs    policy.Observed // what policy decides from

	report   agent.Report
	agentDur time.Duration
	cpuSpan  float64
	reason   string // ownership change found while reconciling
}

// Cycle runs one pass of the pipeline:
// read table → reconcile ownership → gather inputs → observe → decide
// (policy) → apply → persist.
func (m *Monitor) Cycle(ctx context.Context) (CycleReport, error) {
	m.opMu.Lock() // operator requests wait for the cycle, and the cycle for them
	defer m.opMu.Unlock()
	start := m.deps.Now()
	rows := m.readTable()
	m.readSchedulers() // the guard leaves hashing schedulers alone
	stateChanged := m.reconcile(rows)
	m.gather(ctx, rows)
	if err := ctx.Err(); err != nil {
		// Stopped mid-cycle: the failures gathered are ours, not the
		// servers'. Decide nothing on them.
		return CycleReport{Start: start}, fmt.Errorf("cycle interrupted: %w", err)
	}
	m.observe(rows)
	decisions := m.decide(rows)
	outcomes := make([]Outcome, len(rows))
	res := m.applyRows(rows, decisions, outcomes)
	errs := []error{res.err}
	if stateChanged || res.recordsChanged {
		errs = append(errs, m.saveState())
	}
	rep := CycleReport{Start: start, Duration: m.deps.Now().Sub(start), Writes: res.writes,
		Dests: m.statuses(rows, decisions, outcomes), Params: m.engine.Params()}
	m.mu.Lock()
	m.last = rep
	m.mu.Unlock()
	m.deps.Metrics.observeCycle(rep)
	return rep, errors.Join(errs...)
}

// readTable reads each configured service's destinations from the table and
// returns a row for every configured server found there, grouped by
// service in configuration order. Servers in the table but not in the
// configuration are left alone; configured services or servers missing
// from the table are noted once.
func (m *Monitor) readTable() []*destRow {
	n := 0
	for i := range m.cfg.Services {
		n += len(m.cfg.Services[i].Servers)
	}
	backing := make([]destRow, 0, n) // one allocation for every row
	rows := make([]*destRow, 0, n)
	for i := range m.cfg.Services {
		svc := &m.cfg.Services[i]
		dests, err := m.deps.Table.Destinations(svc.Key)
		if err != nil {
			if errors.Is(err, ipvs.ErrNotFound) {
				m.noteOnce("nosvc "+svc.Key.String(), slog.LevelWarn, "configured service not in the IPVS table; skipped until it appears", "service", svc.Key)
			} else {
				m.log.Error("read IPVS table", "service", svc.Key, "error", err)
			}
			continue
		}
		byAddr := make(map[netip.AddrPort]int, len(dests))
		for j := range dests {
			byAddr[dests[j].Addr] = j
		}
		for j := range svc.Servers {
			rs := &svc.Servers[j]
			di, ok := byAddr[rs.Addr]
			if !ok {
				m.noteOnce("nodst "+svc.Key.String()+rs.Addr.String(), slog.LevelWarn, "configured real server not in the IPVS table; skipped until it appears", "service", svc.Key, "server", rs.Addr)
				continue
			}
			delete(byAddr, rs.Addr)
			key := DestKey{Service: svc.Key, Dest: rs.Addr}
			backing = append(backing, destRow{key: key, svc: svc, server: rs, kernel: dests[di], seen: m.seenOf(key), state: m.serverState(key)})
			rows = append(rows, &backing[len(backing)-1])
		}
		for addr := range byAddr {
			m.noteOnce("unmanaged "+svc.Key.String()+addr.String(), slog.LevelInfo, "real server not in the configuration: left alone", "service", svc.Key, "server", addr)
		}
	}
	return rows
}

// reconcile applies the ownership rules (policy.ReconcileServer) to every
// row and reports whether any record changed.
func (m *Monitor) reconcile(rows []*destRow) bool {
	changed := false
	now := m.deps.Now()
	for _, r := range rows {
		rec, known := m.state[r.key]
		res := policy.ReconcileServer(rec, known, r.kernel.Weight, r.server.Weight, r.state, now)
		r.obs = policy.Observed{Record: res.Record, Configured: r.server.Weight, Kernel: r.kernel.Weight, Active: r.kernel.ActiveConns, NewConns: -1}
		if !res.Changed {
			continue
		}
		changed = true
		if known && m.follower {
			// Someone changed the weight on this director: the writer
			// must hear of it (a drain on either director reaches both).
			m.localEdits = append(m.localEdits, LocalEdit{Key: r.key, Weight: r.kernel.Weight})
		}
		m.state[r.key] = res.Record
		r.reason = res.Reason
		m.log.Info("ownership", "service", r.key.Service, "server", r.key.Dest,
			"weight", r.kernel.Weight, "state", res.Record.State, "reason", res.Reason)
	}
	return changed
}

// observe turns the rows' readings into what policy decides from: the
// connections scheduled since the last cycle (counter deltas) and the CPU
// busy fraction over the same interval (IntervalCPU).
func (m *Monitor) observe(rows []*destRow) {
	maxSpan := 2 * m.cfg.Interval.Seconds()
	for _, r := range rows {
		s, o := r.seen, &r.obs
		if s.counterSet {
			o.NewConns = int64(ipvs.ConnectionDelta(s.counter, r.kernel.Connections))
			o.ActiveDelta = r.kernel.ActiveConns - s.active
		}
		s.active = r.kernel.ActiveConns
		s.counter, s.counterSet = r.kernel.Connections, true
		if o.Polled && o.AgentErr == nil {
			o.CPU, r.cpuSpan = IntervalCPU(s.cpuTime, r.report.CPUTime, r.report.CPU, maxSpan)
			o.Memory, o.Disk, o.Process = r.report.Memory, r.report.Disk, r.report.Processes
			s.cpuTime = r.report.CPUTime
		}
	}
}

// decide hands each service's rows to policy and logs what policy says
// happened to the service. A follower's decisions write nothing.
func (m *Monitor) decide(rows []*destRow) []policy.Decision {
	out := make([]policy.Decision, 0, len(rows))
	now := m.deps.Now()
	forEachService(rows, func(svc ipvs.ServiceKey, group []*destRow) {
		obs, states := observations(group)
		ds, ev := m.engine.Cycle(m.servicePolicy(group[0]), m.serviceState(svc), obs, states, m.follower, now)
		switch {
		case ev.FrozeNow:
			m.log.Warn("service frozen: too many servers unreachable at once, the director is probably cut off; weights left as they are",
				"service", svc, "unreachable", ev.Unreachable, "servers", ev.Eligible, "freeze_share", m.cfg.Availability.FreezeShare)
		case ev.UnfrozeNow:
			m.log.Info("service unfrozen: enough servers reachable again", "service", svc, "unreachable", ev.Unreachable, "servers", ev.Eligible)
		}
		m.noteHashing(svc, ev.GuardOffForHashing)
		for i := range ds {
			m.logGuard(group[i].key, &ds[i])
		}
		out = append(out, ds...)
	})
	return out
}

// forEachService calls fn for each run of rows of one service (readTable
// returns them grouped).
func forEachService(rows []*destRow, fn func(ipvs.ServiceKey, []*destRow)) {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].key.Service == rows[i].key.Service {
			j++
		}
		fn(rows[i].key.Service, rows[i:j])
		i = j
	}
}

func observations(rows []*destRow) ([]policy.Observed, []*policy.ServerState) {
	obs := make([]policy.Observed, len(rows))
	states := make([]*policy.ServerState, len(rows))
	for i, r := range rows {
		obs[i], states[i] = r.obs, r.state
	}
	return obs, states
}

// servicePolicy is what policy needs to know of r's service.
func (m *Monitor) servicePolicy(r *destRow) policy.Service {
	_, hashing := m.hashed[r.key.Service]
	return policy.Service{Reference: r.svc.Probe.Reference, Hashing: hashing}
}

// statuses builds the report's rows.
func (m *Monitor) statuses(rows []*destRow, ds []policy.Decision, outs []Outcome) []DestStatus {
	out := make([]DestStatus, len(rows))
	for i, r := range rows {
		d := &ds[i]
		rec, reason := r.obs.Record, r.reason
		if outs[i].Wrote {
			rec, reason = d.Record, d.Reason
		}
		out[i] = DestStatus{
			Key:           r.key,
			State:         rec.State,
			KernelWeight:  r.kernel.Weight,
			DefaultWeight: rec.DefaultWeight(r.server.Weight),
			ActiveConns:   r.kernel.ActiveConns,
			InactiveConns: r.kernel.InactiveConns,
			NewConns:      r.obs.NewConns,
			ProbeRTT:      r.obs.RTT,
			ProbeErr:      r.obs.ProbeErr,
			AgentErr:      r.obs.AgentErr,
			Report:        r.report,
			AgentDuration: r.agentDur,
			CPUSpan:       r.cpuSpan,
			AgentOK:       r.seen.agentOK,
			AgentStale:    r.obs.AgentStale,
			Decision:      *d,
			Outcome:       outs[i],
			Reason:        reason,
		}
	}
	return out
}
