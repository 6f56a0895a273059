package policy

import (
	"fmt"
	"time"
)

// Ownership says who owns a destination's weight.
type Ownership string

// The ownership states of a destination. They are persisted (state.go), so
// their string values are part of the state file format.
const (
	// Managed: the daemon computes and writes the weight.
	Managed Ownership = "managed"
	// DrainedByOperator: someone other than the daemon set weight 0. The
	// daemon never touches the destination until someone sets a non-zero
	// weight again.
	DrainedByOperator Ownership = "drained"
	// Down: the daemon set weight 0 because the server's probe failed; it
	// restores the weight when the server answers again.
	Down Ownership = "down"
)

// DestRecord is what the daemon knows about one destination's weight. It is
// persisted so that a restart neither un-drains an operator's server nor
// leaves a recovered server at 0.
type DestRecord struct {
	State Ownership `json:"state"`
	// Written is the weight the kernel should hold: the last one the daemon
	// wrote, or the one it adopted from the kernel. A kernel weight that
	// differs from it was set by someone else.
	Written int `json:"written"`
	// DefaultOverride, when non-zero, replaces the configured default weight:
	// an operator set this weight with another tool. It holds only while the
	// configured default is still OverriddenConfig; editing the configured
	// weight clears it.
	DefaultOverride  int `json:"default_override,omitempty"`
	OverriddenConfig int `json:"overridden_config,omitempty"`
	// RestoreWeight is the weight to give back when a Down server answers.
	RestoreWeight int `json:"restore_weight,omitempty"`
	// Counter is the destination's connection counter when it left
	// rotation (drained or down). A destination out of rotation is sent no
	// new connection, so a lower counter later means it was created anew:
	// the table was rebuilt while the monitor was not looking.
	Counter uint32 `json:"counter,omitempty"`
}

// TableEntry is what the IPVS table showed of a destination at one read.
type TableEntry struct {
	Weight int
	// Counter is the destination's cumulative connection counter.
	Counter uint32
	// Missing: the monitor saw the destination, or its service, missing
	// from the table since its previous read, or its counter go back. Either
	// way it was created anew (a rebuilt table, a health checker's remove
	// and re-add), and its weight is its creator's, not an operator's edit.
	Missing bool
}

// DefaultWeight returns the destination's effective default weight given
// the configured one.
func (r DestRecord) DefaultWeight(configured int) int {
	if r.DefaultOverride > 0 && r.OverriddenConfig == configured {
		return r.DefaultOverride
	}
	return configured
}

// Reconciliation is what Reconcile found about a destination.
type Reconciliation struct {
	Record  DestRecord
	Changed bool   // the record differs from the one passed in
	Reason  string // why, for the log; empty when nothing happened
	// Anew: the destination was created anew; its weight is not an edit
	// of anyone's (a follower does not pass it on to the writer).
	Anew bool
}

// Reconcile compares the table's weight with what the daemon knows and
// applies the ownership rules:
//
//   - a destination never seen before is adopted as managed at its kernel
//     weight, unless that weight is 0: an unexplained 0 is an operator drain;
//   - a destination created anew (a rebuilt table: its counter went back
//     below the one recorded when it left rotation, or the monitor saw it
//     missing) keeps its record: a drain or a down mark stands, and its
//     weight goes back to 0 (the cycle's decision writes it); a managed one
//     is adopted at its new weight without becoming a new default;
//   - a kernel weight that differs from the one the daemon wrote was set by
//     someone else: 0 means drained by the operator, any other value becomes
//     the destination's new default weight (and it is managed again);
//   - a drained or down destination still at 0 stays as it is.
//
// known is false when the daemon has no record of the destination (new, or
// the state file was missing or corrupt).
func Reconcile(rec DestRecord, known bool, t TableEntry, configuredDefault int) Reconciliation {
	kernelWeight := t.Weight
	if !known {
		if kernelWeight == 0 {
			return Reconciliation{
				Record:  DestRecord{State: DrainedByOperator, Counter: t.Counter},
				Changed: true,
				Reason:  "weight 0 not set by lvs-monitor: treated as an operator drain",
			}
		}
		return Reconciliation{
			Record:  DestRecord{State: Managed, Written: kernelWeight},
			Changed: true,
			Reason:  "adopted at its kernel weight",
		}
	}
	if rec.State == Managed && kernelWeight == rec.Written {
		return Reconciliation{Record: rec}
	}
	if rec.State != Managed && kernelWeight == 0 {
		return Reconciliation{Record: rec}
	}
	if why := anew(rec, t); why != "" {
		kept := rec
		if rec.State != Managed {
			kept.Counter = t.Counter // from now on, an undrain of this destination is an edit
			return Reconciliation{Record: kept, Changed: true, Anew: true,
				Reason: fmt.Sprintf("created anew at weight %d (%s): still %s, its weight goes back to 0", kernelWeight, why, rec.State)}
		}
		kept.Written = kernelWeight
		return Reconciliation{Record: kept, Changed: true, Anew: true,
			Reason: fmt.Sprintf("created anew at weight %d (%s): adopted at it, its default weight unchanged", kernelWeight, why)}
	}
	// Someone else wrote the weight.
	if kernelWeight == 0 {
		return Reconciliation{
			Record:  DestRecord{State: DrainedByOperator, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig, Counter: t.Counter},
			Changed: true,
			Reason:  fmt.Sprintf("weight set to 0 by another tool (lvs-monitor wrote %d): drained by operator", rec.Written),
		}
	}
	reason := fmt.Sprintf("weight set to %d by another tool (lvs-monitor wrote %d): new default weight", kernelWeight, rec.Written)
	switch rec.State {
	case DrainedByOperator:
		reason = fmt.Sprintf("undrained by operator at weight %d: new default weight", kernelWeight)
	case Down:
		reason = fmt.Sprintf("weight of a down server set to %d by another tool: new default weight", kernelWeight)
	}
	return Reconciliation{
		Record: DestRecord{
			State:            Managed,
			Written:          kernelWeight,
			DefaultOverride:  kernelWeight,
			OverriddenConfig: configuredDefault,
		},
		Changed: true,
		Reason:  reason,
	}
}

// anew says why a destination was created anew since rec was made, or ""
// when it was not.
func anew(rec DestRecord, t TableEntry) string {
	switch {
	case t.Missing:
		return "it was missing from the table"
	case rec.State != Managed && t.Counter < rec.Counter:
		return fmt.Sprintf("its connection counter went back from %d to %d", rec.Counter, t.Counter)
	}
	return ""
}

// ReconcileServer applies Reconcile to a server and to what policy
// remembers of it: the controller starts from the kernel weight the first
// time it sees the server or when someone else set the weight, and a
// server put back into rotation — by an operator, or created anew — starts
// slow start at now.
func ReconcileServer(rec DestRecord, known bool, t TableEntry, configuredDefault int, st *ServerState, now time.Time) Reconciliation {
	res := Reconcile(rec, known, t, configuredDefault)
	if !res.Changed {
		if !st.CtrlSet {
			st.Ctrl, st.CtrlSet = float64(t.Weight), true
		}
		return res
	}
	st.Ctrl, st.CtrlSet = float64(t.Weight), true
	if res.Record.State == Managed && known && (rec.State != Managed || res.Anew) {
		st.RampStart = now // back in rotation, or created anew: slow start
	}
	return res
}

// Drain is an operator's drain (lvsctl drain): weight 0, recorded as
// DrainedByOperator so that the monitor never touches the server until it
// is undrained — the same as `ipvsadm -e … -w 0`. The operator's default
// weight override is kept. A server already drained at 0 needs nothing.
func Drain(rec DestRecord, known bool, t TableEntry) Decision {
	d := NewDecision(KindOperator, t.Weight, rec)
	if known && rec.State == DrainedByOperator && t.Weight == 0 {
		return d // already drained
	}
	kernelWeight := t.Weight
	d.Record = DestRecord{State: DrainedByOperator, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig, Counter: t.Counter}
	d.RecordChanged = true
	d.To, d.Write = 0, kernelWeight != 0
	d.Reason = "drained by operator (lvsctl)"
	return d
}

// Undrain gives a drained (or down) server back its default weight — the
// configured one, or the operator's override — ramped by slow start: the
// first step is written now, and the controller goes on from the default
// weight.
func Undrain(rec DestRecord, kernelWeight, configuredDefault int, av Availability, minWeight int) Decision {
	def := rec.DefaultWeight(configuredDefault)
	to := rampWeight(float64(def), SlowStartFactor(0, av.SlowStart, av.SlowStartFloor), minWeight)
	d := NewDecision(KindOperator, kernelWeight, rec)
	d.To, d.Write = to, true
	d.Record = DestRecord{State: Managed, Written: to, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig}
	d.RecordChanged = true
	d.Reason = fmt.Sprintf("undrained by operator (lvsctl) to default weight %d", def)
	d.OnWrite = Commit{SetCtrl: true, Ctrl: float64(def), StartRamp: to != def}
	return d
}

// availability applies the ownership side of the availability rules to a
// server that is not drained, before any controller runs:
//
//   - probe refused (or failed otherwise than by a timeout), or timed out
//     Fall times in a row: a managed server goes to weight 0 (Down),
//     remembering its weight; before that, and while it stays down, its
//     weight is kept;
//   - probe answered Rise times in a row: a Down server gets its weight back
//     (ramped by slow start, which a successful write starts).
//
// It reports false when neither applies and the controller decides.
func availability(o *Observed, ramp float64, st *ServerState, p Params, d *Decision) bool {
	rec, av := o.Record, p.Availability
	if o.reachable() {
		st.Fails, st.Passes = 0, st.Passes+1
	} else if o.Probed {
		st.Fails, st.Passes = st.Fails+1, 0
	}
	d.Trace.Fails, d.Trace.Passes = st.Fails, st.Passes
	switch {
	case o.Probed && o.ProbeErr != nil && rec.State == Managed && (!o.ProbeTimedOut || st.Fails >= max(av.Fall, 1)):
		down := rec
		down.State, down.Written, down.RestoreWeight, down.Counter = Down, 0, o.Kernel, o.Counter
		d.Write, d.To, d.Record, d.RecordChanged = true, 0, down, true
		d.Reason = fmt.Sprintf("unreachable (%d failed probes in a row): %v", st.Fails, o.ProbeErr)
		return true
	case !o.reachable() && rec.State == Down && o.Kernel != 0:
		// Down, and created anew at a weight of its creator's (Reconcile).
		d.Write, d.To = true, 0
		d.Reason = fmt.Sprintf("unreachable (%v), created anew at weight %d: back to 0", o.ProbeErr, o.Kernel)
		return true
	case !o.reachable():
		return true
	case rec.State == Down && st.Passes >= max(av.Rise, 1):
		full := rec.RestoreWeight
		if full <= 0 {
			full = rec.DefaultWeight(o.Configured)
		}
		to := rampWeight(float64(full), ramp, p.Weight.Min)
		up := rec
		up.State, up.Written, up.RestoreWeight, up.Counter = Managed, to, 0, 0
		st.Ctrl = float64(full)
		d.Write, d.To, d.Record, d.RecordChanged = true, to, up, true
		// Name the weight written: under slow start it is the ramp's first
		// step, not the weight the server returns to.
		d.Reason = fmt.Sprintf("reachable again: weight %d written, slow start up to %d", to, full)
		if to == full {
			d.Reason = fmt.Sprintf("reachable again: weight %d written (its weight before it went down)", full)
		}
		d.OnWrite.StartRamp = true
		return true
	case rec.State == Down:
		return true // answering, not yet Rise times in a row
	}
	return false
}
