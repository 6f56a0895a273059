package policy

import (
	"math"
	"testing"
)

func TestSmoothCapacity(t *testing.T) {
	tests := []struct {
		prev  float64
		n     int
		obs   float64
		alpha float64
		want  float64
	}{
		{0, 1, 100, 0.5, 100}, // the first observation is taken as it is
		// ((1−0.5)·50 + (0.5−0.25)·100) / (1−0.25) = (25 + 25)/0.75 = 66.667
		{100, 2, 50, 0.5, 200.0 / 3},
		// n = 3: ((0.5)·80 + (0.5−0.125)·66.667) / 0.875 = (40 + 25)/0.875 = 74.286
		{200.0 / 3, 3, 80, 0.5, 65 / 0.875},
		{100, 5, 40, 0, 40}, // α = 0: the last observation only
	}
	for _, tt := range tests {
		if got := SmoothCapacity(tt.prev, tt.n, tt.obs, tt.alpha); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("SmoothCapacity(%v, %d, %v, %v) = %v, want %v", tt.prev, tt.n, tt.obs, tt.alpha, got, tt.want)
		}
	}
}

func TestCapacityWeight(t *testing.T) {
	tests := []struct {
		est, maxEst     float64
		resolution, min int
		want            int
	}{
		{400, 400, 20, 1, 20},
		{200, 400, 20, 1, 10},
		{100, 400, 20, 1, 5},
		{1, 400, 20, 1, 1}, // 0.05 → never below min
		{0, 400, 20, 1, 1},
		{100, 0, 20, 1, 1},
	}
	for _, tt := range tests {
		if got := CapacityWeight(tt.est, tt.maxEst, tt.resolution, tt.min); got != tt.want {
			t.Errorf("CapacityWeight(%v, %v, %d) = %d, want %d", tt.est, tt.maxEst, tt.resolution, got, tt.want)
		}
	}
	for _, tt := range []struct {
		cur, next int
		band      float64
		want      bool
	}{{10, 12, 0.2, false}, {10, 13, 0.2, true}, {10, 7, 0.2, true}, {20, 20, 0, false}} {
		if got := PassesBand(tt.cur, tt.next, tt.band); got != tt.want {
			t.Errorf("PassesBand(%d, %d, %v) = %v", tt.cur, tt.next, tt.band, got)
		}
	}
}

func TestSaturatedAlone(t *testing.T) {
	for _, tt := range []struct {
		cpu, median, sat float64
		want             bool
	}{
		{0.95, 0.4, 0.9, true},   // one server saturated, the service is not: lost capacity
		{0.95, 0.92, 0.9, false}, // everyone busy: a burst
		{0.85, 0.4, 0.9, false},
		{1, 0, 0, false}, // off
	} {
		if got := SaturatedAlone(tt.cpu, tt.median, tt.sat); got != tt.want {
			t.Errorf("SaturatedAlone(%v, %v, %v) = %v", tt.cpu, tt.median, tt.sat, got)
		}
	}
}

func TestServedConnections(t *testing.T) {
	for _, tt := range []struct {
		newConns int64
		delta    int
		want     float64
	}{
		{100, 0, 100},
		{100, 20, 80},   // 20 more still active: 80 served
		{100, -30, 130}, // 30 older ones finished too
		{10, 50, 0},     // never negative
	} {
		if got := ServedConnections(tt.newConns, tt.delta); got != tt.want {
			t.Errorf("ServedConnections(%d, %d) = %v, want %v", tt.newConns, tt.delta, got, tt.want)
		}
	}
}

func TestUpdateCapacity(t *testing.T) {
	p := WeightParams{Smoothing: 0.5, Saturation: 0.9}
	off := WeightParams{Smoothing: 0.5}
	for _, tt := range []struct {
		name             string
		est              float64
		n                int
		obs, cpu, median float64
		p                WeightParams
		want             float64
	}{
		{"first observation as it is", 0, 1, 100, 0.5, 0.5, p, 100},
		// (0.5·100 + (0.5 − 0.25)·200) / (1 − 0.25) = 100/0.75
		{"smoothed", 200, 2, 100, 0.5, 0.5, p, 133.33333333333334},
		{"saturated: no rise", 200, 2, 300, 0.95, 0.5, p, 200},
		{"saturated alone: the fall at once", 200, 2, 50, 0.95, 0.5, p, 50},
		// everyone saturated (a burst): (0.5·50 + 0.25·200)/0.75 = 75/0.75
		{"saturated with the median: fall smoothed", 200, 2, 50, 0.95, 0.95, p, 100},
		// (0.5·300 + 0.25·200)/0.75 = 200/0.75
		{"saturation off: rise smoothed", 200, 2, 300, 1, 0.5, off, 266.6666666666667},
	} {
		if got := UpdateCapacity(tt.est, tt.n, tt.obs, tt.cpu, tt.median, tt.p); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: UpdateCapacity = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestAnchorFactors(t *testing.T) {
	nan := math.NaN()
	k := func(v float64) CapacityPeer { return CapacityPeer{Known: true, PerWeight: v} }
	idle := func(v float64, spare bool) CapacityPeer {
		return CapacityPeer{Known: true, PerWeight: v, Idle: true, Spare: spare}
	}
	for _, tt := range []struct {
		name  string
		peers []CapacityPeer
		want  []float64
	}{
		{"one below the median", []CapacityPeer{k(2), k(2), k(1)}, []float64{1, 1, 0.5}},
		// median of 2 and 1 is 1.5
		{"unknown skipped", []CapacityPeer{k(2), {}, k(1)}, []float64{4.0 / 3, nan, 2.0 / 3}},
		// a saturated server that served nothing: 0 is a value
		{"zero is known", []CapacityPeer{k(2), k(0), k(2)}, []float64{1, 0, 1}},
		// the demo's hog: idle peers' lower bounds 20, the hogged server 1
		{"busy server among idle ones", []CapacityPeer{idle(20, true), k(1), idle(20, true)}, []float64{1, 0.05, 1}},
		// a lower-bound median proves nothing above it: 3/1 is cut to 1;
		// lightly loaded but not clearly idle: no decision
		{"above a lower-bound median", []CapacityPeer{k(3), idle(1, false), idle(1, false)}, []float64{1, nan, nan}},
		{"none known", []CapacityPeer{{}, {}}, []float64{nan, nan}},
		// an idle server with no bound yet has capacity to spare: the
		// others' factors above 1 are cut (2/1.5)
		{"idle without a bound", []CapacityPeer{{Idle: true, Spare: true}, k(2), k(1)}, []float64{1, 1, 2.0 / 3}},
	} {
		got := AnchorFactors(tt.peers)
		for i := range tt.want {
			if math.IsNaN(tt.want[i]) != math.IsNaN(got[i]) || (!math.IsNaN(got[i]) && math.Abs(got[i]-tt.want[i]) > 1e-12) {
				t.Errorf("%s: AnchorFactors = %v, want %v", tt.name, got, tt.want)
				break
			}
		}
	}
}

func TestAnchoredWeight(t *testing.T) {
	p := WeightParams{Anchor: 0.15, Confirm: 1, Min: 1}
	p3 := p
	p3.Confirm = 3
	at := AnchorState{}
	off := AnchorState{Deviating: true}
	for _, tt := range []struct {
		name   string
		def    int
		f      float64
		satAl  bool
		st     AnchorState
		p      WeightParams
		want   int
		wantSt AnchorState
	}{
		{"within 15 %: the default", 10, 1.10, false, at, p, 10, at},
		{"20 % below: 10·0.8", 10, 0.80, false, at, p, 8, off},
		{"11.6 → 12", 10, 1.16, false, at, p, 12, off},
		{"off, 10 % away, not below 7.5 %: stays off", 10, 0.90, false, off, p, 9, off},
		{"off, 5 % < 7.5 %: back to the default", 10, 0.95, false, off, p, 10, at},
		{"0.4 → never below min 1", 10, 0.04, false, at, p, 1, off},
		{"above the median", 40, 1.50, false, at, p, 60, off},
		{"the kernel's largest weight", 50000, 2, false, at, p, 65535, off},
		// confirm 3: two intervals beyond the anchor are counted, the
		// third moves; back within it, the count restarts
		{"confirm 3, first beyond", 10, 0.5, false, at, p3, 10, AnchorState{Beyond: 1}},
		{"confirm 3, second beyond", 10, 0.5, false, AnchorState{Beyond: 1}, p3, 10, AnchorState{Beyond: 2}},
		{"confirm 3, third beyond: moves", 10, 0.5, false, AnchorState{Beyond: 2}, p3, 5, off},
		{"confirm 3, back within: count restarts", 10, 0.9, false, AnchorState{Beyond: 2}, p3, 10, at},
		{"confirm 3, saturated alone below the median: at once", 10, 0.5, true, at, p3, 5, off},
		{"confirm 3, saturated alone above the median: waits", 10, 1.5, true, at, p3, 10, AnchorState{Beyond: 1}},
	} {
		got, st := AnchoredWeight(tt.def, tt.f, tt.satAl, tt.st, tt.p)
		if got != tt.want || st != tt.wantSt {
			t.Errorf("%s: AnchoredWeight(%d, %v, %v, %+v) = %d, %+v; want %d, %+v", tt.name, tt.def, tt.f, tt.satAl, tt.st, got, st, tt.want, tt.wantSt)
		}
	}
}

// TestDecideCapacityRampWithoutDecision: a server ramping back after a
// failure goes on ramping towards its restore weight in a cycle where the
// capacity controller makes no decision for it (lightly loaded, 10–20 %
// CPU); with no ramp, no decision keeps the weight.
func TestDecideCapacityRampWithoutDecision(t *testing.T) {
	p := WeightParams{Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1,
		Controller: ControllerCapacity, Smoothing: 0.7, Band: 0.2, Resolution: 20, Saturation: 0.9, Anchor: 0.15, Confirm: 3}
	rec := DestRecord{State: Managed, Written: 1}
	obs := Observation{ProbeOK: true, LoadOK: true, Load: 0.2}
	for _, tt := range []struct {
		name      string
		ramp      float64
		wantWrite bool
		wantTo    int
	}{
		{"half-way through the ramp: 10·0.5", 0.5, true, 5},
		{"no ramp: kept", 1, false, 0},
	} {
		st := &ServerState{Ctrl: 10, CtrlSet: true} // the restore weight, set when the server came back
		a := decideOne(t, p, rec, 1, obs, st, tt.ramp)
		if a.Write != tt.wantWrite || (a.Write && a.To != tt.wantTo) {
			t.Errorf("%s: write %v to %d (%s), want write %v to %d", tt.name, a.Write, a.To, a.Reason, tt.wantWrite, tt.wantTo)
		}
	}
}
