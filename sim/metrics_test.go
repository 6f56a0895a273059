package sim

import (
	"math"
	"testing"
	"time"
)

// TestSettling checks reach and settle on hand-built weight histories: two
// servers whose ideal weights are equal, an event at 100 s, the next at
// 200 s, 10 % tolerance, visits shorter than ReachDwell (5 s) not counted
// as reaching.
func TestSettling(t *testing.T) {
	inf := math.Inf(1)
	off, on := 30, 10 // server 1's weight: 10/40 and 30/40 are off; 10/20 is on
	at := func(t float64, w int) weightChange { return weightChange{t: t, k: 1, w: w, policy: true} }
	for _, tt := range []struct {
		name          string
		start         int
		h             []weightChange
		reach, settle float64
	}{
		{"within from the event on", on, nil, 0, 0},
		{"a change before the event counts as the start", off, []weightChange{at(50, on)}, 0, 0},
		{"within at 110 for good", off, []weightChange{at(110, on)}, 10, 10},
		{"a 2 s visit, a 10 s one, then for good", off,
			[]weightChange{at(110, on), at(112, off), at(120, on), at(130, off), at(150, on)}, 20, 50},
		{"reached, then left for good", off, []weightChange{at(110, on), at(130, off)}, 10, inf},
		{"never within", off, []weightChange{at(110, 20)}, inf, inf},
		{"within 3 s before the next event: reached, settled", off, []weightChange{at(197, on)}, 97, 97},
		{"changes after the next event are not judged", off, []weightChange{at(250, on)}, inf, inf},
		{"left at the event itself", on, []weightChange{at(100, off), at(140, on)}, 40, 40},
	} {
		wr := &weightReplay{w: []int{10, tt.start}, h: tt.h}
		reach, settle := settling(wr, 100, 200, []int{1, 1}, 0.10)
		if reach != tt.reach || settle != tt.settle {
			t.Errorf("%s: reach, settle = %v, %v; want %v, %v", tt.name, reach, settle, tt.reach, tt.settle)
		}
	}
}

// TestDriftLosses: the capacity a slowing drift had taken at the first
// policy write that lowered its server's weight. b drifts from 1 to 0.5
// over 100 s from 100 s: a raise at 140 s and an operator's cut at 160 s
// do not count, the policy's cut to 8 at 170 s does — the factor is then
// 1 − 0.5·70/100 = 0.65, 35 % lost. b's drift back up is not a slowing
// drift; a's drift from 400 s is never followed: +Inf.
func TestDriftLosses(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	sc := &Scenario{
		Servers: []ServerSpec{{Name: "a", Weight: 10}, {Name: "b", Weight: 10}},
		Events: []EventSpec{
			{At: sec(100), Kind: EvDrift, Factor: 0.5, Over: sec(100), server: 1},
			{At: sec(300), Kind: EvDrift, Factor: 1, Over: sec(50), server: 1},
			{At: sec(400), Kind: EvDrift, Factor: 0.6, Over: sec(100), server: 0},
		},
	}
	r := &run{sc: sc, driftFrom: []float64{1, 0.5, 1}, history: []weightChange{
		{t: 50, k: 1, w: 12, policy: true},
		{t: 130, k: 0, w: 5, policy: true},
		{t: 140, k: 1, w: 13, policy: true},
		{t: 160, k: 1, w: 9, policy: false},
		{t: 170, k: 1, w: 8, policy: true},
		{t: 450, k: 0, w: 7, policy: true}, // a raise from 5
	}}
	got := r.driftLosses()
	if len(got) != 2 || math.Abs(got[0]-0.35) > 1e-9 || !math.IsInf(got[1], 1) {
		t.Errorf("driftLosses = %v, want [0.35 +Inf]", got)
	}
}
