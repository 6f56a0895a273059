package policy

import "time"

// Params are the operator's settings that shape decisions: the policy half
// of lvs-monitor's configuration.
type Params struct {
	Coefficients Coefficients
	Weight       WeightParams
	Availability Availability
	Guard        GuardParams
}

// Coefficients are the R1..R6 of the aggregate load; they sum to 1.
type Coefficients struct {
	Input    float64 `toml:"input"`
	CPU      float64 `toml:"cpu"`
	Memory   float64 `toml:"memory"`
	Disk     float64 `toml:"disk"`
	Response float64 `toml:"response"`
	Process  float64 `toml:"process"`
}

// Sum returns R1+…+R6.
func (c Coefficients) Sum() float64 {
	return c.Input + c.CPU + c.Memory + c.Disk + c.Response + c.Process
}

// Controller names, the values of WeightParams.Controller.
const (
	ControllerLVS      = "lvs"
	ControllerCapacity = "capacity"
)

// WeightParams are the parameters of the weight controllers.
type WeightParams struct {
	// The LVS formula w ← w + Gain·∛(Target − load), bounded to
	// [Min, Scale·default].
	Gain   float64 `toml:"gain"`
	Target float64 `toml:"target"`
	Scale  float64 `toml:"scale"`
	Min    int     `toml:"min"`
	// Threshold: the formula's weight is written only when
	// |new − current| > Threshold.
	Threshold int `toml:"threshold"`

	// Controller chooses how weights are computed: ControllerCapacity (the
	// default; docs/developer/design.md) or ControllerLVS (the formula above).
	Controller string `toml:"controller"`
	// Capacity controller: the geometric decay α of the smoothing
	// (0 = the last interval only), the relative dead-band a weight must
	// move by to be written, and, with Anchor 0, the weight of the most
	// capable server.
	Smoothing  float64 `toml:"smoothing"`
	Band       float64 `toml:"band"`
	Resolution int     `toml:"resolution"`
	// Saturation: a server at least this busy is saturated: its estimate
	// may fall but not rise (UpdateCapacity), and when its service's median
	// is below this, it has lost capacity and its lower estimate is taken
	// at once (SaturatedAlone). 0 disables both.
	Saturation float64 `toml:"saturation"`
	// Anchor is seed 000's TH2 ("close"): the capacity controller keeps a
	// server at its configured weight until its capacity per unit of
	// configured weight differs from its service's median by more than
	// this share; 0 = weights always in proportion to the estimates
	// (Resolution).
	Anchor float64 `toml:"anchor"`
	// Light is seed 000's TH1: a server whose bottleneck is less busy
	// than this is lightly loaded — not measured, capacity to spare — and
	// while every server of a service is, nothing is decided
	// (DefaultLight; Light). Anchor is TH2 (Close).
	Light float64 `toml:"light"`
	// Confirm: the intervals in a row a server must be beyond the anchor
	// before it leaves its configured weight (a saturated-alone fall skips
	// the wait).
	Confirm int `toml:"confirm"`
}

// Availability holds the rules that keep the monitor from making an
// incident worse (docs/developer/design.md, "When things fail").
type Availability struct {
	// FreezeShare: when more than this share of a service's servers (those
	// not drained by the operator) fail their probe in the same cycle, the
	// director is probably the one cut off: the service's weights are
	// frozen instead of zeroed. 1 disables the freeze.
	FreezeShare float64 `toml:"freeze_share"`
	// AgentExpiry: an agent silent for longer than this while its server
	// answers is stale; the server's load is then computed from the
	// director's own inputs (INPUT and RESPONSE, renormalised). Until then
	// the weight is kept.
	AgentExpiry time.Duration `toml:"agent_expiry"`
	// SlowStart: a server back from down, or undrained, ramps from
	// SlowStartFloor of its weight to all of it over this window. 0 disables.
	SlowStart      time.Duration `toml:"slow_start"`
	SlowStartFloor float64       `toml:"slow_start_floor"`
	// Fall: a managed server whose probes time out is marked down
	// (weight 0) after this many in a row — a refused connection marks it
	// down at once; Rise: a down server gets its weight back after this
	// many answered probes in a row. A cycle in which its service is
	// frozen counts neither way.
	Fall int `toml:"fall"`
	Rise int `toml:"rise"`
}

// GuardParams is the backlog guard's configuration ([backlog_guard]).
type GuardParams struct {
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
	// Predict: a server is cut on its predicted backlog at the next check
	// (PredictBacklog), before the backlog forms; false: on the backlog it
	// holds, at two checks in a row.
	Predict bool `toml:"predict"`
}

// Enabled reports whether the guard runs.
func (g GuardParams) Enabled() bool { return g.Check > 0 }
