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
	AgentOK  bool
	AgentErr error
	// Load is the aggregate load; valid only when ProbeOK and AgentOK.
	Load float64
}

// Action is the decision for one destination in one interval.
type Action struct {
	Write  bool
	To     int
	Record DestRecord // the record after the write succeeds
	Reason string
}

// Decide applies the availability rules and the weight formula to one
// managed, down or drained destination. ctrl is the controller's fractional
// weight, updated in place when the formula runs.
//
//   - drained by the operator: never touched;
//   - probe failed: a managed server goes to weight 0 (Down), remembering
//     its weight;
//   - probe answers again: a Down server gets its weight back;
//   - agent failed while the probe answers: the weight is kept (a dead agent
//     is not a dead server);
//   - otherwise the formula runs and the result is written when it passes
//     the threshold, or when the kernel weight lies outside [Min,
//     Scale·default] (a lowered default weight takes effect at once).
func Decide(rec DestRecord, kernelWeight, configuredDefault int, obs Observation, ctrl *float64, p WeightParams) Action {
	switch {
	case rec.State == DrainedByOperator:
		return Action{Record: rec}
	case !obs.ProbeOK && rec.State == Managed:
		down := rec
		down.State, down.Written, down.RestoreWeight = Down, 0, kernelWeight
		return Action{Write: true, To: 0, Record: down, Reason: fmt.Sprintf("unreachable: %v", obs.ProbeErr)}
	case !obs.ProbeOK:
		return Action{Record: rec}
	case rec.State == Down:
		to := rec.RestoreWeight
		if to <= 0 {
			to = rec.DefaultWeight(configuredDefault)
		}
		up := rec
		up.State, up.Written, up.RestoreWeight = Managed, to, 0
		*ctrl = float64(to)
		return Action{Write: true, To: to, Record: up, Reason: "reachable again: weight restored"}
	case !obs.AgentOK:
		return Action{Record: rec}
	}
	def := rec.DefaultWeight(configuredDefault)
	*ctrl = NextWeight(*ctrl, obs.Load, def, p)
	to := RoundWeight(*ctrl)
	outOfBounds := kernelWeight < p.Min || float64(kernelWeight) > maxWeightFor(def, p)
	if !outOfBounds && !PassesThreshold(kernelWeight, to, p.Threshold) {
		return Action{Record: rec}
	}
	next := rec
	next.Written = to
	return Action{Write: true, To: to, Record: next, Reason: fmt.Sprintf("load %.3f", obs.Load)}
}
