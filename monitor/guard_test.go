package monitor

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lvs-feedback/policy"
)

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

	// Raised again — with five cycles in, a backlog builds only when the
	// median reaches twice its usual level at cycles (≈ 5.7 per unit of
	// weight here): 12, then 14; then the overload ends: every server at 0
	// active, C's ratio 0 but its shortfall 0 too, under half of
	// min_excess: released.
	setActive(t, r, 40, 40, 5)
	cycle(t, m)
	for _, n := range []int{120, 140} {
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
	// 29 active: 1.45×, within the release, but 9 over its share: with
	// the prediction on (the default) the hold lasts until none is over.
	setActive(t, r, 20, 29, 20)
	addConns(t, r, 100, 100, 100)
	cycle(t, m)
	wantWeights(t, r, "B at 1.45×, 9 over, at a cycle: still held", 10, 4, 10)
	// 19 active: at its share. A check between cycles does not release,
	// the next cycle does.
	setActive(t, r, 20, 19, 20)
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
	if m.mem[DestKey{Service: svcKey, Dest: rsB}].policy.Guard.Holding() {
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
	m.SetFollower(true)
	for _, n := range []int{22, 24, 26} {
		setActive(t, r, 5, n, 5)
		if w := guard(t, m); w != 0 {
			t.Fatalf("follower: %d writes", w)
		}
	}
	wantWeights(t, r, "follower", 10, 10, 10)
	m.SetFollower(false)

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

// TestBacklogGuardSink: a server that stops answering shows in the table
// as no established connection while its failed ones pile up as inactive;
// the check probes it at once and, refused, takes it out of rotation
// (down, weight 0) without waiting for the cycle. One that answers the
// probe keeps its weight; fewer than min_excess ended, a server with
// active connections, and a service where nobody holds one (now or at the
// check before) are not probed.
func TestBacklogGuardSink(t *testing.T) {
	r, m := newCapacityRig(t, "")
	setAllCPU(r, 0.5)
	setConns := func(a, ia, b, ib, c, ic int) {
		t.Helper()
		for _, x := range []struct {
			rs       netip.AddrPort
			act, ina int
		}{{rsA, a, ia}, {rsB, b, ib}, {rsC, c, ic}} {
			must(t, r.table.SetActive(svcKey, x.rs, x.act, x.ina))
		}
	}
	setConns(20, 5, 20, 5, 20, 5)
	cycle(t, m)
	steps := []struct {
		a, b, ib, c int
		refusing    bool
		wantB       int
		why         string
	}{
		{20, 0, 100, 20, false, 10, "95 more inactive, none active, peers busy: probed, answers"},
		{20, 0, 110, 20, true, 10, "10 more inactive: under min_excess (16), not probed"},
		{20, 3, 160, 20, true, 10, "active connections: not a sink"},
		{0, 0, 160, 0, true, 10, "the service empties, B's inactive as before: nothing ended"},
		{0, 0, 200, 0, true, 10, "nobody holds a connection, now or a check ago: no evidence"},
		{20, 0, 230, 20, true, 0, "30 more, none active, refusing: down at once"},
	}
	for _, s := range steps {
		r.prober.mu.Lock()
		r.prober.down[rsB] = s.refusing
		r.prober.mu.Unlock()
		setConns(s.a, 5, s.b, s.ib, s.c, 5)
		guard(t, m)
		if w := r.weight(rsB); w != s.wantB {
			t.Fatalf("%s: B weight %d, want %d", s.why, w, s.wantB)
		}
	}
	if w := r.weight(rsA); w != 10 {
		t.Errorf("A: weight %d, want 10", w)
	}
	saved, err := os.ReadFile(filepath.Join(r.dir, "state.json"))
	must(t, err)
	if want := `"198.51.100.12:80":{"state":"down","set_by":"lvs-monitor","written":0,"restore_weight":10`; !strings.Contains(string(saved), want) {
		t.Errorf("state file after the check:\n%s\nwant B as %s…", saved, want)
	}
	// It comes back through the cycles' rise rule, as any down server.
	r.prober.mu.Lock()
	r.prober.down[rsB] = false
	r.prober.mu.Unlock()
	setConns(20, 5, 0, 5, 20, 5)
	for i := 0; i < 3 && r.weight(rsB) == 0; i++ {
		cycle(t, m)
	}
	if w := r.weight(rsB); w == 0 {
		t.Errorf("B answering again: still weight 0 after 3 cycles")
	}
}

// TestBacklogGuardKnowsCountingSchedulers: the guard predicts no backlog
// under a scheduler that weighs active connections itself; the monitor
// reads which one a service runs at every cycle and tells policy.
func TestBacklogGuardKnowsCountingSchedulers(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	setAllCPU(r, 0.5)
	setActive(t, r, 5, 5, 5)
	cycle(t, m)
	if policy.CountingScheduler(m.schedulers[svcKey]) {
		t.Error("wrr: read as a scheduler that counts active connections")
	}
	must(t, r.table.RemoveService(svcKey))
	must(t, r.table.AddService(svcKey, "wlc"))
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC, rsX} {
		must(t, r.table.AddDestination(svcKey, rs, 10))
	}
	cycle(t, m)
	if !policy.CountingScheduler(m.schedulers[svcKey]) {
		t.Error("wlc: not read as a scheduler that counts active connections")
	}
}
