package policy

import (
	"math"
	"testing"
)

func TestLight(t *testing.T) {
	for _, tt := range []struct {
		name   string
		busies []float64
		light  float64
		want   bool
	}{
		{"every server below 20 %", []float64{0.05, 0.19, 0.12}, 0.2, true},
		{"one at 20 %: not below", []float64{0.05, 0.2, 0.12}, 0.2, false},
		{"one hogged", []float64{0.03, 0.95, 0.03}, 0.2, false},
		{"light 0.3: 0.25 and 0.29 are light", []float64{0.25, 0.29}, 0.3, true},
		{"light 0.1: 0.15 is not", []float64{0.05, 0.15}, 0.1, false},
		{"no figures: nothing known", nil, 0.2, false},
	} {
		if got := Light(tt.busies, tt.light); got != tt.want {
			t.Errorf("%s: Light(%v, %v) = %v, want %v", tt.name, tt.busies, tt.light, got, tt.want)
		}
	}
}

func TestClose(t *testing.T) {
	for _, tt := range []struct {
		f, width float64
		want     bool
	}{
		{1, 0.15, true},
		{1.10, 0.15, true},  // 10 % above the median
		{0.86, 0.15, true},  // 14 % below
		{0.84, 0.15, false}, // 16 % below
		{1.16, 0.15, false},
		{0.70, 0.34, true}, // a noisy estimate: 2 standard errors of 0.17
		{0.60, 0.34, false},
		{math.NaN(), 0.15, false},
	} {
		if got := Close(tt.f, tt.width); got != tt.want {
			t.Errorf("Close(%v, %v) = %v, want %v", tt.f, tt.width, got, tt.want)
		}
	}
}

// thresholdServer is a server of default weight 10 at kernel weight kernel
// whose capacity estimate est rests on 100 observations (noise unknown:
// the thresholds are the configured ones), this interval busy cpu with
// served connections.
func thresholdServer(kernel int, est float64, deviating bool, cpu float64, served int64) Server {
	return Server{
		Obs: &Observed{Record: DestRecord{State: Managed, Written: kernel}, Configured: 10, Kernel: kernel,
			NewConns: served, Probed: true, Polled: true, CPU: cpu},
		State: &ServerState{Ctrl: float64(kernel), CtrlSet: true,
			Capacity: CapacityState{Est: est, NObs: 100, AnchorSet: true, Anchor: AnchorState{Deviating: deviating}}},
		Out: &Decision{},
	}
}

var thresholdParams = WeightParams{Controller: ControllerCapacity, Anchor: 0.15, Light: 0.2, Confirm: 1, Min: 1,
	Smoothing: 0.7, Saturation: 0.9, Band: 0.2}

// TestTH1Light: three servers of default weight 10 with estimates of 1000
// connections per unit of busy. All at 15 % CPU (30 served: lightly
// loaded, none clearly idle), TH1 holds: no server gets a decision, and
// explain names the rule. One of them hogged (CPU 95 %, the same 30
// served) releases it: not every server is light. The hogged one is
// saturated alone (the median busy is 0.15), so its observation 30 ÷ 0.95
// = 31.58 is taken at once (30 served ≥ 20); per unit of weight 3.158
// against its idle peers' lower bounds 30 ÷ 0.2 = 150, 15 per unit of
// weight, the median 15: factor 0.2105, and it moves at once to
// round(10 × 0.2105) = 2.
func TestTH1Light(t *testing.T) {
	p := thresholdParams
	cluster := func(cpu2 float64) []Server {
		return []Server{thresholdServer(10, 1000, false, 0.15, 30), thresholdServer(10, 1000, false, 0.15, 30),
			thresholdServer(10, 1000, false, cpu2, 30)}
	}

	servers := cluster(0.15)
	capacityController{coef: DefaultCoefficients()}.Measure(p, servers, false)
	for i, sv := range servers {
		c := sv.Out.Trace.Capacity
		if c.Weight != 0 || c.Rule != RuleLight {
			t.Errorf("all light, server %d: weight %d, rule %q; want no decision (0), %q", i, c.Weight, c.Rule, RuleLight)
		}
		capacityController{}.Step(p, sv.Obs, sv.State, 1, sv.Out)
		if sv.Out.Write || sv.Out.Trace.Compare != nil {
			t.Errorf("all light, server %d: a comparison or a write: %+v", i, sv.Out)
		}
	}
	want := "capacity controller: TH1 light: every server below 20% busy (weight.light; here CPU 15% busy): every server has capacity to spare, nothing is decided: weight kept"
	if got := servers[2].Out.Verdict(Params{Weight: p}, servers[2].Obs); got != want {
		t.Errorf("verdict %q\nwant    %q", got, want)
	}

	servers = cluster(0.95)
	capacityController{coef: DefaultCoefficients()}.Measure(p, servers, false)
	c := servers[2].Out.Trace.Capacity
	if !near(c.Estimate, 30/0.95) || !near(c.Factor, 30/0.95/10/15) || c.Weight != 2 || c.Rule != "" || !c.SaturatedAlone {
		t.Errorf("hogged: estimate %v factor %v weight %d rule %q saturated alone %v; want %v, %v, 2, \"\", true",
			c.Estimate, c.Factor, c.Weight, c.Rule, c.SaturatedAlone, 30/0.95, 30/0.95/10/15)
	}
	for i := range 2 {
		if c := servers[i].Out.Trace.Capacity; c.Rule != "" || c.Weight != 0 {
			t.Errorf("idle peer %d beside a hogged server: rule %q weight %d, want \"\", 0 (idle: no decision of its own)", i, c.Rule, c.Weight)
		}
	}
}

// TestTH1LightSpareReturns: while TH1 holds, a server that was moved off
// its default weight (cut to 2 by a hog now over) and is clearly idle (CPU
// 5 %, under half of 20 %) still goes back to its default weight: the
// operator's weight is the prior, not a decision from noise.
func TestTH1LightSpareReturns(t *testing.T) {
	p := thresholdParams
	servers := []Server{thresholdServer(10, 1000, false, 0.15, 30), thresholdServer(10, 1000, false, 0.15, 30),
		thresholdServer(2, 31.6, true, 0.05, 10)}
	capacityController{coef: DefaultCoefficients()}.Measure(p, servers, false)
	sv := servers[2]
	if c := sv.Out.Trace.Capacity; c.Weight != 10 || c.Rule != RuleLight || sv.State.Capacity.Anchor.Deviating {
		t.Fatalf("spare: weight %d rule %q anchor %+v; want 10, %q, back at the default", c.Weight, c.Rule, sv.State.Capacity.Anchor, RuleLight)
	}
	capacityController{}.Step(p, sv.Obs, sv.State, 1, sv.Out)
	want := "TH1 light: CPU 5% busy, under half of 20%: capacity to spare, default weight"
	if !sv.Out.Write || sv.Out.To != 10 || sv.Out.Reason != want {
		t.Errorf("write %v weight %d reason %q; want a write of 10, %q", sv.Out.Write, sv.Out.To, sv.Out.Reason, want)
	}
}

// TestTH2Close: four servers of default weight 10 at CPU 50 %, three
// serving 500 (1000 per unit of busy, 100 per unit of weight: the median
// 100). The fourth serving 440 (880, factor 0.88) is within 15 % of the
// median: TH2 holds it at its default weight, and explain says so. Serving
// 350 (700, factor 0.70) it is beyond: with confirm 1 it moves to
// round(10 × 0.7) = 7, a change of 3 > 20 % of 10, written.
func TestTH2Close(t *testing.T) {
	p := thresholdParams
	cluster := func(served int64) []Server {
		est := float64(served) / 0.5
		return []Server{thresholdServer(10, 1000, false, 0.5, 500), thresholdServer(10, 1000, false, 0.5, 500),
			thresholdServer(10, 1000, false, 0.5, 500), thresholdServer(10, est, false, 0.5, served)}
	}

	servers := cluster(440)
	capacityController{coef: DefaultCoefficients()}.Measure(p, servers, false)
	sv := servers[3]
	if c := sv.Out.Trace.Capacity; !near(c.Factor, 0.88) || c.Weight != 10 || c.Rule != RuleClose || c.Within != 0.15 {
		t.Fatalf("close: factor %v weight %d rule %q within %v; want 0.88, 10, %q, 0.15", c.Factor, c.Weight, c.Rule, c.Within, RuleClose)
	}
	capacityController{}.Step(p, sv.Obs, sv.State, 1, sv.Out)
	want := "not written: capacity per unit of default weight 0.88× the service's median (TH2 close: within ±15%: the default weight 10); the kernel has 10 already"
	if got := sv.Out.Verdict(Params{Weight: p}, sv.Obs); sv.Out.Write || got != want {
		t.Errorf("write %v, verdict %q\nwant %q", sv.Out.Write, got, want)
	}

	servers = cluster(350)
	capacityController{coef: DefaultCoefficients()}.Measure(p, servers, false)
	sv = servers[3]
	if c := sv.Out.Trace.Capacity; !near(c.Factor, 0.7) || c.Weight != 7 || c.Rule != "" || !sv.State.Capacity.Anchor.Deviating {
		t.Fatalf("beyond: factor %v weight %d rule %q anchor %+v; want 0.7, 7, \"\", deviating", c.Factor, c.Weight, c.Rule, sv.State.Capacity.Anchor)
	}
	capacityController{}.Step(p, sv.Obs, sv.State, 1, sv.Out)
	if want := "capacity 0.70× its default weight's share"; !sv.Out.Write || sv.Out.To != 7 || sv.Out.Reason != want {
		t.Errorf("write %v weight %d reason %q; want a write of 7, %q", sv.Out.Write, sv.Out.To, sv.Out.Reason, want)
	}
	for i := range 3 {
		if c := servers[i].Out.Trace.Capacity; c.Weight != 10 || c.Rule != RuleClose {
			t.Errorf("peer %d: weight %d rule %q, want 10, %q", i, c.Weight, c.Rule, RuleClose)
		}
	}
}
