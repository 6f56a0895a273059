package monitor

import (
	"context"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	g := GuardConfig{Trigger: 2, Release: 1.5, MinExcess: 16}
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
	g := GuardConfig{Trigger: 2, Release: 1.5, MinExcess: 16}
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

// TestBacklogGuardRaisesAStarvedServer: while the service's backlog grows,
// a server far below its share of active connections is raised at the
// second check, held up against the controller, and released at the cycle
// at which its share is back; a server in slow start is never raised. The
// LVS formula runs at its target load (step 0): every change is the
// guard's.
func TestBacklogGuardRaisesAStarvedServer(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	setAllCPU(r, 0.95)
	const c = "198.51.100.13:80"
	metrics := NewMetrics(prometheus.NewRegistry())
	m.deps.Metrics = metrics
	setActive(t, r, 40, 40, 5)
	cycle(t, m) // median 4 per unit of weight, the first seen
	steps := []struct {
		a, c    int
		writes  int
		weightC int
		why     string
	}{
		{50, 5, 0, 10, "median 5, growing; C at 0.1× and 45 under: starved, the first check"},
		{60, 5, 1, 20, "median 6; C at 0.083×: raised to 10/0.083, at most doubled"},
		{70, 10, 0, 20, "held"},
	}
	for _, s := range steps {
		setActive(t, r, s.a, s.a, s.c)
		if n := guard(t, m); n != s.writes || r.weight(rsC) != s.weightC {
			t.Fatalf("%s: %d writes, C at %d; want %d, %d", s.why, n, r.weight(rsC), s.writes, s.weightC)
		}
	}
	if got := testutil.ToFloat64(metrics.guardRaises.WithLabelValues(svcKey.String(), c)); got != 1 {
		t.Errorf("guard raises C = %v, want 1", got)
	}
	// The formula wants C at 10: not written below the held 20.
	cycle(t, m)
	wantWeights(t, r, "cycle during the raise", 10, 10, 20)
	wantExplained(t, m, rsC, "weight held at 20 (raised from 10")
	// Median 7 per unit of weight: C at 40 is 0.57× its share at weight 10
	// (below 1/1.5), at 50 0.71×: released, back to the formula's 10.
	setActive(t, r, 70, 70, 40)
	cycle(t, m)
	wantWeights(t, r, "C at 0.57×", 10, 10, 20)
	setActive(t, r, 70, 70, 50)
	cycle(t, m)
	wantWeights(t, r, "C at 0.71×: released", 10, 10, 10)

	// Raised again; then the overload ends: every server at 0 active, C's
	// ratio 0 but its shortfall 0 too, under half of min_excess: released.
	setActive(t, r, 40, 40, 5)
	cycle(t, m)
	for _, n := range []int{50, 60} {
		setActive(t, r, n, n, 5)
		guard(t, m)
	}
	wantWeights(t, r, "raised again", 10, 10, 20)
	setActive(t, r, 0, 0, 0)
	cycle(t, m)
	wantWeights(t, r, "overload over: released", 10, 10, 10)

	// In slow start C is below its share on purpose: never raised.
	r.operatorSets(rsC, 0)
	cycle(t, m)
	r.operatorSets(rsC, 10)
	setActive(t, r, 70, 70, 0)
	cycle(t, m) // undrained: the ramp starts, C at 1
	ramp := r.weight(rsC)
	for _, n := range []int{200, 220, 240} { // C's share at weight 1: 20, 22, 24
		setActive(t, r, n, n, 0)
		guard(t, m)
	}
	if got := r.weight(rsC); got != ramp {
		t.Errorf("C in slow start at %d, then %d: the guard raised it", ramp, got)
	}
}

// rigWithBCut returns a rig running the LVS formula at its target load
// (step 0: every change is the guard's) whose guard has cut B from 10 to 2
// for a growing backlog (22, then 24 active against a median of 0.5 per
// unit of weight).
func rigWithBCut(t *testing.T) (*rig, *Monitor) {
	t.Helper()
	r := newRig(t)
	m := r.monitor(false)
	setAllCPU(r, 0.95)
	setActive(t, r, 5, 5, 5)
	cycle(t, m)
	for _, n := range []int{22, 24} {
		setActive(t, r, 5, n, 5)
		guard(t, m)
	}
	wantWeights(t, r, "cut", 10, 2, 10)
	return r, m
}

// wantExplained checks that lvsctl explain's decision for rs says what.
func wantExplained(t *testing.T, m *Monitor, rs netip.AddrPort, what string) {
	t.Helper()
	e, err := m.Explain(svcKey, rs)
	must(t, err)
	if !strings.Contains(e.Decision, what) {
		t.Errorf("explain %s: %q, want it to say %q", rs, e.Decision, what)
	}
}

func setActive(t *testing.T, r *rig, a, b, c int) {
	t.Helper()
	for i, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		must(t, r.table.SetActive(svcKey, rs, []int{a, b, c}[i], 0))
	}
}

func guard(t *testing.T, m *Monitor) int {
	t.Helper()
	n, err := m.Guard(context.Background())
	if err != nil {
		t.Fatalf("guard: %v", err)
	}
	return n
}

// TestBacklogGuard follows one server through a backlog: detected at the
// second check beyond the trigger, cut in proportion, held against the
// controller, and released by the first cycle at which its connections are
// back to its share.
func TestBacklogGuard(t *testing.T) {
	r, m := newCapacityRig(t, "")
	metrics := NewMetrics(prometheus.NewRegistry())
	m.deps.Metrics = metrics
	const svc, b = "192.0.2.10:80/tcp", "198.51.100.12:80"
	setAllCPU(r, 0.5)
	setActive(t, r, 20, 20, 20)
	cycle(t, m)

	// Median 2 per unit of weight; B's share 20.
	steps := []struct {
		activeB int
		writes  int
		weightB int
		why     string
	}{
		{35, 0, 10, "1.75×: below the trigger"},
		{40, 0, 10, "2× and 20 over: beyond, the first check"},
		{45, 1, 4, "2.25×, 25 over, growing, the second check: cut to 10/2.25"},
		{60, 0, 4, "held"},
	}
	for _, s := range steps {
		setActive(t, r, 20, s.activeB, 20)
		if n := guard(t, m); n != s.writes || r.weight(rsB) != s.weightB {
			t.Fatalf("B at %d active (%s): %d writes, weight %d; want %d, %d", s.activeB, s.why, n, r.weight(rsB), s.writes, s.weightB)
		}
		wantWeights(t, r, s.why, 10, s.weightB, 10)
	}
	if got := testutil.ToFloat64(metrics.guardCuts.WithLabelValues(svc, b)); got != 1 {
		t.Errorf("guard cuts B = %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.backlogHeld.WithLabelValues(svc, b)); got != 1 {
		t.Errorf("backlog held B = %v, want 1", got)
	}

	// A cycle whose controller wants B back at its default 10 leaves it
	// held at 4; explain says why.
	addConns(t, r, 100, 100, 100)
	cycle(t, m)
	wantWeights(t, r, "cycle during the hold", 10, 4, 10)
	wantExplained(t, m, rsB, "backlog guard: weight held at 4 (cut from 10)")

	// 45 active: 2.25× its share at weight 10, beyond the release 1.5×.
	setActive(t, r, 20, 45, 20)
	addConns(t, r, 100, 100, 100)
	cycle(t, m)
	wantWeights(t, r, "B at 2.25× at a cycle: still held", 10, 4, 10)
	// 34 active: 1.7×, 14 over its share — fewer than min_excess, but a
	// server that stays slow looks like that at its cut weight: held.
	setActive(t, r, 20, 34, 20)
	addConns(t, r, 100, 100, 100)
	cycle(t, m)
	wantWeights(t, r, "B at 1.7×, 14 over, at a cycle: still held", 10, 4, 10)
	// 29 active: 1.45×, within the release. A check between cycles does
	// not release, the next cycle does.
	setActive(t, r, 20, 29, 20)
	if n := guard(t, m); n != 0 {
		t.Fatalf("check between cycles: %d writes, want none", n)
	}
	addConns(t, r, 100, 100, 100)
	if rep := cycle(t, m); rep.Writes != 1 {
		t.Errorf("the releasing cycle wrote %d weights, want 1", rep.Writes)
	}
	wantWeights(t, r, "released", 10, 10, 10)
	if got := testutil.ToFloat64(metrics.backlogHeld.WithLabelValues(svc, b)); got != 0 {
		t.Errorf("backlog held B after the release = %v, want 0", got)
	}
	if got := testutil.ToFloat64(metrics.writes.WithLabelValues(svc, b)); got != 2 {
		t.Errorf("kernel writes B = %v, want 2 (the cut and the way back)", got)
	}
	if got := testutil.ToFloat64(metrics.guardCuts.WithLabelValues(svc, b)); got != 1 {
		t.Errorf("guard cuts B = %v, want still 1", got)
	}
}

// TestBacklogGuardRestoresTheControllersWeight: a weight the controller
// decides during a hold is not written above the held weight, but it is
// the weight the server gets back when the hold ends. The LVS formula runs
// on CPU alone: at load 0.95 (the target) its step is 0; at 1.0 it is
// 5·∛(−0.05) = −1.842, so B's weight 10 becomes 8.158, written as 8.
func TestBacklogGuardRestoresTheControllersWeight(t *testing.T) {
	r, m := rigWithBCut(t)
	r.agents.set(agentOf(rsB), 1.0)
	cycle(t, m)
	wantWeights(t, r, "the formula lowers B to 8 during the hold", 10, 2, 10)
	// Released by a cycle in which the agent is gone: the formula decides
	// nothing, and B gets the formula's last weight back.
	setActive(t, r, 5, 5, 5)
	r.agents.remove(agentOf(rsB))
	cycle(t, m)
	wantWeights(t, r, "released: the formula's 8, not the 10 before the cut", 10, 8, 10)
}

// TestBacklogGuardLeavesDrainsAndFollowers: a drain during a hold ends the
// hold and the guard never writes to the drained server; a follower never
// cuts; a guard turned off by a reload lets go of its hold. The LVS
// formula runs, every server at its target load (the formula's step is 0),
// so that every weight change here is the guard's.
func TestBacklogGuardLeavesDrainsAndFollowers(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	setAllCPU(r, 0.95)
	setActive(t, r, 5, 5, 5)
	cycle(t, m)
	cutB := func(what string) {
		t.Helper()
		for _, n := range []int{22, 24} {
			setActive(t, r, 5, n, 5)
			guard(t, m)
		}
		wantWeights(t, r, what, 10, 2, 10)
	}
	cutB("first cut")
	r.operatorSets(rsB, 0) // drain
	setActive(t, r, 5, 40, 5)
	for i := 0; i < 3; i++ {
		guard(t, m)
	}
	cycle(t, m)
	wantWeights(t, r, "drained during the hold", 10, 0, 10)
	if m.mem[DestKey{Service: svcKey, Dest: rsB}].guard.holding() {
		t.Error("the hold outlived the drain")
	}

	// Undrained (and its slow start over); a follower sees the same
	// backlog and writes nothing.
	r.operatorSets(rsB, 10)
	setActive(t, r, 5, 5, 5)
	cycle(t, m)
	r.advance(m.cfg.Availability.SlowStart + time.Second)
	cycle(t, m)
	wantWeights(t, r, "undrained", 10, 10, 10)
	m.setFollower(true)
	for _, n := range []int{22, 24, 26} {
		setActive(t, r, 5, n, 5)
		if w := guard(t, m); w != 0 {
			t.Fatalf("follower: %d writes", w)
		}
	}
	wantWeights(t, r, "follower", 10, 10, 10)
	m.setFollower(false)

	setActive(t, r, 5, 5, 5)
	cycle(t, m)
	wantWeights(t, r, "leader again", 10, 10, 10)
	cutB("second cut")
	cfg := m.cfg
	cfg.Guard.Check = 0
	m.Reload(cfg)
	cycle(t, m)
	wantWeights(t, r, "guard turned off", 10, 10, 10)
	if n := guard(t, m); n != 0 {
		t.Errorf("guard off: %d writes", n)
	}
}

func TestHashingScheduler(t *testing.T) {
	for name, want := range map[string]bool{"sh": true, "dh": true, "mh": true, "wrr": false, "wlc": false, "sed": false, "rr": false, "": false} {
		if got := HashingScheduler(name); got != want {
			t.Errorf("HashingScheduler(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestBacklogGuardLeavesHashingSchedulers: under sh a weight change remaps
// clients; the same backlog that is cut under wrr is left alone, and a
// hold taken under wrr ends (weight restored) when the service is switched
// to sh.
func TestBacklogGuardLeavesHashingSchedulers(t *testing.T) {
	r, m := rigWithBCut(t)

	// The operator switches the service to sh (ipvsadm -E … -s sh keeps
	// the destinations; the in-memory table rebuilds them).
	must(t, r.table.RemoveService(svcKey))
	must(t, r.table.AddService(svcKey, "sh"))
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC, rsX} {
		w := 10
		if rs == rsB {
			w = 2
		}
		must(t, r.table.AddDestination(svcKey, rs, w))
	}
	setActive(t, r, 5, 30, 5)
	cycle(t, m)
	wantWeights(t, r, "sh: the hold ends, B restored", 10, 10, 10)
	for _, n := range []int{40, 50, 60} {
		setActive(t, r, 5, n, 5)
		if w := guard(t, m); w != 0 {
			t.Fatalf("sh, B at %d active: the guard wrote %d weights", n, w)
		}
	}
	wantWeights(t, r, "sh: a backlog left alone", 10, 10, 10)
}
