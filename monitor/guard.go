package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// The backlog guard (policy/guard.go decides): between cycles, the monitor
// reads only its own IPVS table — one netlink dump per service, no agent,
// no probe — and lets policy cut a server whose active connections pile
// up, or raise one far below its share while the service's backlog grows.

// readSchedulers reads, once per cycle, every service's scheduler for the
// cycle's report and for the guard (hashing schedulers, and those that
// weigh active connections themselves, change what it does). A failed
// read keeps what was known.
func (m *Monitor) readSchedulers() map[ipvs.ServiceKey]string {
	svcs, err := m.deps.Table.Services()
	if err != nil {
		m.log.Debug("backlog guard: list services", "error", err)
		return m.last.Schedulers // only Cycle writes m.last, and it holds opMu
	}
	all := make(map[ipvs.ServiceKey]string, len(svcs))
	for _, s := range svcs {
		all[s.Key] = s.Scheduler
	}
	m.schedulers = all
	return all
}

// noteHashing logs once that the guard leaves svc alone for its scheduler.
func (m *Monitor) noteHashing(svc ipvs.ServiceKey, off bool) {
	if off {
		m.noteOnce("guard-hashed "+svc.String(), slog.LevelInfo, "backlog guard: service under a hashing scheduler, where a weight change remaps clients; left alone",
			"service", svc, "scheduler", m.schedulers[svc])
	}
}

// Guard runs one backlog check: read table → reconcile ownership → per
// service, policy's check → apply. It does nothing on a follower or with
// the guard off. It returns the number of weights written.
func (m *Monitor) Guard(ctx context.Context) (int, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.follower || !m.cfg.Guard.Enabled() {
		return 0, nil
	}
	m.deps.Metrics.guardCheck()
	_, rows := m.readTable()
	stateChanged := m.reconcile(rows)
	heldBefore := make([]bool, len(rows))
	for i := range rows {
		heldBefore[i] = rows[i].state.Guard.Holding()
	}
	// Two passes: every service's check first, so that one read of the
	// connection table serves every suspect; then the evidence, the
	// probes and the take-downs, only where there is something to do.
	var suspects map[netip.AddrPort]struct{}
	sinks, pilingUp := false, false
	forEachService(rows, func(svc ipvs.ServiceKey, group []destRow) {
		m.engine.Check(m.servicePolicy(&group[0]), m.serviceState(svc), m.servers(group))
		m.noteHashing(svc, policy.HashingScheduler(m.schedulers[svc]) && m.cfg.Guard.Enabled())
		for i := range group {
			m.logGuard(group[i].st.Key, &group[i].st.Decision)
			if g := group[i].st.Decision.Trace.Guard; g != nil && g.Event == policy.GuardSink {
				sinks = true
			}
			if group[i].state.Guard.Suspect {
				if suspects == nil {
					suspects = map[netip.AddrPort]struct{}{}
				}
				suspects[group[i].st.Key.Dest] = struct{}{}
				pilingUp = pilingUp || group[i].state.Guard.PilingUp
			}
		}
	})
	conns := m.readConns(suspects, pilingUp)
	if sinks || conns != nil {
		forEachService(rows, func(svc ipvs.ServiceKey, group []destRow) { m.takeOut(ctx, svc, group, conns) })
	}
	res := m.applyRows(rows)
	for i := range rows {
		// Between cycles the metrics hear of a move or a hold that ended
		// here; a cycle's report carries the rest (observeCycle).
		r := &rows[i]
		if r.st.Outcome.Wrote || heldBefore[i] != r.state.Guard.Holding() {
			m.deps.Metrics.guardChanged(r.st.Key, r.st.Outcome.Wrote, r.state.Guard)
		}
	}
	err := res.err
	if stateChanged || res.recordsChanged {
		if serr := m.saveState(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		return res.writes, fmt.Errorf("backlog guard: %w", err)
	}
	return res.writes, ctx.Err()
}

// takeOut acts on a service's dead-looking servers at a backlog check:
// what the connection table shows of its suspects (conns; nil: not read),
// then a probe of each sinking or resetting one, then TakeDownSinks.
func (m *Monitor) takeOut(ctx context.Context, svc ipvs.ServiceKey, group []destRow, conns map[ipvs.ConnKey]ipvs.ConnCounts) {
	svs := m.servers(group)
	if conns != nil {
		counts, ok := connsOf(svc, group, conns)
		m.engine.TableEvidence(svs, counts, ok)
	}
	act := false
	for i := range group {
		g := group[i].st.Decision.Trace.Guard
		if g == nil {
			continue
		}
		switch g.Event {
		case policy.GuardSink: // logged at the check
			m.probe(ctx, &group[i]) // only the suspect: a refused connection answers at once
			act = true
		case policy.GuardReset:
			m.logGuard(group[i].st.Key, &group[i].st.Decision)
			m.probe(ctx, &group[i])
			act = true
		case policy.GuardUnanswered:
			m.logGuard(group[i].st.Key, &group[i].st.Decision)
			act = true
		}
	}
	if act {
		m.engine.TakeDownSinks(svs)
	}
}

// logGuard logs what the backlog guard did to a server.
func (m *Monitor) logGuard(key DestKey, d *policy.Decision) {
	g := d.Trace.Guard
	if g == nil {
		return
	}
	if p := g.Prediction; p != nil && m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.log.Debug("backlog guard: predicting", "service", key.Service, "server", key.Dest,
			"excess", round3(p.Excess), "predicted", round3(p.Backlog), "bar", round3(p.Bar), "grows", p.Grows,
			"rated", p.Rated, "finishing_less", p.FinishingLess, "cut", p.Over)
	}
	switch g.Event {
	case policy.GuardDropped:
		m.log.Info("backlog guard: hold dropped", "service", key.Service, "server", key.Dest, "state", g.DroppedAs, "weight", d.Before)
	case policy.GuardReleased:
		m.log.Info("backlog guard: released", "service", key.Service, "server", key.Dest,
			"weight", d.Before, "active", g.Active, "ratio", round3(g.Ratio), "restore", g.Restore)
	case policy.GuardSink:
		m.log.Info("backlog guard: no established connection while its connections end: probed now", "service", key.Service, "server", key.Dest,
			"weight", d.Before, "ended", g.Ended, "median", round3(g.Median))
	case policy.GuardReset:
		m.log.Info("backlog guard: its new connections are reset: probed now", "service", key.Service, "server", key.Dest,
			"weight", d.Before, "reset", g.Conns.Resets, "progressed", g.Conns.Progressed)
	case policy.GuardUnanswered:
		m.log.Info("backlog guard: its connections never complete their handshake", "service", key.Service, "server", key.Dest,
			"weight", d.Before, "handshakes", g.Conns.Handshakes, "established", g.Conns.Established)
	case policy.GuardKept:
		m.log.Debug("backlog guard: holds the weight", "service", key.Service, "server", key.Dest,
			"held", g.Held, "controller", g.Controller)
	}
}

// connBudget spaces the guard's reads of the connection table: the kernel
// walks every connection of the director for one, so after a read that
// took d the next of its kind waits spacing·d — at most 1/spacing of the
// time goes to each kind, whatever the table's size. A read for a server
// whose active connections pile up (policy.PilingUp: the sign of one that
// answers nobody, and rare on a healthy director) has a budget of its own,
// and a larger share (1/20 against 1/50): the reads that a healthy
// service's short connections prompt at every check (none active while the
// inactive count moves) cannot space it out, and while a server piles up
// its table is read at every check unless a read costs over 50 ms.
type connBudget struct {
	next [2]time.Time // by kind: [0] the others, [1] piling up
}

// allows says whether a read of the kind may be made at now.
func (b *connBudget) allows(now time.Time, pilingUp bool) bool {
	return !now.Before(b.next[kindIndex(pilingUp)])
}

// spend records a read of the kind made at now that took took: a read
// that costs under 1/spacing of a check period needs no spacing (the
// guard reads at most once a check).
func (b *connBudget) spend(now time.Time, took, check time.Duration, pilingUp bool) {
	k := kindIndex(pilingUp)
	b.next[k] = time.Time{}
	if gap := connSpacing(pilingUp) * took; gap > check {
		b.next[k] = now.Add(gap)
	}
}

func kindIndex(pilingUp bool) int {
	if pilingUp {
		return 1
	}
	return 0
}

// connSpacing is the spacing factor of a kind of read (connBudget): the
// connections of a server piling up are read more often.
func connSpacing(pilingUp bool) time.Duration {
	if pilingUp {
		return 20
	}
	return 50
}

// readConns reads the connection table's entries of the suspect
// destinations, or returns nil: none suspect, a table that cannot read
// them (another namespace, an old kernel), a failed read (logged once) or
// a read too soon after an expensive one of its kind (pilingUp: some
// suspect's active connections pile up; connBudget).
func (m *Monitor) readConns(suspects map[netip.AddrPort]struct{}, pilingUp bool) map[ipvs.ConnKey]ipvs.ConnCounts {
	if len(suspects) == 0 {
		return nil
	}
	r, ok := m.deps.Table.(ipvs.ConnReader)
	if !ok {
		return nil
	}
	now := time.Now() // the cost of the read itself, not the monitor's clock
	if !m.conns.allows(now, pilingUp) {
		m.deps.Metrics.connRead("spaced")
		return nil
	}
	conns, err := r.ConnStates(suspects)
	m.conns.spend(now, time.Since(now), m.cfg.Guard.Check, pilingUp)
	if err != nil {
		m.deps.Metrics.connRead("error")
		m.noteOnce("guard-conns", slog.LevelWarn, "backlog guard: cannot read the connection table; dead servers wait for the cycles' probes", "error", err)
		return nil
	}
	m.deps.Metrics.connRead("ok")
	return conns
}

// connsOf lays out the connection table's counts for a service's rows
// (ok false where the row was not read). A firewall-mark service's
// connections carry the address each client reached, not the service's:
// they are summed over every address.
func connsOf(svc ipvs.ServiceKey, group []destRow, conns map[ipvs.ConnKey]ipvs.ConnCounts) ([]ipvs.ConnCounts, []bool) {
	counts, ok := make([]ipvs.ConnCounts, len(group)), make([]bool, len(group))
	for i := range group {
		if !group[i].state.Guard.Suspect {
			continue
		}
		dest := group[i].st.Key.Dest
		switch {
		case svc.IsFWMark():
			for k, c := range conns {
				if k.Dest == dest && k.Protocol == ipvs.TCP {
					counts[i] = addCounts(counts[i], c)
				}
			}
		case svc.Protocol == ipvs.TCP:
			counts[i] = conns[ipvs.ConnKey{Protocol: ipvs.TCP, VAddr: svc.Addr, Dest: dest}]
		default:
			continue // only TCP has states to read
		}
		ok[i] = true
	}
	return counts, ok
}

func addCounts(a, b ipvs.ConnCounts) ipvs.ConnCounts {
	return ipvs.ConnCounts{Handshakes: a.Handshakes + b.Handshakes, Established: a.Established + b.Established,
		Progressed: a.Progressed + b.Progressed, Resets: a.Resets + b.Resets}
}
