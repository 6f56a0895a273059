package monitor

import "fmt"

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
}

// Reconcile compares the kernel's weight with what the daemon knows and
// applies the ownership rules:
//
//   - a destination never seen before is adopted as managed at its kernel
//     weight, unless that weight is 0: an unexplained 0 is an operator drain;
//   - a kernel weight that differs from the one the daemon wrote was set by
//     someone else: 0 means drained by the operator, any other value becomes
//     the destination's new default weight (and it is managed again);
//   - a drained or down destination still at 0 stays as it is.
//
// known is false when the daemon has no record of the destination (new, or
// the state file was missing or corrupt).
func Reconcile(rec DestRecord, known bool, kernelWeight, configuredDefault int) Reconciliation {
	if !known {
		if kernelWeight == 0 {
			return Reconciliation{
				Record:  DestRecord{State: DrainedByOperator},
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
	// Someone else wrote the weight.
	if kernelWeight == 0 {
		return Reconciliation{
			Record:  DestRecord{State: DrainedByOperator, DefaultOverride: rec.DefaultOverride, OverriddenConfig: rec.OverriddenConfig},
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

// Observation is what the gather stage learnt about a destination.
type Observation struct {
	ProbeOK  bool
	ProbeErr error
	AgentErr error
	// LoadOK says Load holds an aggregate load: from the agent's report, or
	// from the director's own inputs when the agent is stale.
	LoadOK bool
	Load   float64
}

// Action is the decision for one destination in one interval.
type Action struct {
	Write  bool
	To     int
	Record DestRecord // the record after the write succeeds
	Reason string
}

// DecideInput is everything Decide needs to know about one destination.
type DecideInput struct {
	Record            DestRecord
	KernelWeight      int
	ConfiguredDefault int
	Obs               Observation
	// Ramp is the slow-start factor (SlowStartFactor): the share of its
	// weight the server may have now. 1 means no ramp.
	Ramp float64
	// Capacity is the capacity controller's weight for the server
	// (AnchoredWeight or CapacityWeight); 0 when it has no estimate yet.
	// Unused by "lvs".
	Capacity int
	// CapacityFactor is, anchored, the server's capacity per unit of
	// default weight ÷ the service's median (for the log line).
	CapacityFactor float64
}

// Decide applies the availability rules and the weight formula to one
// destination. ctrl is the controller's fractional weight, updated in place
// when the formula runs.
//
//   - drained by the operator: never touched;
//   - probe failed: a managed server goes to weight 0 (Down), remembering
//     its weight;
//   - probe answers again: a Down server gets its weight back (ramped);
//   - no load (agent failed, not yet stale): the weight is kept — a dead
//     agent is not a dead server;
//   - otherwise the formula runs and the result is written when it passes
//     the threshold, or when the kernel weight lies outside [Min,
//     Scale·default] (a lowered default weight takes effect at once), or
//     at every step of a slow-start ramp.
func Decide(in DecideInput, ctrl *float64, p WeightParams) Action {
	rec, obs := in.Record, in.Obs
	ramp := in.Ramp
	if !(ramp > 0 && ramp <= 1) {
		ramp = 1
	}
	switch {
	case rec.State == DrainedByOperator:
		return Action{Record: rec}
	case !obs.ProbeOK && rec.State == Managed:
		down := rec
		down.State, down.Written, down.RestoreWeight = Down, 0, in.KernelWeight
		return Action{Write: true, To: 0, Record: down, Reason: fmt.Sprintf("unreachable: %v", obs.ProbeErr)}
	case !obs.ProbeOK:
		return Action{Record: rec}
	case rec.State == Down:
		full := rec.RestoreWeight
		if full <= 0 {
			full = rec.DefaultWeight(in.ConfiguredDefault)
		}
		to := rampWeight(float64(full), ramp, p.Min)
		up := rec
		up.State, up.Written, up.RestoreWeight = Managed, to, 0
		*ctrl = float64(full)
		return Action{Write: true, To: to, Record: up, Reason: "reachable again: weight restored"}
	case !obs.LoadOK:
		return Action{Record: rec}
	}
	if p.Controller == "capacity" {
		return decideCapacity(rec, in, ctrl, p, ramp)
	}
	def := rec.DefaultWeight(in.ConfiguredDefault)
	*ctrl = NextWeight(*ctrl, obs.Load, def, p)
	to := rampWeight(*ctrl, ramp, p.Min)
	outOfBounds := in.KernelWeight < p.Min || float64(in.KernelWeight) > maxWeightFor(def, p)
	ramping := ramp < 1 && to != in.KernelWeight
	if !outOfBounds && !ramping && !PassesThreshold(in.KernelWeight, to, p.Threshold) {
		return Action{Record: rec}
	}
	return writeAction(rec, to, fmt.Sprintf("load %.3f", obs.Load), ramp)
}

// decideCapacity is the capacity controller's last step: the server's
// capacity weight (in.Capacity, from AnchoredWeight or CapacityWeight),
// written when it moves by more than the band, when it returns to the
// default weight (anchored), at every step of a slow-start ramp, or when
// the kernel weight is below the minimum. Without a capacity decision this
// cycle the weight is kept — but a slow-start ramp goes on towards the last
// weight.
func decideCapacity(rec DestRecord, in DecideInput, ctrl *float64, p WeightParams, ramp float64) Action {
	switch {
	case in.Capacity > 0:
		*ctrl = float64(in.Capacity)
	case ramp < 1 && *ctrl > 0:
		// No decision this cycle, but a slow start goes on towards the
		// last weight (the restore weight of a server back from down).
	default:
		return Action{Record: rec}
	}
	to := rampWeight(*ctrl, ramp, p.Min)
	ramping := ramp < 1 && to != in.KernelWeight
	if p.Anchor > 0 {
		// Anchored: back to the default weight is always written (the
		// hysteresis of AnchoredWeight keeps it from flapping).
		def := rec.DefaultWeight(in.ConfiguredDefault)
		back := int(*ctrl) == def && to != in.KernelWeight
		if in.KernelWeight >= p.Min && !ramping && !back && !PassesBand(in.KernelWeight, to, p.Band) {
			return Action{Record: rec}
		}
		reason := fmt.Sprintf("capacity %.2f× its default weight's share", in.CapacityFactor)
		switch {
		case in.Capacity <= 0:
			reason = fmt.Sprintf("towards weight %d (no capacity decision this cycle)", int(*ctrl))
		case in.Capacity == def:
			reason = fmt.Sprintf("capacity %.2f× its default weight's share, within %.0f%%: default weight", in.CapacityFactor, p.Anchor*100)
		}
		return writeAction(rec, to, reason, ramp)
	}
	if in.KernelWeight >= p.Min && !ramping && !PassesBand(in.KernelWeight, to, p.Band) {
		return Action{Record: rec}
	}
	reason := fmt.Sprintf("capacity share %d of %d", in.Capacity, p.Resolution)
	if in.Capacity <= 0 {
		reason = fmt.Sprintf("towards weight %d (no capacity decision this cycle)", int(*ctrl))
	}
	return writeAction(rec, to, reason, ramp)
}

func writeAction(rec DestRecord, to int, reason string, ramp float64) Action {
	next := rec
	next.Written = to
	if ramp < 1 {
		reason += fmt.Sprintf(", slow start %.0f%%", ramp*100)
	}
	return Action{Write: true, To: to, Record: next, Reason: reason}
}

// rampWeight is the integer weight written for controller weight w at
// slow-start factor ramp, never below min.
func rampWeight(w, ramp float64, min int) int {
	return max(min, RoundWeight(w*ramp))
}
