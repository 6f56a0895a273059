package policy

import "fmt"

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
		return capacityController{coef: c}, nil
	}
	return nil, fmt.Errorf("weight.controller must be %q or %q, got %q", ControllerCapacity, ControllerLVS, p.Controller)
}
