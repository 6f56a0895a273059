package policy

import (
	"fmt"
	"math"

	"lvs-feedback/ipvs"
)

// Controller turns a service's observations into weights. Both controllers
// run inside the same decision (Engine.Cycle): the availability rules, the
// fail-static freeze and the backlog guard are theirs alike.
type Controller interface {
	// Name is the controller's configured name (ControllerLVS,
	// ControllerCapacity).
	Name() string
	// Measure runs once per service and cycle, over the servers in
	// rotation, before any decision; it updates their state and records
	// its figures in their traces. A follower (another director writes)
	// measures nothing.
	Measure(p WeightParams, servers []Server, follower bool)
	// Step proposes one server's weight (a write, with its reason and the
	// comparison behind it, in d) or leaves d as it is. It runs only for a
	// managed, reachable server with a load.
	Step(p WeightParams, o *Observed, st *ServerState, ramp float64, d *Decision)
}

// NewController returns the controller p names; the capacity controller
// measures against the resources c enables (Busy).
func NewController(p WeightParams, c Coefficients) (Controller, error) {
	switch p.Controller {
	case ControllerLVS:
		return lvsFormula{}, nil
	case ControllerCapacity:
		return capacityController{coef: c, scratch: new(capacityScratch)}, nil
	}
	return nil, fmt.Errorf("weight.controller must be %q or %q, got %q", ControllerCapacity, ControllerLVS, p.Controller)
}

// sharedWeightKeys are the [weight] keys every controller reads.
func sharedWeightKeys() []Param[WeightParams] {
	return []Param[WeightParams]{
		{Key: "controller", Default: ControllerCapacity, Values: "`\"capacity\"`, `\"lvs\"`", Reload: "next cycle",
			Doc: "How weights are computed. `\"capacity\"` measures each server's capacity — connections " +
				"served per unit of the busy fraction of its bottleneck over the interval, the busiest of " +
				"CPU, disk I/O and memory pressure that `[coefficients]` enable — and keeps servers at " +
				"their configured weights unless one strays (`anchor`, TH2) or every one is lightly loaded " +
				"(`light`, TH1); gain, target and threshold do not apply. `\"lvs\"` is the LVS " +
				"dynamic-feedback formula `w ← w + gain·∛(target − load)`. See " +
				"[design.md](developer/design.md#the-capacity-controller) and [results.md](results/notebook.md).",
			Check: func(p WeightParams) string {
				_, err := NewController(p, Coefficients{})
				return refuse(err != nil, "must be %q or %q, got %q", ControllerCapacity, ControllerLVS, p.Controller)
			},
		},
		{Key: "scale", Default: 10.0, Values: "number ≥ 1", Reload: "next cycle",
			Doc: "Both controllers: `weight × scale` of every server must stay within 65535. `\"lvs\"`: the " +
				"formula's weight cap is `scale × default weight`. In a fleet, under either controller, the leader " +
				"writes and followers accept weights in [`min`, max(`scale × default weight`, `resolution`)].",
			Check: func(p WeightParams) string {
				return refuse(!(p.Scale >= 1) || math.IsInf(p.Scale, 0), "must be at least 1, got %v", p.Scale)
			},
		},
		{Key: "min", Default: 1, Values: "1…65535", Reload: "next cycle",
			Doc: "Both controllers: never below it: an overloaded server keeps a trickle so its load can " +
				"still be measured. Only an unreachable server or an operator gets 0.",
			Check: func(p WeightParams) string {
				return refuse(p.Min < 1 || p.Min > ipvs.MaxWeight, "must be from 1 to %d (only an unreachable server or an operator gets weight 0), got %d", ipvs.MaxWeight, p.Min)
			},
		},
	}
}
