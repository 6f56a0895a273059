package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"lvs-feedback/ipvs"
)

// The backlog guard: between cycles, the monitor reads only its own IPVS
// table (cheap: one netlink dump per service, no agent, no probe) and looks
// for a server whose active connections pile up. A server that suddenly
// lost capacity — a background job, a degraded disk — keeps receiving its
// full share under wrr until the next cycle measures it, and builds a
// backlog that it then serves slowly with what it has left. The table shows
// that backlog within a second: its active connections per unit of weight
// run away from its peers'. The guard then cuts the weight in proportion
// and holds it (cycles may lower it further, not raise it) until the backlog
// is gone; from then on the weight controller's weight applies.
//
// The other side of the same signal: while the whole service builds a
// backlog (it is overloaded), a server far *below* its share of active
// connections keeps up better than its weight says; it is raised (at most
// doubled) and held up the same way, until its share is back.
//
// wlc and sed balance active connections per unit of weight themselves, so
// the guard does not fire under them unless a server is far off what its
// weight says.

// GuardConfig is the [backlog_guard] section.
type GuardConfig struct {
	// Check is how often the table is checked between cycles; 0 disables
	// the guard.
	Check time.Duration `toml:"check"`
	// Trigger: a server is backlogged when its active connections per unit
	// of weight reach Trigger × the service's median, at two checks in a
	// row, growing; it is starved when they are at most 1/Trigger of the
	// median, at two checks in a row, while the median grows.
	Trigger float64 `toml:"trigger"`
	// Release: a held server is released at a cycle when its active
	// connections per unit of its weight before the move are back within
	// Release × the median (at most Release×, after a cut; at least
	// 1/Release×, after a raise).
	Release float64 `toml:"release"`
	// MinExcess: and it holds at least this many active connections more
	// (backlogged) or fewer (starved) than the median share of its weight —
	// a few connections are never a backlog, whatever the ratio.
	MinExcess int `toml:"min_excess"`
	// Raise: starved servers are raised too (false: the guard only cuts).
	Raise bool `toml:"raise"`
}

// HashingScheduler reports whether an IPVS scheduler places connections by
// hashing (sh, dh, mh): there a weight change remaps clients to other
// servers, so the backlog guard leaves such services alone.
func HashingScheduler(name string) bool {
	switch name {
	case "sh", "dh", "mh":
		return true
	}
	return false
}

// readSchedulers notes, once per cycle, which services run a hashing
// scheduler. A failed read keeps what was known.
func (m *Monitor) readSchedulers() {
	svcs, err := m.deps.Table.Services()
	if err != nil {
		m.log.Debug("backlog guard: list services", "error", err)
		return
	}
	hashed := map[ipvs.ServiceKey]string{}
	for _, s := range svcs {
		if HashingScheduler(s.Scheduler) {
			hashed[s.Key] = s.Scheduler
		}
	}
	m.hashed = hashed
}

// Enabled reports whether the guard runs.
func (g GuardConfig) Enabled() bool { return g.Check > 0 }

// BacklogRatio is a server's active connections per unit of weight as a
// multiple of its service's median (median per unit of weight), and its
// excess over the median share: active − median·weight. A median of 0 gives
// ratio +Inf for a server with active connections.
func BacklogRatio(active, weight int, median float64) (ratio, excess float64) {
	if weight <= 0 {
		return math.NaN(), 0
	}
	expected := median * float64(weight)
	excess = float64(active) - expected
	if expected <= 0 {
		if active == 0 {
			return 0, 0
		}
		return math.Inf(1), excess
	}
	return float64(active) / expected, excess
}

// Backlogged reports whether a server with this ratio and excess at this
// check, and prevActive active connections at the previous one, is
// building a backlog: beyond the trigger with at least MinExcess more than
// its share, and growing.
func Backlogged(ratio, excess float64, active, prevActive int, g GuardConfig) bool {
	return ratio >= g.Trigger && excess >= float64(g.MinExcess) && active > prevActive
}

// Starved reports whether a server with this ratio and excess at this
// check is far below its share while its service builds a backlog: at most
// 1/Trigger of the median per unit of weight with at least MinExcess fewer
// connections than its share, and the service's median growing.
func Starved(ratio, excess float64, building bool, g GuardConfig) bool {
	return building && ratio <= 1/g.Trigger && -excess >= float64(g.MinExcess)
}

// GuardRaise is the weight a starved server is raised to: its weight
// divided by its ratio, at most doubled, at most ipvs.MaxWeight.
func GuardRaise(weight int, ratio float64) int {
	if !(ratio >= 0 && ratio < 1) {
		return weight
	}
	to := min(2*weight, ipvs.MaxWeight)
	if ratio > 0 {
		to = min(to, int(math.Ceil(float64(weight)/ratio)))
	}
	return max(to, weight)
}

// GuardCut is the weight a backlogged server is cut to: its weight divided
// by its backlog ratio, at least minWeight and below weight.
func GuardCut(weight int, ratio float64, minWeight int) int {
	if !(ratio > 1) {
		return weight
	}
	to := int(math.Floor(float64(weight) / ratio)) // +Inf: 0, so minWeight
	return max(minWeight, to)
}

// guardState is a destination's backlog-guard memory.
type guardState struct {
	prevActive int  // active connections at the previous check
	over       bool // beyond the trigger at the previous check
	from       int  // the weight before the move
	weight     int  // the held weight (0: no hold; a cycle may move it further)
	// restore is the weight the server goes back to when the hold ends:
	// the weight before the cut, or the controller's latest since.
	restore int
	under   bool // starved at the previous check
	raised  bool // the hold is a raise, not a cut
}

// holding reports whether the guard holds the weight: a held weight is at
// least weight.min, so never 0.
func (g guardState) holding() bool { return g.weight > 0 }

// medianPerWeight is the median of active connections per unit of weight
// over a service's rows in rotation (managed, weight > 0). A held server
// counts at the weight it had before the cut.
func medianPerWeight(rows []*destRow) float64 {
	var v []float64
	for _, r := range rows {
		if r.rec.State != Managed || r.kernel.Weight <= 0 {
			continue
		}
		w := r.kernel.Weight
		if r.mem.guard.holding() {
			w = r.mem.guard.from
		}
		v = append(v, float64(r.kernel.ActiveConns)/float64(w))
	}
	return median(v)
}

// Guard runs one backlog check: read table → reconcile ownership → per
// service, find backlogged servers → cut and hold, or release → write. It
// does nothing on a follower or with the guard off, and nothing in a
// frozen service. It returns the number of weights written.
func (m *Monitor) Guard(ctx context.Context) (int, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.follower || !m.cfg.Guard.Enabled() {
		return 0, nil
	}
	rows := m.readTable()
	stateChanged := m.reconcile(rows)
	heldBefore := make([]bool, len(rows))
	for i, r := range rows {
		heldBefore[i] = r.mem.guard.holding()
	}
	m.checkBacklog(rows, false)
	writes, wroteState, err := m.write(rows)
	for i, r := range rows {
		// Between cycles the metrics hear of a move or a hold that ended
		// here; a cycle's report carries the rest (observeCycle).
		if r.wrote || heldBefore[i] != r.mem.guard.holding() {
			m.deps.Metrics.guardChanged(r.key, r.wrote, r.mem.guard)
		}
	}
	if stateChanged || wroteState {
		if serr := m.saveState(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		return writes, fmt.Errorf("backlog guard: %w", err)
	}
	return writes, ctx.Err()
}

// checkBacklog updates every row's guard state from the table, and sets
// the rows' actions:
//
//   - at a cycle, a held server whose backlog is gone (or the guard turned
//     off) is released: it goes back to its restore weight, unless the
//     cycle writes the controller's weight anyway; a server whose weight
//     someone else changed is released at once (that change stands);
//   - a held server stays held: in a cycle (inCycle), a write above the held
//     weight is not made but remembered as the weight to restore; a lower
//     one is made and held;
//   - between cycles, a backlogged server is cut and held.
//
// A server that leaves the managed state (drained, down) forgets its hold;
// a frozen service is left as it is.
func (m *Monitor) checkBacklog(rows []*destRow, inCycle bool) {
	g := m.cfg.Guard
	for _, svcRows := range byService(rows) {
		svc := svcRows[0].key.Service
		if m.frozen[svc] {
			continue
		}
		on := g.Enabled()
		if sched, ok := m.hashed[svc]; ok && on {
			on = false
			m.noteOnce("guard-hashed "+svc.String(), slog.LevelInfo, "backlog guard: service under a hashing scheduler, where a weight change remaps clients; left alone",
				"service", svc, "scheduler", sched)
		}
		med := medianPerWeight(svcRows)
		prevMed, seen := m.backlogMedian[svc]
		m.backlogMedian[svc] = med
		building := seen && med > prevMed // the service's backlog grows
		for _, r := range svcRows {
			gs := &r.mem.guard
			active := r.kernel.ActiveConns
			leaving := r.action.Write && r.action.Record.State != Managed
			if r.rec.State != Managed || r.kernel.Weight <= 0 || leaving {
				if gs.holding() {
					state := r.rec.State
					if leaving {
						state = r.action.Record.State
					}
					m.log.Info("backlog guard: hold dropped", "service", r.key.Service, "server", r.key.Dest, "state", state, "weight", r.kernel.Weight)
				}
				*gs = guardState{prevActive: active}
				continue
			}
			if gs.holding() {
				m.holdOrRelease(r, med, inCycle, on)
				continue
			}
			ratio, excess := BacklogRatio(active, r.kernel.Weight, med)
			over := on && ratio >= g.Trigger && excess >= float64(g.MinExcess)
			under := on && g.Raise && Starved(ratio, excess, building, g)
			cut := !inCycle && gs.over && over && Backlogged(ratio, excess, active, gs.prevActive, g)
			// A server in slow start is below its share on purpose.
			raise := !inCycle && gs.under && under && r.mem.rampStart.IsZero()
			gs.over, gs.under, gs.prevActive = over, under, active
			switch {
			case cut:
				to := GuardCut(r.kernel.Weight, ratio, m.cfg.Weight.Min)
				if to >= r.kernel.Weight {
					continue
				}
				*gs = guardState{prevActive: active, from: r.kernel.Weight, weight: to, restore: r.kernel.Weight}
				r.action = writeAction(r.rec, to, fmt.Sprintf("backlog: %d active connections, %.1f× its weight's share (service median %.2f per unit of weight)", active, ratio, med), 1)
			case raise:
				to := GuardRaise(r.kernel.Weight, ratio)
				if to <= r.kernel.Weight {
					continue
				}
				*gs = guardState{prevActive: active, raised: true, from: r.kernel.Weight, weight: to, restore: r.kernel.Weight}
				r.action = writeAction(r.rec, to, fmt.Sprintf("starved: %d active connections, %.2f× its weight's share while the service's backlog grows (median %.2f per unit of weight)", active, ratio, med), 1)
			}
		}
	}
}

// holdOrRelease is checkBacklog for a held server; on is false when the
// guard is off (for its service), which ends every hold.
func (m *Monitor) holdOrRelease(r *destRow, med float64, inCycle, on bool) {
	gs := &r.mem.guard
	active := r.kernel.ActiveConns
	if inCycle && r.action.Write {
		gs.restore = r.action.To // the controller's latest weight
	}
	ratio, excess := BacklogRatio(active, gs.from, med)
	changed := r.kernel.Weight != gs.weight // by someone else
	// Back to its share. Not on the excess: a server that stays slow holds
	// a few connections more than its share even at its cut weight, and
	// released on that it piles up again at once (e2e-guard on the real
	// kernel: cut and restored every 4 s). A raised server is also back
	// when its shortfall is under half of min_excess: an overload that
	// ended takes the median, and every shortfall, to 0.
	back := ratio <= m.cfg.Guard.Release
	if gs.raised {
		back = ratio >= 1/m.cfg.Guard.Release || -excess < float64(m.cfg.Guard.MinExcess)/2
	}
	// The hold ends at a cycle, whose measurements then set the weight:
	// released between cycles, a server that lost capacity would get its
	// old weight back before the controller could lower it.
	if !on || inCycle && back || changed {
		m.log.Info("backlog guard: released", "service", r.key.Service, "server", r.key.Dest,
			"weight", r.kernel.Weight, "active", active, "ratio", round3(ratio), "restore", gs.restore)
		if !changed && !r.action.Write && gs.restore != r.kernel.Weight {
			what := "backlog gone"
			if gs.raised {
				what = "share back"
			}
			r.action = writeAction(r.rec, gs.restore, fmt.Sprintf("%s (%d active connections, %.2f× its share): back to weight %d", what, active, ratio, gs.restore), 1)
		}
		*gs = guardState{prevActive: active}
		return
	}
	gs.prevActive = active
	if !inCycle || !r.action.Write {
		return
	}
	// A cycle may move a held weight further the way the guard moved it,
	// not back.
	if gs.raised && r.action.To < gs.weight || !gs.raised && r.action.To > gs.weight {
		m.log.Debug("backlog guard: holds the weight", "service", r.key.Service, "server", r.key.Dest,
			"held", gs.weight, "controller", r.action.To)
		r.action = Action{Record: r.rec}
		return
	}
	gs.weight = r.action.To
}

// byService groups rows by service, in the order the services first
// appear.
func byService(rows []*destRow) [][]*destRow {
	var out [][]*destRow
	idx := map[ipvs.ServiceKey]int{}
	for _, r := range rows {
		i, ok := idx[r.key.Service]
		if !ok {
			i = len(out)
			idx[r.key.Service] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}
