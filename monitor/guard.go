package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// The backlog guard (policy/guard.go decides): between cycles, the monitor
// reads only its own IPVS table — one netlink dump per service, no agent,
// no probe — and lets policy cut a server whose active connections pile
// up, or raise one far below its share while the service's backlog grows.

// readSchedulers reads, once per cycle, every service's scheduler for the
// cycle's report, and notes which services run a hashing one. A failed read
// keeps what was known.
func (m *Monitor) readSchedulers() map[ipvs.ServiceKey]string {
	svcs, err := m.deps.Table.Services()
	if err != nil {
		m.log.Debug("backlog guard: list services", "error", err)
		return m.last.Schedulers // only Cycle writes m.last, and it holds opMu
	}
	all := make(map[ipvs.ServiceKey]string, len(svcs))
	hashed := map[ipvs.ServiceKey]string{}
	for _, s := range svcs {
		all[s.Key] = s.Scheduler
		if policy.HashingScheduler(s.Scheduler) {
			hashed[s.Key] = s.Scheduler
		}
	}
	m.hashed = hashed
	return all
}

// noteHashing logs once that the guard leaves svc alone for its scheduler.
func (m *Monitor) noteHashing(svc ipvs.ServiceKey, off bool) {
	if off {
		m.noteOnce("guard-hashed "+svc.String(), slog.LevelInfo, "backlog guard: service under a hashing scheduler, where a weight change remaps clients; left alone",
			"service", svc, "scheduler", m.hashed[svc])
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
	_, rows := m.readTable()
	stateChanged := m.reconcile(rows)
	heldBefore := make([]bool, len(rows))
	for i := range rows {
		heldBefore[i] = rows[i].state.Guard.Holding()
	}
	forEachService(rows, func(svc ipvs.ServiceKey, group []destRow) {
		m.engine.Check(m.servicePolicy(&group[0]), m.serviceState(svc), servers(group))
		m.noteHashing(svc, m.hashed[svc] != "" && m.cfg.Guard.Enabled())
		sinks := false
		for i := range group {
			m.logGuard(group[i].st.Key, &group[i].st.Decision)
			if g := group[i].st.Decision.Trace.Guard; g != nil && g.Event == policy.GuardSink {
				m.probe(ctx, &group[i]) // only the suspect: a refused connection answers at once
				sinks = true
			}
		}
		if sinks {
			m.engine.TakeDownSinks(servers(group))
		}
	})
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

// logGuard logs what the backlog guard did to a server.
func (m *Monitor) logGuard(key DestKey, d *policy.Decision) {
	g := d.Trace.Guard
	if g == nil {
		return
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
	case policy.GuardKept:
		m.log.Debug("backlog guard: holds the weight", "service", key.Service, "server", key.Dest,
			"held", g.Held, "controller", g.Controller)
	}
}
