package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

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
	Report        agent.Report  // the agent's reply this cycle (zero if none)
	AgentDuration time.Duration // how long the agent poll took (0 if none)
	// ControllerBefore and ControllerAfter are the controller's fractional
	// weight before and after this cycle's formula step.
	ControllerBefore, ControllerAfter float64
	AgentStale                        bool    // the agent has been silent longer than agent_expiry
	Frozen                            bool    // the service is frozen (fail static) this cycle
	Ramp                              float64 // slow-start factor, 1 when not ramping
	Wrote                             bool
	Reason                            string // why the weight or ownership changed, if it did
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
	mem    *destMemory
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
	agentDur time.Duration
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
	// weightBefore is the kernel weight before this cycle's write.
	weightBefore int
	// the controller weight before and after the formula, for explain
	ctrlBefore, ctrlAfter float64
}

// Cycle runs one pass of the pipeline:
// read table → reconcile ownership → gather inputs → compute load →
// compute weight and decide → write → persist.
func (m *Monitor) Cycle(ctx context.Context) (CycleReport, error) {
	m.opMu.Lock() // operator requests wait for the cycle, and the cycle for them
	defer m.opMu.Unlock()
	start := m.deps.Now()
	rows := m.readTable()
	stateChanged := m.reconcile(rows)
	m.gather(ctx, rows)
	if err := ctx.Err(); err != nil {
		// Stopped mid-cycle: the failures gathered are ours, not the
		// servers'. Decide nothing on them.
		return CycleReport{Start: start}, fmt.Errorf("cycle interrupted: %w", err)
	}
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
	m.deps.Metrics.observeCycle(rep)
	return rep, errors.Join(errs...)
}

// readTable reads each configured service's destinations from the table and
// returns a row for every configured server found there. Servers in the
// table but not in the configuration are left alone; configured services or
// servers missing from the table are noted once.
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
		byAddr := make(map[netip.AddrPort]ipvs.Destination, len(dests))
		for _, d := range dests {
			byAddr[d.Addr] = d
		}
		for j := range svc.Servers {
			rs := &svc.Servers[j]
			d, ok := byAddr[rs.Addr]
			if !ok {
				m.noteOnce("nodst "+svc.Key.String()+rs.Addr.String(), slog.LevelWarn, "configured real server not in the IPVS table; skipped until it appears", "service", svc.Key, "server", rs.Addr)
				continue
			}
			delete(byAddr, rs.Addr)
			key := DestKey{Service: svc.Key, Dest: rs.Addr}
			backing = append(backing, destRow{key: key, mem: m.memory(key), svc: svc, server: rs, kernel: d, newConns: -1, load: math.NaN()})
			rows = append(rows, &backing[len(backing)-1])
		}
		for addr := range byAddr {
			m.noteOnce("unmanaged "+svc.Key.String()+addr.String(), slog.LevelInfo, "real server not in the configuration: left alone", "service", svc.Key, "server", addr)
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
			if !r.mem.ctrlSet {
				r.mem.ctrl, r.mem.ctrlSet = float64(r.kernel.Weight), true
			}
			continue
		}
		changed = true
		m.state[r.key] = res.Record
		r.mem.ctrl, r.mem.ctrlSet = float64(r.kernel.Weight), true
		r.reason = res.Reason
		if known && rec.State != Managed && res.Record.State == Managed {
			r.mem.rampStart = m.deps.Now() // back in rotation: slow start
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
	// One job per probe and per agent poll, run by a fixed pool of
	// cfg.Concurrency workers (not a goroutine per job: at 10,000 servers
	// that is 20,000 goroutines a cycle).
	type job struct {
		r     *destRow
		agent bool
	}
	jobs := make([]job, 0, 2*len(rows))
	for _, r := range rows {
		if r.rec.State == DrainedByOperator {
			continue
		}
		jobs = append(jobs, job{r: r})
		if r.rec.State == Managed {
			jobs = append(jobs, job{r: r, agent: true})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(m.cfg.Concurrency, len(jobs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				if j.agent {
					m.pollAgent(ctx, j.r)
				} else {
					m.probe(ctx, j.r)
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopped: the failures are ours; Cycle decides nothing
	}
	var started, recovered []*destRow
	for _, r := range rows {
		if !r.polled {
			continue
		}
		// Log when an agent starts or stops failing, not every interval.
		failing := r.agentErr != nil
		switch {
		case failing && !r.mem.agentFailing:
			started = append(started, r)
		case !failing && r.mem.agentFailing:
			recovered = append(recovered, r)
		case failing:
			m.log.Debug("agent poll failed", "service", r.key.Service, "server", r.key.Dest, "agent", r.server.AgentAddr, "error", r.agentErr)
		}
		r.mem.agentFailing = failing
		if !failing {
			r.mem.agentOK = m.deps.Now()
		} else {
			last := r.mem.agentOK
			if last.IsZero() {
				last = m.started
			}
			r.stale = m.deps.Now().Sub(last) > m.cfg.Availability.AgentExpiry
		}
	}
	m.logAgentChanges(started, "agent not answering; keeping the server's weight while its service answers", slog.LevelWarn)
	m.logAgentChanges(recovered, "agent answering again", slog.LevelInfo)
}

// maxAgentLines is how many agents' failures or recoveries are logged one
// line each in one cycle; more are summarised in one line per service, so
// that a network blip does not flood the log.
const maxAgentLines = 5

func (m *Monitor) logAgentChanges(rows []*destRow, msg string, level slog.Level) {
	ctx := context.Background()
	if len(rows) <= maxAgentLines {
		for _, r := range rows {
			attrs := []any{"service", r.key.Service, "server", r.key.Dest, "agent", r.server.AgentAddr}
			if r.agentErr != nil {
				attrs = append(attrs, "error", r.agentErr)
			}
			m.log.Log(ctx, level, msg, attrs...)
		}
		return
	}
	bySvc := map[ipvs.ServiceKey][]*destRow{}
	var order []ipvs.ServiceKey
	for _, r := range rows {
		if bySvc[r.key.Service] == nil {
			order = append(order, r.key.Service)
		}
		bySvc[r.key.Service] = append(bySvc[r.key.Service], r)
	}
	for _, svc := range order {
		rs := bySvc[svc]
		attrs := []any{"service", svc, "servers", len(rs), "first", rs[0].key.Dest}
		if rs[0].agentErr != nil {
			attrs = append(attrs, "error", rs[0].agentErr)
		}
		m.log.Log(ctx, level, msg, attrs...)
	}
}

// probe measures r's response time, bounded by probe_timeout.
func (m *Monitor) probe(ctx context.Context, r *destRow) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ProbeTimeout)
	defer cancel()
	r.rtt, r.probeErr = m.deps.Prober.Probe(ctx, r.key.Dest, r.svc.Probe)
	r.probed = true
}

// pollAgent fetches r's agent report, bounded by agent_timeout.
func (m *Monitor) pollAgent(ctx context.Context, r *destRow) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AgentTimeout)
	defer cancel()
	start := time.Now()
	r.report, r.agentErr = m.deps.Agents.Fetch(ctx, r.server.AgentAddr)
	r.agentDur = time.Since(start)
	r.polled = true
}

// computeLoads turns gathered inputs into each managed row's aggregate
// load. INPUT is computed per service over the rows in rotation (managed,
// reachable, weight above 0).
func (m *Monitor) computeLoads(rows []*destRow) {
	bySvc := map[*ServiceConfig][]*destRow{}
	for _, r := range rows {
		if r.mem.counterSet {
			r.newConns = int64(ipvs.ConnectionDelta(r.mem.counter, r.kernel.Connections))
		}
		r.mem.counter, r.mem.counterSet = r.kernel.Connections, true
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
		if t := r.mem.rampStart; !t.IsZero() {
			r.ramp = SlowStartFactor(now.Sub(t), m.cfg.Availability.SlowStart, m.cfg.Availability.SlowStartFloor)
			if r.ramp >= 1 {
				r.mem.rampStart = time.Time{}
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
		ctrl := r.mem.ctrl
		r.ctrlBefore = ctrl
		r.action = Decide(DecideInput{
			Record:            r.rec,
			KernelWeight:      r.kernel.Weight,
			ConfiguredDefault: r.server.Weight,
			Obs:               obs,
			Ramp:              r.ramp,
		}, &ctrl, m.cfg.Weight)
		r.mem.ctrl = ctrl
		r.ctrlAfter = ctrl
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
		if m.dryRun {
			m.logChange("would change weight (dry run)", r)
			continue
		}
		err := m.deps.Table.SetWeight(r.key.Service, r.key.Dest, r.kernel.Weight, a.To)
		switch {
		case err == nil:
			writes++
			r.wrote = true
			r.weightBefore = r.kernel.Weight
			r.kernel.Weight = a.To
			if r.rec.State == Down && a.Record.State == Managed {
				r.mem.rampStart = m.deps.Now()
			}
			m.state[r.key] = a.Record
			changed = true
			m.logChange("weight changed", r)
		case errors.Is(err, ipvs.ErrWeightChanged):
			m.deps.Metrics.writeError(writeErrChanged)
			m.log.Info("weight changed by another tool during the cycle; not written, reconciled next interval", "service", r.key.Service, "server", r.key.Dest, "error", err)
		case errors.Is(err, ipvs.ErrNotFound):
			m.deps.Metrics.writeError(writeErrVanished)
			m.log.Info("destination vanished before the write; skipped", "service", r.key.Service, "server", r.key.Dest)
		default:
			m.deps.Metrics.writeError(writeErrOther)
			errs = append(errs, fmt.Errorf("write weight %s: %w", r.key, err))
		}
	}
	return writes, changed, errors.Join(errs...)
}

// logChange logs one weight change: old → new, why, and the load breakdown.
func (m *Monitor) logChange(msg string, r *destRow) {
	if !m.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	old := r.kernel.Weight
	if r.wrote {
		old = r.weightBefore
	}
	attrs := []any{"service", r.key.Service, "server", r.key.Dest, "old", old, "new", r.action.To, "reason", r.action.Reason}
	if !math.IsNaN(r.load) {
		in := r.inputs
		attrs = append(attrs, "load", round3(r.load), "input", round3(in.Input), "cpu", round3(in.CPU), "memory", round3(in.Memory),
			"disk", round3(in.Disk), "response", round3(in.Response), "process", round3(in.Process))
	}
	m.log.Info(msg, attrs...)
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
			Key:              r.key,
			State:            rec.State,
			KernelWeight:     r.kernel.Weight,
			DefaultWeight:    rec.DefaultWeight(r.server.Weight),
			Inputs:           r.inputs,
			Load:             r.load,
			ActiveConns:      r.kernel.ActiveConns,
			InactiveConns:    r.kernel.InactiveConns,
			NewConns:         r.newConns,
			ProbeRTT:         r.rtt,
			ProbeErr:         r.probeErr,
			AgentErr:         r.agentErr,
			Report:           r.report,
			AgentDuration:    r.agentDur,
			ControllerBefore: r.ctrlBefore,
			ControllerAfter:  r.ctrlAfter,
			AgentStale:       r.stale,
			Frozen:           r.frozen,
			Ramp:             r.ramp,
			Wrote:            r.wrote,
			Reason:           reason,
		})
	}
	return out
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
