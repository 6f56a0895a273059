package policy

import (
	"math"
	"testing"
)

func TestBacklogRatio(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		active, weight    int
		median            float64
		ratio, wantExcess float64
	}{
		{25, 10, 0.5, 5, 20},  // expected 0.5·10 = 5: 25/5, 25−5
		{12, 4, 1.5, 2, 6},    // expected 6
		{3, 10, 0.5, 0.6, -2}, // below its share
		{0, 10, 0, 0, 0},      // an idle service
		{3, 10, 0, inf, 3},    // the only server with connections
	} {
		ratio, excess := BacklogRatio(c.active, c.weight, c.median)
		if !(ratio == c.ratio || near(ratio, c.ratio)) || !near(excess, c.wantExcess) {
			t.Errorf("BacklogRatio(%d, %d, %v) = %v, %v; want %v, %v", c.active, c.weight, c.median, ratio, excess, c.ratio, c.wantExcess)
		}
	}
	if r, _ := BacklogRatio(5, 0, 1); !math.IsNaN(r) {
		t.Errorf("weight 0: ratio %v, want NaN (not in rotation)", r)
	}
}

func TestBacklogged(t *testing.T) {
	g := GuardParams{Trigger: 2, Release: 1.5, MinExcess: 16}
	for _, c := range []struct {
		ratio, excess float64
		active, prev  int
		want          bool
		why           string
	}{
		{5, 20, 25, 20, true, "beyond the trigger, 20 over its share, growing"},
		{5, 20, 25, 25, false, "not growing: a standing imbalance (long-lived connections) is no backlog"},
		{5, 20, 25, 30, false, "shrinking"},
		{1.9, 30, 60, 50, false, "below the trigger"},
		{2, 16, 32, 31, true, "exactly at the trigger and the minimum excess"},
		{3, 10, 15, 10, false, "15 connections are not a backlog, whatever the ratio"},
		{math.Inf(1), 16, 16, 0, true, "the only server with connections, 16 of them"},
	} {
		if got := Backlogged(c.ratio, c.excess, c.active, c.prev, g); got != c.want {
			t.Errorf("%s: Backlogged(%v, %v, %d, %d) = %v, want %v", c.why, c.ratio, c.excess, c.active, c.prev, got, c.want)
		}
	}
}

func TestGuardCut(t *testing.T) {
	for _, c := range []struct {
		weight int
		ratio  float64
		min    int
		want   int
	}{
		{10, 5, 1, 2},     // 10/5
		{10, 3, 1, 3},     // 3.33 rounded down
		{100, 2.5, 1, 40}, // 100/2.5
		{10, 1.05, 1, 9},  // 9.52 rounded down
		{10, 12, 1, 1},    // 0.83: at least min
		{10, 20, 3, 3},    // min 3
		{10, math.Inf(1), 1, 1},
		{10, 1, 1, 10}, // no backlog: no cut
		{10, math.NaN(), 1, 10},
	} {
		if got := GuardCut(c.weight, c.ratio, c.min); got != c.want {
			t.Errorf("GuardCut(%d, %v, %d) = %d, want %d", c.weight, c.ratio, c.min, got, c.want)
		}
	}
}

func TestStarved(t *testing.T) {
	g := GuardParams{Trigger: 2, Release: 1.5, MinExcess: 16}
	for _, c := range []struct {
		ratio, excess float64
		building      bool
		want          bool
		why           string
	}{
		{0.1, -45, true, true, "a tenth of its share, 45 under it, the service's backlog growing"},
		{0.1, -45, false, false, "the service is not building a backlog: nothing to take over"},
		{0.5, -20, true, true, "exactly 1/trigger"},
		{0.6, -30, true, false, "above 1/trigger"},
		{0.2, -10, true, false, "10 under its share: too few to tell"},
	} {
		if got := Starved(c.ratio, c.excess, c.building, g); got != c.want {
			t.Errorf("%s: Starved(%v, %v, %v) = %v, want %v", c.why, c.ratio, c.excess, c.building, got, c.want)
		}
	}
}

func TestGuardRaise(t *testing.T) {
	for _, c := range []struct {
		weight int
		ratio  float64
		want   int
	}{
		{10, 5.0 / 60, 20},   // 120, at most doubled
		{10, 0.6, 17},        // 16.67 rounded up
		{10, 0, 20},          // no connections at all: doubled
		{40000, 0.1, 65535},  // the kernel's maximum
		{10, 1, 10},          // at its share: no raise
		{10, math.NaN(), 10}, // no ratio: no raise
	} {
		if got := GuardRaise(c.weight, c.ratio); got != c.want {
			t.Errorf("GuardRaise(%d, %v) = %d, want %d", c.weight, c.ratio, got, c.want)
		}
	}
}

func TestHashingScheduler(t *testing.T) {
	for name, want := range map[string]bool{"sh": true, "dh": true, "mh": true, "wrr": false, "wlc": false, "sed": false, "rr": false, "": false} {
		if got := HashingScheduler(name); got != want {
			t.Errorf("HashingScheduler(%q) = %v, want %v", name, got, want)
		}
	}
}
