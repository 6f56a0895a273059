package policy

import "testing"

// The capacity controller reuses its working steps from call to call; a
// step handed out without storage of the caller's (Server.Step nil) must
// not be overwritten by the next call, and one with storage goes there.
func TestCapacityStepsOutliveTheNextMeasure(t *testing.T) {
	p := WeightParams{Controller: ControllerCapacity, Anchor: 0.15, Confirm: 5, Min: 1, Smoothing: 0.7, Saturation: 0.9, Band: 0.2}
	c, err := NewController(p, defaultCoefficients)
	if err != nil {
		t.Fatal(err)
	}
	measure := func(cpu float64, own []CapacityStep) []Server {
		servers := make([]Server, 3)
		for k := range servers {
			servers[k] = Server{Obs: &Observed{Record: DestRecord{State: Managed, Written: 10}, Configured: 10, Kernel: 10, NewConns: 500, Probed: true, Polled: true, CPU: cpu},
				State: &ServerState{Ctrl: 10, CtrlSet: true}, Out: &Decision{}}
			if own != nil {
				servers[k].Step = &own[k]
			}
		}
		c.Measure(p, servers, false)
		return servers
	}
	first := measure(0.3, nil)
	own := make([]CapacityStep, 3)
	second := measure(0.6, own)
	third := measure(0.8, nil)
	for k := range 3 {
		if got := first[k].Out.Trace.Capacity.CPU; got != 0.3 {
			t.Errorf("server %d: the first call's step has CPU %g after two more calls, want 0.3", k, got)
		}
		if got := second[k].Out.Trace.Capacity; got != &own[k] || got.CPU != 0.6 {
			t.Errorf("server %d: the second call's step at %p (CPU %g), want the caller's %p with CPU 0.6", k, got, got.CPU, &own[k])
		}
		if got := third[k].Out.Trace.Capacity.CPU; got != 0.8 {
			t.Errorf("server %d: the third call's step has CPU %g, want 0.8", k, got)
		}
	}
}
