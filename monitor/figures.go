package monitor

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
	"lvs-feedback/replica"
)

// This file is the cycle's input from, and output to, a group of directors
// that share one table's traffic (ECMP spreads the flows over them, an etcd
// fleet): each director's own connection figures (OwnFigures), which the
// group's driver publishes; on the director that decides, the other
// directors' figures (SetOthers), which the cycle adds to its own after a
// plausibility bound; and the range a deciding director keeps its weights
// in so that the others accept them (CheckWeights). A director alone or in
// a pair never calls ShareFigures, and none of it runs.

// ShareFigures makes the following cycles keep this director's own
// figures for OwnFigures, add the figures SetOthers hands them, and, while
// this director writes, keep lvs-monitor's weights within the range
// CheckWeights accepts. Calling it again changes nothing.
func (m *Monitor) ShareFigures() {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.shared == nil {
		m.shared = &sharedFigures{local: map[DestKey]localFigures{}, refs: map[DestKey][2][refWindow]int64{}}
	}
}

// OwnFigures are one destination's figures as this director's table saw
// them in the last cycle, before any sum.
type OwnFigures struct {
	Key              DestKey
	New              int64 // -1: not known yet
	Active, Inactive int
}

// OwnFigures returns this director's own figures of its last cycle, one
// per configured destination in its table, in configuration order; nil
// before ShareFigures or before a cycle.
func (m *Monitor) OwnFigures() []OwnFigures {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.shared == nil {
		return nil
	}
	var out []OwnFigures
	for i := range m.cfg.Services {
		s := &m.cfg.Services[i]
		for j := range s.Servers {
			k := DestKey{Service: s.Key, Dest: s.Servers[j].Addr}
			if l, ok := m.shared.local[k]; ok {
				out = append(out, OwnFigures{Key: k, New: l.New, Active: l.Active, Inactive: l.Inactive})
			}
		}
	}
	return out
}

// sharedFigures is how the cycle meets the group: it records this
// director's own figures in local (before any sum) and, on the director
// that decides, adds others, the other directors' figures, to its
// observations.
type sharedFigures struct {
	local  map[DestKey]localFigures
	others map[DestKey][]OtherFigures
	// refs holds, per destination, the plausibility references of the
	// last refWindow cycles; refused collects the figures left out.
	refs    map[DestKey][2][refWindow]int64
	refused []RefusedFigures
}

type localFigures struct {
	New              int64 // -1: not known yet
	Active, Inactive int
}

// OtherFigures are one other director's figures for one destination.
type OtherFigures struct {
	Director            string
	New                 int64
	Active, ActiveDelta int
	Inactive            int
}

// RefusedFigures is one other director's figures for one destination
// that the plausibility bound left out.
type RefusedFigures struct {
	Director    string
	Key         DestKey
	New, Active int64
	// Bound and Reference are those of new connections.
	Bound, Reference int64
}

// The plausibility bound (docs/fleet.md): ECMP hashes flows over the
// directors, so every director's share of one server's new connections in
// an interval is of one size; a director whose figure for a server is more
// than PlausibleFactor times the reference — the larger of the leader's own
// figure and the lower median of the other directors' figures, the largest
// of the last refWindow cycles (publications reach the leader up to a cycle
// late) — is not believed. plausibleFloor (per second of interval) keeps a
// few connections from being refused when the reference is near 0.
const (
	// PlausibleFactor is exported for the group's log line that names the
	// bound.
	PlausibleFactor = 10
	plausibleFloor  = 10
	refWindow       = 3
)

// addOthers runs in the cycle after observe: it keeps this director's
// own figures for publishing and, on a leader, makes the observations the
// group-wide sums the controller decides on.
func (m *Monitor) addOthers(rows []destRow) {
	f := m.shared
	if f == nil {
		return
	}
	clear(f.local)
	floor := int64(math.Ceil(plausibleFloor * m.cfg.Interval.Seconds()))
	for i := range rows {
		d := rows[i].st
		f.local[d.Key] = localFigures{New: d.NewConns, Active: d.ActiveConns, Inactive: d.InactiveConns}
		figs := f.others[d.Key]
		if len(figs) == 0 {
			continue
		}
		news, acts := make([]int64, len(figs)), make([]int64, len(figs))
		for j, o := range figs {
			news[j], acts[j] = o.New, int64(o.Active)
		}
		refNew := f.reference(d.Key, 0, max(d.NewConns, 0), lowerMedian(news))
		refAct := f.reference(d.Key, 1, int64(d.ActiveConns), lowerMedian(acts))
		boundNew, boundAct := PlausibleFactor*max(refNew, floor), PlausibleFactor*max(refAct, floor)
		for _, o := range figs {
			if o.New > boundNew || int64(o.Active) > boundAct || int64(abs(o.ActiveDelta)) > boundAct {
				f.refused = append(f.refused, RefusedFigures{Director: o.Director, Key: d.Key, New: o.New, Active: int64(o.Active),
					Bound: boundNew, Reference: refNew})
				continue
			}
			if d.NewConns >= 0 {
				d.NewConns += o.New
			}
			d.ActiveConns += o.Active
			d.ActiveDelta += o.ActiveDelta
			d.InactiveConns += o.Inactive
		}
	}
}

// reference records this cycle's plausibility reference of one figure
// of a destination (slot 0: new connections, 1: active) — the larger of
// the leader's own and the lower median of the others' — and returns the
// largest of the last refWindow cycles.
func (f *sharedFigures) reference(k DestKey, slot int, own, median int64) int64 {
	h := f.refs[k]
	copy(h[slot][1:], h[slot][:refWindow-1])
	h[slot][0] = max(own, median)
	f.refs[k] = h
	return slices.Max(h[slot][:])
}

// lowerMedian is the lower median of v (v is reordered): with an even
// count the smaller middle value, so that one of two directors cannot
// raise it alone.
func lowerMedian(v []int64) int64 {
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// TakeRefused returns and forgets the other directors' figures the
// plausibility bound left out of the cycles since the last call (nil:
// none).
func (m *Monitor) TakeRefused() []RefusedFigures {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.shared == nil {
		return nil
	}
	r := m.shared.refused
	m.shared.refused = nil
	return r
}

// SetOthers sets the other directors' figures the following cycles add to
// this director's own (nil: none, the director decides on its own
// figures). It needs ShareFigures first; without it the figures are
// ignored.
func (m *Monitor) SetOthers(o map[DestKey][]OtherFigures) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.shared != nil {
		m.shared.others = o
	}
}

// weightRange is the range of the weights lvs-monitor decides for a
// server of effective default weight def: from weight.min to the larger
// of weight.scale × def (the LVS formula's bound) and weight.resolution
// (the capacity controller's largest weight), within the kernel's bound.
func weightRange(p policy.WeightParams, def int) (lo, hi int) {
	hi = min(max(policy.RoundWeight(policy.MaxWeightFor(def, p)), p.Resolution), ipvs.MaxWeight)
	return p.Min, max(hi, p.Min)
}

// CheckWeights checks that every weight lvs-monitor set in snap (managed,
// set by lvs-monitor) for a server configured here lies within its range.
// An operator's, a health checker's or a weight found in the table is
// theirs, bounded by the kernel's range only (DecodeDocument).
func (m *Monitor) CheckWeights(snap replica.Snapshot) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	conf := map[DestKey]int{}
	for i := range m.cfg.Services {
		s := &m.cfg.Services[i]
		for j := range s.Servers {
			conf[DestKey{Service: s.Key, Dest: s.Servers[j].Addr}] = s.Servers[j].Weight
		}
	}
	for _, x := range snap.Dests {
		c, ok := conf[DestKey(x.Key)]
		if !ok || x.State != string(policy.Managed) || x.SetBy != policy.ByMonitor {
			continue
		}
		def := policy.DestRecord{DefaultOverride: x.DefaultOverride, OverriddenConfig: x.OverriddenConfig}.DefaultWeight(c)
		if lo, hi := weightRange(m.cfg.Weight, def); x.Weight < lo || x.Weight > hi {
			return fmt.Errorf("%s: weight %d outside the configured range %d–%d (weight.min to the larger of weight.scale × default %d and weight.resolution)",
				x.Key, x.Weight, lo, hi, def)
		}
	}
	return nil
}

// boundWeights keeps a deciding director's decisions within the range
// followers accept (weightRange): a weight of lvs-monitor's outside it,
// decided now or standing, is written at the nearest bound. It runs between
// decide and apply; a follower's decisions write nothing anyway.
func (m *Monitor) boundWeights(rows []destRow) {
	if m.shared == nil || m.follower {
		return
	}
	for i := range rows {
		d := rows[i].st
		dec := &d.Decision
		rec := dec.Record
		if rec.State != policy.Managed || rec.SetBy != policy.ByMonitor || dec.Trace.Frozen {
			continue
		}
		lo, hi := weightRange(m.cfg.Weight, rec.DefaultWeight(d.Configured))
		if st := rows[i].state; st.CtrlSet {
			st.Ctrl = min(max(st.Ctrl, float64(lo)), float64(hi))
		}
		if dec.OnWrite.SetCtrl {
			dec.OnWrite.Ctrl = min(max(dec.OnWrite.Ctrl, float64(lo)), float64(hi))
		}
		w := min(max(dec.To, lo), hi)
		if w == dec.To {
			continue
		}
		m.log.Warn("fleet: the leader's weight bounded to the configured range", "service", d.Key.Service, "server", d.Key.Dest,
			"decided", dec.To, "written", w, "min", lo, "max", hi)
		dec.Reason = strings.TrimPrefix(fmt.Sprintf("%s; %d bounded to the range %d–%d", dec.Reason, dec.To, lo, hi), "; ")
		dec.To, dec.Write = w, w != dec.Before
		dec.Record.Written, dec.RecordChanged = w, true
	}
}
