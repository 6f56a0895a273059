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

// Origin says who set the weight a record stands for. It is persisted
// (state.go): its string values are part of the state file format, and a
// record from before it has none ("").
type Origin string

// The origins of a weight.
const (
	// ByMonitor: lvs-monitor wrote it (its controller, slow start, or a
	// failed probe's 0).
	ByMonitor Origin = "lvs-monitor"
	// ByOperator: lvsctl drain or undrain, or another tool's edit taken
	// for an operator's (ipvsadm -e).
	ByOperator Origin = "operator"
	// ByHealthChecker: the service's health checker (health_checker in
	// the configuration: keepalived) zeroed, removed, re-added or
	// re-enabled the destination.
	ByHealthChecker Origin = "health-checker"
	// ByTable: adopted from the table as found — first sight, or created
	// anew by whatever rebuilt the table.
	ByTable Origin = "table"
)

// Valid reports whether o is one of the origins, or "" (a record from
// before origins were kept, or a peer that does not send them).
func (o Origin) Valid() bool {
	switch o {
	case "", ByMonitor, ByOperator, ByHealthChecker, ByTable:
		return true
	}
	return false
}

// DestRecord is what the daemon knows about one destination's weight. It is
// persisted so that a restart neither un-drains an operator's server nor
// leaves a recovered server at 0.
type DestRecord struct {
	State Ownership `json:"state"`
	// SetBy says who set the weight that stands, and with State why: a
	// Down server's 0 is lvs-monitor's (its probe failed) or the health
	// checker's (it took the server out); "" in a record saved before
	// the field existed.
	SetBy Origin `json:"set_by,omitempty"`
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
	// Held: a DrainedByOperator destination drained with lvsctl drain.
	// Only lvsctl undrain ends it: a weight found on it in the table is a
	// rebuilt table's or another tool's, which IPVS cannot tell apart (a
	// destination re-added within the kernel's trash period gets its old
	// counters back), and goes back to 0.
	Held bool `json:"held,omitempty"`
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
	// Returned: the health checker put the destination back in rotation
	// (re-added or re-enabled it): slow start begins, from the ramp's
	// start, towards its default weight — not the checker's weight.
	Returned bool
	// RampGoesOn: the health checker re-enabled a destination lvs-monitor
	// is already ramping up; the ramp is not restarted, and its target
	// stays the default weight.
	RampGoesOn bool
}

// Neighbour is what Reconcile needs to know besides the table and the
// record: the other daemon that writes the service's destinations, and
// where the destination's slow start is.
type Neighbour struct {
	// HealthChecker names the daemon that adds, removes, zeroes and
	// re-enables the service's destinations by its own health checks
	// (keepalived's checker); "" when there is none.
	HealthChecker string
	// Ramping: the destination is in lvs-monitor's slow start.
	Ramping bool
}

// Reconcile compares the table's weight with what the daemon knows and
// applies the ownership rules:
//
//   - a destination never seen before is adopted as managed at its kernel
//     weight, unless that weight is 0: an unexplained 0 is an operator drain
//     (with a health checker: the checker's down);
//   - a destination created anew (a rebuilt table: its counter went back
//     below the one recorded when it left rotation, or the monitor saw it
//     missing) keeps its record: a drain or a down mark stands, and its
//     weight goes back to 0 (the cycle's decision writes it); a managed one
//     is adopted at its new weight without becoming a new default;
//   - a kernel weight that differs from the one the daemon wrote was set by
//     someone else: 0 means drained by the operator, any other value becomes
//     the destination's new default weight (and it is managed again);
//   - a drained or down destination still at 0 stays as it is;
//   - a destination drained with lvsctl drain (Held) stays drained whatever
//     weight the table shows, and its weight goes back to 0: only lvsctl
//     undrain ends such a drain.
//
// With a health checker (n.HealthChecker), the checker's own moves come
// first (checked):
//
//   - a 0 lvs-monitor did not write is the checker's down, not an operator
//     drain: Down, set by the health checker, until the checker puts the
//     destination back;
//   - a down destination (whoever's 0) back at a weight, or created anew,
//     was put back by the checker: managed, slow start from the ramp's
//     start towards its default weight (Returned), no new default;
//   - a managed destination created anew, or set to a weight while in
//     slow start, was re-added or re-enabled by the checker: its weight is
//     the checker's, not a new default, and slow start runs (Returned) or
//     goes on (RampGoesOn);
//   - an operator's drain stands whatever the checker does; only lvsctl
//     undrain ends it.
//
// known is false when the daemon has no record of the destination (new, or
// the state file was missing or corrupt).
func Reconcile(rec DestRecord, known bool, t TableEntry, configuredDefault int, n Neighbour) Reconciliation {
	kernelWeight := t.Weight
	if !known {
		switch {
		case kernelWeight == 0 && n.HealthChecker != "":
			return Reconciliation{
				Record:  DestRecord{State: Down, SetBy: ByHealthChecker, Counter: t.Counter},
				Changed: true,
				Reason:  fmt.Sprintf("weight 0 not set by lvs-monitor, in a service %s health-checks: down by the health checker until it puts the server back", n.HealthChecker),
			}
		case kernelWeight == 0:
			return Reconciliation{
				Record:  DestRecord{State: DrainedByOperator, SetBy: ByOperator, Counter: t.Counter},
				Changed: true,
				Reason:  "weight 0 not set by lvs-monitor: treated as an operator drain",
			}
		}
		return Reconciliation{
			Record:  DestRecord{State: Managed, SetBy: ByTable, Written: kernelWeight},
			Changed: true,
			Reason:  "adopted at its kernel weight",
		}
	}
	if rec.State == Managed && kernelWeight == rec.Written && !t.Missing {
		return Reconciliation{Record: rec}
	}
	if rec.State != Managed && kernelWeight == 0 && !(t.Missing && n.HealthChecker != "" && rec.State == Down) {
		return Reconciliation{Record: rec}
	}
	why := anew(rec, t)
	if n.HealthChecker != "" {
		if res, ok := checked(rec, t, why, n); ok {
			return res
		}
	}
	if rec.State == DrainedByOperator && rec.Held {
		return keptDrain(rec, t, why)
	}
	if why != "" {
		kept := rec
		if rec.State != Managed {
			kept.Counter = t.Counter // from now on, an undrain of this destination is an edit
			return Reconciliation{Record: kept, Changed: true, Anew: true,
				Reason: fmt.Sprintf("created anew at weight %d (%s): still %s, its weight goes back to 0", kernelWeight, why, rec.State)}
		}
		kept.Written, kept.SetBy = kernelWeight, ByTable
		return Reconciliation{Record: kept, Changed: true, Anew: true,
			Reason: fmt.Sprintf("created anew at weight %d (%s): adopted at it, its default weight unchanged, slow start", kernelWeight, why)}
	}
	// Someone else wrote the weight.
	if kernelWeight == 0 {
		return Reconciliation{
			Record:  DestRecord{State: DrainedByOperator, SetBy: ByOperator, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig, Counter: t.Counter},
			Changed: true,
			Reason:  fmt.Sprintf("weight set to 0 by another tool (lvs-monitor wrote %d): drained by operator", rec.Written),
		}
	}
	reason := fmt.Sprintf("weight set to %d by another tool (lvs-monitor wrote %d): new default weight", kernelWeight, rec.Written)
	switch rec.State {
	case DrainedByOperator:
		reason = fmt.Sprintf("undrained by operator at weight %d: a weight edit (another tool, such as ipvsadm -e) ends a drain made with weight 0; new default weight", kernelWeight)
	case Down:
		reason = fmt.Sprintf("weight of a down server set to %d by another tool: new default weight", kernelWeight)
	}
	return Reconciliation{
		Record: DestRecord{
			State:            Managed,
			SetBy:            ByOperator,
			Written:          kernelWeight,
			DefaultOverride:  kernelWeight,
			OverriddenConfig: configuredDefault,
		},
		Changed: true,
		Reason:  reason,
	}
}

// keptDrain is Reconcile's finding for a destination drained with lvsctl
// drain (Held) that the table shows at a weight, or created anew: still
// drained, its weight goes back to 0 (the decision writes it); why is
// anew's finding.
func keptDrain(rec DestRecord, t TableEntry, why string) Reconciliation {
	kept := rec
	kept.Counter = t.Counter
	how := fmt.Sprintf("weight %d found on a server drained with lvsctl drain (a rebuilt table or another tool's edit: IPVS cannot tell them apart)", t.Weight)
	if why != "" {
		how = fmt.Sprintf("created anew at weight %d (%s) while drained with lvsctl drain", t.Weight, why)
	}
	return Reconciliation{Record: kept, Changed: true, Anew: true,
		Reason: how + ": still drained, its weight goes back to 0; lvsctl undrain ends the drain"}
}

// checked applies the health checker's rules (Reconcile) to a destination
// whose weight or presence changed; why is anew's finding. It reports
// false when none applies: the change is an edit, as without a checker.
func checked(rec DestRecord, t TableEntry, why string, n Neighbour) (Reconciliation, bool) {
	hc, w := n.HealthChecker, t.Weight
	how := fmt.Sprintf("set to %d by the health checker (%s)", w, hc)
	if why != "" {
		how = fmt.Sprintf("re-added at %d by the health checker (%s; %s)", w, hc, why)
	}
	switch {
	case rec.State == DrainedByOperator:
		kept := rec
		kept.Counter = t.Counter
		return Reconciliation{Record: kept, Changed: true, Anew: true,
			Reason: how + ": still drained by the operator (lvsctl undrain ends a drain), its weight goes back to 0"}, true
	case w == 0 && rec.State == Managed:
		down := rec
		down.State, down.SetBy, down.Written, down.RestoreWeight, down.Counter = Down, ByHealthChecker, 0, rec.Written, t.Counter
		return Reconciliation{Record: down, Changed: true, Anew: why != "",
			Reason: fmt.Sprintf("%s (lvs-monitor wrote %d): down by the health checker, not an operator drain; left at 0 until it puts the server back", how, rec.Written)}, true
	case w == 0: // down already, created anew at 0: the checker's down now
		down := rec
		down.SetBy, down.Counter = ByHealthChecker, t.Counter
		return Reconciliation{Record: down, Changed: true, Anew: true,
			Reason: how + ": down by the health checker until it puts the server back"}, true
	case rec.State == Down:
		up := rec
		up.State, up.SetBy, up.Written, up.RestoreWeight, up.Counter = Managed, ByHealthChecker, w, 0, 0
		return Reconciliation{Record: up, Changed: true, Anew: true, Returned: true,
			Reason: how + ": back in rotation, slow start from the ramp's start to its default weight"}, true
	case why != "":
		up := rec
		up.SetBy, up.Written = ByHealthChecker, w
		return Reconciliation{Record: up, Changed: true, Anew: true, Returned: true,
			Reason: how + ": slow start from the ramp's start to its default weight, which stays"}, true
	case n.Ramping:
		up := rec
		up.SetBy, up.Written = ByHealthChecker, w
		return Reconciliation{Record: up, Changed: true, Anew: true, RampGoesOn: true,
			Reason: how + " during slow start: taken for its re-enable, not a new default; the ramp goes on"}, true
	}
	return Reconciliation{}, false
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
// slow start at now. healthChecker is the service's (Neighbour). A server
// the health checker put back starts slow start at now towards its default
// weight, not the checker's; one it re-enabled mid-ramp keeps its ramp.
func ReconcileServer(rec DestRecord, known bool, t TableEntry, configuredDefault int, healthChecker string, st *ServerState, now time.Time) Reconciliation {
	res := Reconcile(rec, known, t, configuredDefault, Neighbour{HealthChecker: healthChecker, Ramping: !st.RampStart.IsZero()})
	if !res.Changed {
		if !st.CtrlSet {
			st.Ctrl, st.CtrlSet = float64(t.Weight), true
		}
		return res
	}
	switch {
	case res.RampGoesOn:
		return res
	case res.Returned:
		// The checker's weight is not the target: the default weight is.
		st.Ctrl, st.CtrlSet = float64(res.Record.DefaultWeight(configuredDefault)), true
		st.RampStart = now
		return res
	}
	st.Ctrl, st.CtrlSet = float64(t.Weight), true
	if res.Record.State == Managed && known && (rec.State != Managed || res.Anew) {
		st.RampStart = now // back in rotation, or created anew: slow start
	}
	return res
}

// Drain is an operator's drain (lvsctl drain): weight 0, recorded as
// DrainedByOperator and Held, so that the monitor never touches the server
// and puts back to 0 any weight found on it until lvsctl undrain (Reconcile).
// The operator's default weight override is kept. A server already drained
// with lvsctl at 0 needs nothing; one drained with ipvsadm becomes held.
func Drain(rec DestRecord, known bool, t TableEntry) Decision {
	d := NewDecision(KindOperator, t.Weight, rec)
	if known && rec.State == DrainedByOperator && rec.Held && t.Weight == 0 {
		return d // already drained
	}
	kernelWeight := t.Weight
	d.Record = DestRecord{State: DrainedByOperator, SetBy: ByOperator, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig, Counter: t.Counter, Held: true}
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
	d.Record = DestRecord{State: Managed, SetBy: ByOperator, Written: to, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig}
	d.RecordChanged = true
	d.Reason = fmt.Sprintf("undrained by operator (lvsctl) to default weight %d", def)
	d.OnWrite = Commit{SetCtrl: true, Ctrl: float64(def), StartRamp: to != def}
	return d
}

// markDown is the decision that takes a managed server out of rotation
// as down: weight 0, remembering the weight to restore (restoreWeight);
// one that was in its slow start has relapsed (ServerState.Relapses).
func markDown(o *Observed, st *ServerState, d *Decision, reason string) {
	if st.RampStart.IsZero() {
		st.Relapses = 0
	} else {
		st.Relapses++
	}
	down := o.Record
	down.State, down.SetBy, down.Written, down.RestoreWeight, down.Counter = Down, ByMonitor, 0, restoreWeight(o.Kernel, st), o.Counter
	d.Write, d.To, d.Record, d.RecordChanged = true, 0, down, true
	d.Reason = reason
}

// restoreWeight is the weight a server going down at kernel weight kernel
// gets back when it answers again: the weight it held, unless slow start
// had it on a step of its ramp — then the controller's weight the ramp was
// heading to, from a lower floor (ServerState.slowStart). Remembering
// the step left a server that failed early in its ramp at that step for
// good whenever no controller moved it (no agent).
func restoreWeight(kernel int, st *ServerState) int {
	if st.RampStart.IsZero() || !st.CtrlSet {
		return kernel
	}
	return max(kernel, RoundWeight(st.Ctrl))
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
		markDown(o, st, d, fmt.Sprintf("unreachable (%d failed probes in a row): %v", st.Fails, o.ProbeErr))
		return true
	case !o.reachable() && rec.State == Down && o.Kernel != 0:
		// Down, and created anew at a weight of its creator's (Reconcile).
		d.Write, d.To = true, 0
		d.Reason = fmt.Sprintf("unreachable (%v), created anew at weight %d: back to 0", o.ProbeErr, o.Kernel)
		return true
	case !o.reachable():
		return true
	case rec.State == Down && rec.SetBy == ByHealthChecker:
		return true // the checker took it out; it puts it back (Reconcile)
	case rec.State == Down && st.Passes >= max(av.Rise, 1):
		full := rec.RestoreWeight
		if full <= 0 {
			full = rec.DefaultWeight(o.Configured)
		}
		to := rampWeight(float64(full), ramp, p.Weight.Min)
		up := rec
		up.State, up.SetBy, up.Written, up.RestoreWeight, up.Counter = Managed, ByMonitor, to, 0, 0
		st.Ctrl = float64(full)
		d.Write, d.To, d.Record, d.RecordChanged = true, to, up, true
		// Name the weight written: under slow start it is the ramp's first
		// step, not the weight the server returns to.
		d.Reason = fmt.Sprintf("reachable again: weight %d written, slow start up to %d", to, full)
		if st.Relapses > 0 && to != full {
			_, floor := st.slowStart(p.Availability)
			d.Reason += fmt.Sprintf(" from %.3g of it (down during its slow start, %d in a row)", floor, st.Relapses)
		}
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
