package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"lvs-feedback/replica"
	"net/netip"
	"slices"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// DestStatus is one destination's outcome of a cycle: what was observed
// (policy.Observed: ownership, kernel weight and connections as read, probe,
// agent), the decision made (policy.Decision, with its trace), and how
// applying it went. Logs, metrics, status and explain read it; none
// recomputes it.
type DestStatus struct {
	Key DestKey
	policy.Observed
	State         policy.Ownership // after this cycle's write, if any
	SetBy         policy.Origin    // who set the weight that stands, after this cycle's write
	KernelWeight  int              // after this cycle's write, if any
	DefaultWeight int
	InactiveConns int
	Report        agent.Report  // the agent's reply this cycle (zero if none)
	AgentDuration time.Duration // how long the agent poll took (0 if none)
	// CPUSpan is how many seconds of the agent's sampling the CPU input
	// averages (intervalCPU); 0 when it is the agent's last window.
	CPUSpan float64
	AgentOK time.Time // last good agent reply (zero: none since start)

	// Decision is the cycle's decision for the destination; Decision.Before
	// is the kernel weight as read.
	Decision policy.Decision
	// Outcome is how applying the decision went.
	Outcome Outcome
	// capacity holds the capacity controller's step when there is one
	// (Decision.Trace.Capacity points here): the record's own storage,
	// reused with it.
	capacity policy.CapacityStep
	// Reason says why the weight or ownership changed, if it did: the
	// decision's reason when written, else the ownership change found when
	// reading the table.
	Reason string
}

// CycleReport is the outcome of one cycle. Its Dests are the monitor's
// working storage, reused: they stay as they are through the next cycle or
// backlog check and are overwritten by the one after — with a history
// recorder, no sooner than the recorder has written them and given them
// back. Whoever keeps a report longer keeps a Clone; Last and Status
// return copies.
type CycleReport struct {
	Start    time.Time
	Duration time.Duration
	Dests    []DestStatus
	Writes   int
	// Params are the settings the cycle decided with.
	Params policy.Params
	// Schedulers are the services' scheduler names as this cycle read
	// them from the table ("wrr", "wlc", …), for lvsctl status.
	Schedulers map[ipvs.ServiceKey]string
}

// Clone returns a copy of rep that later cycles do not overwrite.
func (rep CycleReport) Clone() CycleReport {
	dests := slices.Clone(rep.Dests)
	for i := range dests {
		dests[i].copied(&rep.Dests[i])
	}
	rep.Dests = dests
	return rep
}

// copied points d, a copy of *from, at its own storage.
func (d *DestStatus) copied(from *DestStatus) {
	if d.Decision.Trace.Capacity == &from.capacity {
		d.Decision.Trace.Capacity = &d.capacity
	}
}

// destRow carries one configured destination through a cycle; its
// findings go into st, the destination's entry in the cycle's report.
type destRow struct {
	st     *DestStatus
	svc    *ServiceConfig
	server *ServerConfig
	table  policy.TableEntry // what the table showed
	seen   *observed
	state  *policy.ServerState
	mem    *destMemory // seen and state's
}

// Cycle runs one pass of the pipeline:
// read table → reconcile ownership → gather inputs → observe → decide
// (policy) → apply → persist.
func (m *Monitor) Cycle(ctx context.Context) (CycleReport, error) {
	m.opMu.Lock() // operator requests wait for the cycle, and the cycle for them
	defer m.opMu.Unlock()
	start := m.deps.Now()
	dests, rows := m.readTable()
	schedulers := m.readSchedulers() // the guard leaves hashing schedulers alone
	stateChanged := m.reconcile(rows)
	m.gather(ctx, rows)
	if err := ctx.Err(); err != nil {
		// Stopped mid-cycle: the failures gathered are ours, not the
		// servers'. Decide nothing on them.
		return CycleReport{Start: start}, fmt.Errorf("cycle interrupted: %w", err)
	}
	m.observe(rows)
	m.addOthers(rows)
	m.decide(rows)
	m.boundWeights(rows)
	res := m.applyRows(rows)
	errs := []error{res.err}
	if stateChanged || res.recordsChanged {
		errs = append(errs, m.saveState())
	}
	finish(rows)
	rep := CycleReport{Start: start, Duration: m.deps.Now().Sub(start), Writes: res.writes,
		Dests: dests, Params: m.engine.Params(), Schedulers: schedulers}
	m.mu.Lock()
	prev := m.last.Dests
	m.last = rep
	m.mu.Unlock()
	// The report before this one: Status and Explain now read this one,
	// so the next check or cycle may fill it — unless the recorder has
	// not given it back yet.
	switch {
	case !m.recording():
		m.spare = prev
	case m.held != nil && sameEntries(m.held, prev):
		m.spare, m.held = m.held, nil
	default:
		m.spare = nil
	}
	m.deps.Metrics.observeCycle(rep)
	m.recordHistory(rep)
	return rep, errors.Join(errs...)
}

// readTable reads each configured service's destinations from the table and
// returns a report entry and a row for every configured server found there,
// grouped by service in configuration order. Servers in the table but not
// in the configuration are left alone (noted once). Every disappearance of
// a configured service or server from the table is logged, and every
// return of a configured server: a health checker removes and re-adds
// servers as they fail and recover, and each time is worth a line.
func (m *Monitor) readTable() ([]DestStatus, []destRow) {
	n := 0
	for i := range m.cfg.Services {
		n += len(m.cfg.Services[i].Servers)
	}
	// The entries and rows of a report no one reads any more, or one
	// allocation each when there are none (rows: too few). A report's
	// entries are cut to its length: one short of the configuration (a
	// server not in the table) still serves, and grows by append when
	// the server is back.
	m.takeWritten()
	out, rows := m.spare[:0], m.rows[:0]
	if cap(out) == 0 {
		out = make([]DestStatus, 0, n)
	}
	if cap(rows) < n {
		rows = make([]destRow, 0, n)
	}
	for i := range m.cfg.Services {
		svc := &m.cfg.Services[i]
		table, err := m.deps.Table.Destinations(svc.Key)
		if err != nil {
			if errors.Is(err, ipvs.ErrNotFound) {
				if m.markMissing(i, -1) > 0 {
					m.log.Warn("configured service not in the IPVS table; skipped until it appears", "service", svc.Key)
				}
			} else {
				m.log.Error("read IPVS table", "service", svc.Key, "error", err)
			}
			continue
		}
		index := tableIndex{table: table, byAddr: m.byAddr}
		found := 0
		for j := range svc.Servers {
			rs := &svc.Servers[j]
			key := DestKey{Service: svc.Key, Dest: rs.Addr}
			mem := m.memoryAt(i, j, key)
			di, ok := index.find(rs.Addr, mem.tableAt)
			if !ok {
				if m.markMissing(i, j) > 0 {
					m.log.Warn("configured real server not in the IPVS table; skipped until it appears", "service", svc.Key, "server", rs.Addr)
				}
				continue
			}
			found++
			mem.tableAt = di
			k := &table[di]
			// Filled in place: a literal is built aside and copied, 1 KB
			// a destination.
			out = append(out, DestStatus{})
			d := &out[len(out)-1]
			d.Key, d.KernelWeight, d.InactiveConns = key, k.Weight, k.InactiveConns
			d.Configured, d.Kernel, d.ActiveConns, d.Observed.InactiveConns = rs.Weight, k.Weight, k.ActiveConns, k.InactiveConns
			d.Counter, d.NewConns = k.Connections, -1
			if mem.seen.missing {
				m.log.Info("configured real server appeared in the IPVS table", "service", svc.Key, "server", rs.Addr, "weight", k.Weight)
			}
			rows = append(rows, destRow{svc: svc, server: rs, seen: &mem.seen, state: &mem.policy, mem: mem,
				table: policy.TableEntry{Weight: k.Weight, Counter: k.Connections,
					Missing: mem.seen.missing || mem.seen.counterSet && k.Connections < mem.seen.counter}})
			mem.seen.missing = false
		}
		if found < len(table) { // not every destination in the table is a configured one
			for _, addr := range index.unconfigured(svc.Servers) {
				m.noteOnce("unmanaged "+svc.Key.String()+addr.String(), slog.LevelInfo, "real server not in the configuration: left alone", "service", svc.Key, "server", addr)
			}
		}
		m.byAddr = index.byAddr
	}
	for i := range rows {
		rows[i].st = &out[i] // out is not appended to any more
	}
	m.spare, m.rows = out, rows
	return out[:len(out):len(out)], rows
}

// tableIndex finds a service's destinations in what the table returned:
// where each was at the last read, else by a map of their addresses,
// built at the first miss.
type tableIndex struct {
	table  []ipvs.Destination
	byAddr map[netip.AddrPort]int // reused from read to read
	built  bool
}

// find returns the index of addr in the table, looking first at hint.
func (x *tableIndex) find(addr netip.AddrPort, hint int) (int, bool) {
	if hint >= 0 && hint < len(x.table) && x.table[hint].Addr == addr {
		return hint, true
	}
	x.build()
	i, ok := x.byAddr[addr]
	return i, ok
}

// build indexes the table by address, once.
func (x *tableIndex) build() {
	if x.built {
		return
	}
	if x.byAddr == nil {
		x.byAddr = map[netip.AddrPort]int{}
	}
	clear(x.byAddr)
	for j := range x.table {
		x.byAddr[x.table[j].Addr] = j
	}
	x.built = true
}

// unconfigured returns the destinations in the table that are not among
// servers, in the table's order. The index finds nothing after it.
func (x *tableIndex) unconfigured(servers []ServerConfig) []netip.AddrPort {
	x.build()
	for j := range servers {
		delete(x.byAddr, servers[j].Addr)
	}
	x.built = false
	var out []netip.AddrPort
	for j := range x.table {
		if _, ok := x.byAddr[x.table[j].Addr]; ok {
			out = append(out, x.table[j].Addr)
		}
	}
	return out
}

// takeWritten takes the entries of the reports the recorder has given
// back. The latest report's are held until the next cycle replaces it
// (Status and Explain read it until then); of the others, one becomes
// the spare if there is none, and the rest are left to the collector.
func (m *Monitor) takeWritten() {
	if !m.recording() {
		return
	}
	for s := m.deps.History.spare(); s != nil; s = m.deps.History.spare() {
		switch {
		case sameEntries(s, m.last.Dests):
			m.held = s
		case m.spare == nil:
			m.spare = s
		}
	}
}

// sameEntries says whether a and b are the same report's entries.
func sameEntries(a, b []DestStatus) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// reconcile applies the ownership rules (policy.ReconcileServer) to every
// row and reports whether any record changed.
func (m *Monitor) reconcile(rows []destRow) bool {
	changed := false
	now := m.deps.Now()
	for i := range rows {
		d := rows[i].st
		rec, known := m.record(rows[i].mem, d.Key)
		res := policy.ReconcileServer(rec, known, rows[i].table, d.Configured, rows[i].svc.HealthChecker, rows[i].state, now)
		d.Record = res.Record
		if !res.Changed {
			continue
		}
		changed = true
		if known && m.follower && !res.Anew {
			// Someone changed the weight on this director: the writer
			// must hear of it (a drain on either director reaches both).
			m.localEdits = append(m.localEdits, replica.Edit{Key: replica.DestKey(d.Key), Weight: d.Kernel})
		}
		m.setRecord(d.Key, res.Record)
		d.Reason = res.Reason
		m.log.Info("ownership", "service", d.Key.Service, "server", d.Key.Dest,
			"weight", d.Kernel, "state", res.Record.State, "set_by", res.Record.SetBy, "reason", res.Reason)
	}
	return changed
}

// observe turns the rows' readings into what policy decides from: the
// connections scheduled since the last cycle (counter deltas) and the CPU
// busy fraction over the same interval (intervalCPU).
func (m *Monitor) observe(rows []destRow) {
	maxSpan := 2 * m.cfg.Interval.Seconds()
	for i := range rows {
		r := &rows[i]
		s, d := r.seen, r.st
		d.Counter = r.table.Counter
		if s.counterSet && !r.table.Missing {
			d.NewConns = int64(ipvs.ConnectionDelta(s.counter, d.Counter))
			d.ActiveDelta = d.ActiveConns - s.active
		}
		s.active = d.ActiveConns
		s.counter, s.counterSet = d.Counter, true
		if d.Polled && d.AgentErr == nil {
			d.CPU, d.CPUSpan = intervalCPU(s.cpuTime, d.Report.CPUTime, d.Report.CPU, maxSpan)
			d.Memory, d.Disk, d.Process = d.Report.Memory, d.Report.Disk, d.Report.Processes
			s.cpuTime = d.Report.CPUTime
		}
	}
}

// decide hands each service's rows to policy, which fills in their
// decisions, and logs what policy says happened to the service. A
// follower's decisions write nothing.
func (m *Monitor) decide(rows []destRow) {
	now := m.deps.Now()
	forEachService(rows, func(svc ipvs.ServiceKey, group []destRow) {
		ev := m.engine.Cycle(m.servicePolicy(&group[0]), m.serviceState(svc), m.servers(group), m.follower, now)
		switch {
		case ev.FrozeNow:
			m.log.Warn("service frozen: too many servers unreachable at once, the director is probably cut off; weights left as they are",
				"service", svc, "unreachable", ev.Unreachable, "servers", ev.Eligible, "freeze_share", m.cfg.Availability.FreezeShare)
		case ev.UnfrozeNow:
			m.log.Info("service unfrozen: enough servers reachable again", "service", svc, "unreachable", ev.Unreachable, "servers", ev.Eligible)
		}
		m.noteHashing(svc, ev.GuardOffForHashing)
		for i := range group {
			m.logGuard(group[i].st.Key, &group[i].st.Decision)
		}
	})
}

// forEachService calls fn for each run of rows of one service (readTable
// returns them grouped).
func forEachService(rows []destRow, fn func(ipvs.ServiceKey, []destRow)) {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].st.Key.Service == rows[i].st.Key.Service {
			j++
		}
		fn(rows[i].st.Key.Service, rows[i:j])
		i = j
	}
}

// servers lays out rows for policy, in storage reused by the next call.
func (m *Monitor) servers(rows []destRow) []policy.Server {
	if cap(m.svs) < len(rows) {
		m.svs = make([]policy.Server, len(rows))
	}
	out := m.svs[:len(rows)]
	for i := range rows {
		d := rows[i].st
		out[i] = policy.Server{Obs: &d.Observed, State: rows[i].state, Out: &d.Decision, Step: &d.capacity}
	}
	return out
}

// servicePolicy is what policy needs to know of r's service.
func (m *Monitor) servicePolicy(r *destRow) policy.Service {
	sched := m.schedulers[r.st.Key.Service]
	return policy.Service{Reference: r.svc.Probe.Reference, Hashing: policy.HashingScheduler(sched), Counting: policy.CountingScheduler(sched)}
}

// finish completes the report's entries after apply: the ownership and
// default weight that stand, and the last change.
func finish(rows []destRow) {
	for i := range rows {
		d := rows[i].st
		rec := d.Record
		if d.Outcome.Wrote {
			rec, d.Reason = d.Decision.Record, d.Decision.Reason
		}
		d.State, d.SetBy, d.DefaultWeight = rec.State, rec.SetBy, rec.DefaultWeight(d.Configured)
		d.AgentOK = rows[i].seen.agentOK
	}
}
