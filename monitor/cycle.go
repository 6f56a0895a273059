package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
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
	// CPUSpan is how many seconds of the agent's sampling Inputs.CPU
	// averages (IntervalCPU); 0 when it is the agent's last window.
	CPUSpan float64
	// CapacityFactor is the anchored capacity controller's factor: the
	// server's capacity per unit of default weight ÷ its service's median
	// (NaN: no decision this cycle; 0 with the "lvs" controller).
	CapacityFactor float64
	AgentOK        time.Time // last good agent reply (zero: none since start)
	WeightBefore   int       // kernel weight before this cycle's write
	AgentStale     bool      // the agent has been silent longer than agent_expiry
	Frozen         bool      // the service is frozen (fail static) this cycle
	Ramp           float64   // slow-start factor, 1 when not ramping
	// GuardHeld is the weight the backlog guard holds the server at, and
	// GuardFrom its weight before the move (0: no hold; guard.go);
	// GuardRaised: the hold is a raise, not a cut.
	GuardHeld, GuardFrom int
	GuardRaised          bool
	Wrote                bool
	Reason               string // why the weight or ownership changed, if it did

	// ControllerBefore and ControllerAfter are the controller's fractional
	// weight before and after this cycle's formula step.
	ControllerBefore, ControllerAfter float64
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
	// activeDelta: the change of the active-connection gauge since the
	// last cycle (valid when newConns is)
	activeDelta int
	cpu         float64 // CPU busy fraction used this cycle (IntervalCPU)
	cpuSpan     float64 // seconds cpu covers; 0 = the agent's last window
	inputs      Inputs
	load        float64
	ramp        float64
	capacity    int // the capacity controller's weight; 0 without an estimate
	// capFactor: anchored, the server's capacity per unit of default
	// weight ÷ its service's median (NaN: no decision this cycle)
	capFactor float64
	// saturatedAlone: the server is saturated while its service is not
	// (SaturatedAlone) this cycle
	saturatedAlone bool
	frozen         bool
	action         Action
	reason         string // ownership change found while reconciling
	wrote          bool
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
	m.readSchedulers() // the guard leaves hashing schedulers alone
	stateChanged := m.reconcile(rows)
	m.gather(ctx, rows)
	if err := ctx.Err(); err != nil {
		// Stopped mid-cycle: the failures gathered are ours, not the
		// servers'. Decide nothing on them.
		return CycleReport{Start: start}, fmt.Errorf("cycle interrupted: %w", err)
	}
	m.computeLoads(rows)
	var writes int
	var wroteState bool
	var writeErr error
	if !m.follower { // a follower's weights come from the writer (replicate.go)
		m.decide(rows)
		m.checkBacklog(rows, true) // holds and releases; cuts happen between cycles
		writes, wroteState, writeErr = m.write(rows)
	}
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
		if known && m.follower {
			// Someone changed the weight on this director: the writer
			// must hear of it (a drain on either director reaches both).
			m.localEdits = append(m.localEdits, LocalEdit{Key: r.key, Weight: r.kernel.Weight})
		}
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
