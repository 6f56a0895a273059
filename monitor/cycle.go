package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"golang.org/x/sync/errgroup"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
)

// DestStatus is one destination's outcome of a cycle, for logs, the demo
// and status displays.
type DestStatus struct {
	Key           DestKey
	State         Ownership
	KernelWeight  int // after this cycle's write, if any
	DefaultWeight int
	Inputs        Inputs
	Load          float64 // aggregate; NaN when not computed this cycle
	ActiveConns   int
	InactiveConns int
	NewConns      int64 // connections in the interval; -1 when unknown
	ProbeRTT      time.Duration
	ProbeErr      error
	AgentErr      error
	AgentStale    bool    // the agent has been silent longer than agent_expiry
	Frozen        bool    // the service is frozen (fail static) this cycle
	Ramp          float64 // slow-start factor, 1 when not ramping
	Wrote         bool
	Reason        string // why the weight or ownership changed, if it did
}

// CycleReport is the outcome of one cycle.
type CycleReport struct {
	Start    time.Time
	Duration time.Duration
	Dests    []DestStatus
	Writes   int
}

// destRow carries one configured destination through the pipeline.
type destRow struct {
	key    DestKey
	svc    *ServiceConfig
	server *ServerConfig
	kernel ipvs.Destination
	rec    DestRecord

	// gathered
	rtt      time.Duration
	probeErr error
	probed   bool
	report   agent.Report
	agentErr error
	polled   bool
	stale    bool // agent silent for longer than agent_expiry

	// computed
	newConns int64
	inputs   Inputs
	load     float64
	ramp     float64
	frozen   bool
	action   Action
	reason   string // ownership change found while reconciling
	wrote    bool
}

// Cycle runs one pass of the pipeline:
// read table → reconcile ownership → gather inputs → compute load →
// compute weight and decide → write → persist.
func (m *Monitor) Cycle(ctx context.Context) (CycleReport, error) {
	start := m.deps.Now()
	rows := m.readTable()
	stateChanged := m.reconcile(rows)
	m.gather(ctx, rows)
	m.computeLoads(rows)
	m.decide(rows)
	writes, wroteState, writeErr := m.write(rows)
	var errs []error
	if writeErr != nil {
		errs = append(errs, writeErr)
	}
	if stateChanged || wroteState {
		if err := m.saveState(); err != nil {
			errs = append(errs, err)
		}
	}
	rep := CycleReport{Start: start, Duration: m.deps.Now().Sub(start), Writes: writes, Dests: statuses(rows)}
	m.mu.Lock()
	m.last = rep
	m.mu.Unlock()
	return rep, errors.Join(errs...)
}

// readTable reads each configured service's destinations from the table and
// returns a row for every configured server found there. Servers in the
// table but not in the configuration are left alone; configured services or
// servers missing from the table are noted once.
func (m *Monitor) readTable() []*destRow {
	var rows []*destRow
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
		byAddr := make(map[string]ipvs.Destination, len(dests))
		for _, d := range dests {
			byAddr[d.Addr.String()] = d
		}
		for j := range svc.Servers {
			rs := &svc.Servers[j]
			d, ok := byAddr[rs.Addr.String()]
			if !ok {
				m.noteOnce("nodst "+svc.Key.String()+rs.Addr.String(), slog.LevelWarn, "configured real server not in the IPVS table; skipped until it appears", "service", svc.Key, "server", rs.Addr)
				continue
			}
			delete(byAddr, rs.Addr.String())
			rows = append(rows, &destRow{key: DestKey{Service: svc.Key, Dest: rs.Addr}, svc: svc, server: rs, kernel: d, newConns: -1, load: math.NaN()})
		}
		for addr := range byAddr {
			m.noteOnce("unmanaged "+svc.Key.String()+addr, slog.LevelInfo, "real server not in the configuration: left alone", "service", svc.Key, "server", addr)
		}
	}
	return rows
}

// reconcile applies the ownership rules to every row and reports whether
// any record changed.
func (m *Monitor) reconcile(rows []*destRow) bool {
	changed := false
	for _, r := range rows {
		rec, known := m.state[r.key]
		res := Reconcile(rec, known, r.kernel.Weight, r.server.Weight)
		r.rec = res.Record
		if !res.Changed {
			if _, ok := m.ctrl[r.key]; !ok {
				m.ctrl[r.key] = float64(r.kernel.Weight)
			}
			continue
		}
		changed = true
		m.state[r.key] = res.Record
		m.ctrl[r.key] = float64(r.kernel.Weight)
		r.reason = res.Reason
		if known && rec.State != Managed && res.Record.State == Managed {
			m.rampStart[r.key] = m.deps.Now() // back in rotation: slow start
		}
		level := slog.LevelInfo
		m.log.Log(context.Background(), level, "ownership", "service", r.key.Service, "server", r.key.Dest,
			"weight", r.kernel.Weight, "state", res.Record.State, "reason", res.Reason)
	}
	return changed
}

// gather probes every row that is not drained and polls the agent of every
// managed row, concurrently (at most cfg.Concurrency at once), each call
// bounded by its timeout.
func (m *Monitor) gather(ctx context.Context, rows []*destRow) {
	var g errgroup.Group
	g.SetLimit(m.cfg.Concurrency)
	for _, r := range rows {
		if r.rec.State == DrainedByOperator {
			continue
		}
		g.Go(func() error {
			pctx, cancel := context.WithTimeout(ctx, m.cfg.ProbeTimeout)
			defer cancel()
			r.rtt, r.probeErr = m.deps.Prober.Probe(pctx, r.key.Dest, r.svc.Probe)
			r.probed = true
			return nil
		})
		if r.rec.State != Managed {
			continue
		}
		g.Go(func() error {
			actx, cancel := context.WithTimeout(ctx, m.cfg.AgentTimeout)
			defer cancel()
			r.report, r.agentErr = m.deps.Agents.Fetch(actx, r.server.AgentAddr)
			r.polled = true
			return nil
		})
	}
	_ = g.Wait() // the calls report through their rows
	for _, r := range rows {
		if !r.polled {
			continue
		}
		// Log when an agent starts or stops failing, not every interval.
		failing := r.agentErr != nil
		switch {
		case failing && !m.agentFailing[r.key]:
			m.log.Warn("agent not answering; keeping the server's weight while its service answers", "service", r.key.Service, "server", r.key.Dest, "agent", r.server.AgentAddr, "error", r.agentErr)
		case !failing && m.agentFailing[r.key]:
			m.log.Info("agent answering again", "service", r.key.Service, "server", r.key.Dest, "agent", r.server.AgentAddr)
		case failing:
			m.log.Debug("agent poll failed", "service", r.key.Service, "server", r.key.Dest, "agent", r.server.AgentAddr, "error", r.agentErr)
		}
		if failing {
			m.agentFailing[r.key] = true
		} else {
			delete(m.agentFailing, r.key)
			m.agentOK[r.key] = m.deps.Now()
		}
		if failing {
			last, ok := m.agentOK[r.key]
			if !ok {
				last = m.started
			}
			r.stale = m.deps.Now().Sub(last) > m.cfg.Availability.AgentExpiry
		}
	}
}

// computeLoads turns gathered inputs into each managed row's aggregate
// load. INPUT is computed per service over the rows in rotation (managed,
// reachable, weight above 0).
func (m *Monitor) computeLoads(rows []*destRow) {
	bySvc := map[*ServiceConfig][]*destRow{}
	for _, r := range rows {
		if prev, ok := m.counters[r.key]; ok {
			r.newConns = int64(ipvs.ConnectionDelta(prev, r.kernel.Connections))
		}
		m.counters[r.key] = r.kernel.Connections
		if r.rec.State == Managed && r.probed && r.probeErr == nil && r.kernel.Weight > 0 {
			bySvc[r.svc] = append(bySvc[r.svc], r)
		}
	}
	for svc, inRotation := range bySvc {
		conns := make([]int64, len(inRotation))
		for i, r := range inRotation {
			conns[i] = r.newConns
		}
		inputs := InputLoads(conns)
		for i, r := range inRotation {
			r.inputs = Inputs{Input: inputs[i], Response: ResponseLoad(r.rtt, svc.Probe.Reference)}
			switch {
			case r.polled && r.agentErr == nil:
				r.inputs.CPU = r.report.CPU
				r.inputs.Memory = r.report.Memory
				r.inputs.Disk = r.report.Disk
				r.inputs.Process = r.report.Processes
				r.load = AggregateLoad(r.inputs, m.cfg.Coefficients)
			case r.stale:
				if load, ok := DirectorOnlyLoad(r.inputs, m.cfg.Coefficients); ok {
					r.load = load
				}
			}
		}
	}
}

// decide runs the availability rules and the weight formula for each row.
// A service with too many unreachable servers is frozen: none of its
// weights change this cycle (fail static).
func (m *Monitor) decide(rows []*destRow) {
	eligible := map[ipvs.ServiceKey]int{}
	unreachable := map[ipvs.ServiceKey]int{}
	for _, r := range rows {
		if r.rec.State == DrainedByOperator {
			continue
		}
		eligible[r.key.Service]++
		if r.probed && r.probeErr != nil {
			unreachable[r.key.Service]++
		}
	}
	frozen := map[ipvs.ServiceKey]bool{}
	for svc, n := range eligible {
		f := ShouldFreeze(unreachable[svc], n, m.cfg.Availability.FreezeShare)
		frozen[svc] = f
		switch {
		case f && !m.frozen[svc]:
			m.log.Warn("service frozen: too many servers unreachable at once, the director is probably cut off; weights left as they are",
				"service", svc, "unreachable", unreachable[svc], "servers", n, "freeze_share", m.cfg.Availability.FreezeShare)
		case !f && m.frozen[svc]:
			m.log.Info("service unfrozen: enough servers reachable again", "service", svc, "unreachable", unreachable[svc], "servers", n)
		}
		if f {
			m.frozen[svc] = true
		} else {
			delete(m.frozen, svc)
		}
	}
	now := m.deps.Now()
	for _, r := range rows {
		r.ramp = 1
		if t, ok := m.rampStart[r.key]; ok {
			r.ramp = SlowStartFactor(now.Sub(t), m.cfg.Availability.SlowStart, m.cfg.Availability.SlowStartFloor)
			if r.ramp >= 1 {
				delete(m.rampStart, r.key)
			}
		}
		if frozen[r.key.Service] || r.rec.State == DrainedByOperator {
			r.frozen = frozen[r.key.Service]
			r.action = Action{Record: r.rec}
			continue
		}
		if r.rec.State == Down {
			// Coming back: the ramp starts now.
			r.ramp = SlowStartFactor(0, m.cfg.Availability.SlowStart, m.cfg.Availability.SlowStartFloor)
		}
		obs := Observation{
			ProbeOK:  r.probed && r.probeErr == nil,
			ProbeErr: r.probeErr,
			LoadOK:   !math.IsNaN(r.load) && !math.IsInf(r.load, 0),
			AgentErr: r.agentErr,
			Load:     r.load,
		}
		ctrl := m.ctrl[r.key]
		r.action = Decide(DecideInput{
			Record:            r.rec,
			KernelWeight:      r.kernel.Weight,
			ConfiguredDefault: r.server.Weight,
			Obs:               obs,
			Ramp:              r.ramp,
		}, &ctrl, m.cfg.Weight)
		m.ctrl[r.key] = ctrl
	}
}

// write applies the decisions to the table with compare-and-set writes. It
// returns the number of writes, whether any record changed, and the errors
// that are not normal events.
func (m *Monitor) write(rows []*destRow) (int, bool, error) {
	writes := 0
	changed := false
	var errs []error
	for _, r := range rows {
		a := r.action
		if !a.Write {
			continue
		}
		attrs := []any{"service", r.key.Service, "server", r.key.Dest, "old", r.kernel.Weight, "new", a.To, "reason", a.Reason}
		if !math.IsNaN(r.load) {
			in := r.inputs
			attrs = append(attrs, "load", round3(r.load), "input", round3(in.Input), "cpu", round3(in.CPU), "memory", round3(in.Memory),
				"disk", round3(in.Disk), "response", round3(in.Response), "process", round3(in.Process))
		}
		if m.dryRun {
			m.log.Info("would change weight (dry run)", attrs...)
			continue
		}
		err := m.deps.Table.SetWeight(r.key.Service, r.key.Dest, r.kernel.Weight, a.To)
		switch {
		case err == nil:
			writes++
			r.wrote = true
			r.kernel.Weight = a.To
			if r.rec.State == Down && a.Record.State == Managed {
				m.rampStart[r.key] = m.deps.Now()
			}
			m.state[r.key] = a.Record
			changed = true
			m.log.Info("weight changed", attrs...)
		case errors.Is(err, ipvs.ErrWeightChanged):
			m.log.Info("weight changed by another tool during the cycle; not written, reconciled next interval", "service", r.key.Service, "server", r.key.Dest, "error", err)
		case errors.Is(err, ipvs.ErrNotFound):
			m.log.Info("destination vanished before the write; skipped", "service", r.key.Service, "server", r.key.Dest)
		default:
			errs = append(errs, fmt.Errorf("write weight %s: %w", r.key, err))
		}
	}
	return writes, changed, errors.Join(errs...)
}

func statuses(rows []*destRow) []DestStatus {
	out := make([]DestStatus, 0, len(rows))
	for _, r := range rows {
		reason := r.reason
		if r.wrote {
			reason = r.action.Reason
		}
		rec := r.rec
		if r.wrote {
			rec = r.action.Record
		}
		out = append(out, DestStatus{
			Key:           r.key,
			State:         rec.State,
			KernelWeight:  r.kernel.Weight,
			DefaultWeight: rec.DefaultWeight(r.server.Weight),
			Inputs:        r.inputs,
			Load:          r.load,
			ActiveConns:   r.kernel.ActiveConns,
			InactiveConns: r.kernel.InactiveConns,
			NewConns:      r.newConns,
			ProbeRTT:      r.rtt,
			ProbeErr:      r.probeErr,
			AgentErr:      r.agentErr,
			AgentStale:    r.stale,
			Frozen:        r.frozen,
			Ramp:          r.ramp,
			Wrote:         r.wrote,
			Reason:        reason,
		})
	}
	return out
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
