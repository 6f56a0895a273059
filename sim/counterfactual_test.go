package sim

import (
	"lvs-feedback/monitor"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func loadShipped(t *testing.T, name string) *Scenario {
	t.Helper()
	sc, err := LoadScenario(filepath.Join("scenarios", name+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// shorten keeps a scenario's first d seconds (events after it dropped).
func shorten(sc *Scenario, d, warm time.Duration) *Scenario {
	c := *sc
	c.Duration, c.Warmup = d, warm
	c.Events = nil
	for _, e := range sc.Events {
		if e.At < d {
			c.Events = append(c.Events, e)
		}
	}
	return &c
}

// TestIdealBeatsEqual: on servers of unequal capacity, the ideal-weights
// counterfactual must beat static equal weights under every scheduler.
func TestIdealBeatsEqual(t *testing.T) {
	sc := shorten(loadShipped(t, "unequal"), 150*time.Second, 20*time.Second)
	for _, sched := range []string{"wrr", "wlc"} {
		for _, seed := range []uint64{1, 2} {
			eq, err := RunOne(sc, seed, sched, PolicySpec{Name: PolEqual})
			if err != nil {
				t.Fatal(err)
			}
			id, err := RunOne(sc, seed, sched, PolicySpec{Name: PolIdeal})
			if err != nil {
				t.Fatal(err)
			}
			if !(id.P99 < eq.P99 && id.Mean < eq.Mean) {
				t.Errorf("%s seed %d: ideal p99 %.3fs mean %.3fs, equal p99 %.3fs mean %.3fs: ideal should win",
					sched, seed, id.P99, id.Mean, eq.P99, eq.Mean)
			}
			// And the pooled server bounds everything from below on the
			// mean (same requests, one server of the total capacity).
			po, err := RunOne(sc, seed, "", PolicySpec{Name: PolPooled})
			if err != nil {
				t.Fatal(err)
			}
			if po.Mean > id.Mean {
				t.Errorf("%s seed %d: pooled mean %.4f above ideal %.4f", sched, seed, po.Mean, id.Mean)
			}
		}
	}
}

// TestSameStream: every policy of a seed sees the same requests, and a run
// is a pure function of its inputs (the real monitor included).
func TestSameStream(t *testing.T) {
	sc := shorten(loadShipped(t, "background"), 260*time.Second, 20*time.Second)
	a, b := NewStream(sc, 9), NewStream(sc, 9)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two streams of one seed differ")
	}
	if c := NewStream(sc, 10); reflect.DeepEqual(a.Arrive[:100], c.Arrive[:100]) {
		t.Fatal("streams of two seeds are equal")
	}
	spec, _ := BuiltinPolicy(PolDefault)
	r1, err := RunOne(sc, 9, "wrr", spec)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := RunOne(sc, 9, "wrr", spec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r1, r2) {
		t.Errorf("two runs of the same seed differ:\n%+v\n%+v", r1, r2)
	}
}

// TestMonitorInTheLoop runs the real monitor on the failover scenario and
// checks what it did through the simulated table: it zeroes the failed
// server within an interval and restores it; it never touches the server
// the operator drained; the baselines' references hold.
func TestMonitorInTheLoop(t *testing.T) {
	sc := loadShipped(t, "failover")
	spec, _ := BuiltinPolicy(PolLVS)
	r := runInternal(t, sc, 1, "wlc", spec)
	const c, d = 2, 3 // servers c and d
	at := func(name string) float64 {
		for _, e := range sc.Events {
			if e.Server == name || e.Kind == name {
				return e.At.Seconds()
			}
		}
		t.Fatalf("no event %s", name)
		return 0
	}
	fail, recov := at(EvCrash), at(EvRecover)
	drain, undrain := at(EvDrain), at(EvUndrain)
	var zeroed, restored float64 = -1, -1
	for _, h := range r.history {
		if h.k == c && h.policy && h.w == 0 && zeroed < 0 && h.t >= fail {
			zeroed = h.t
		}
		if h.k == c && h.policy && h.w > 0 && h.t > fail && restored < 0 {
			restored = h.t
		}
		if h.k == d && h.policy && h.t > drain && h.t < undrain {
			t.Errorf("monitor wrote weight %d to the drained server at %.1fs", h.w, h.t)
		}
	}
	iv := r.pol.Interval()
	if zeroed < 0 || zeroed-fail > iv+1e-9 {
		t.Errorf("failed server zeroed at %.1fs, want within %.0fs of %.0fs", zeroed, iv, fail)
	}
	if restored < recov || restored-recov > 2*iv+1e-9 {
		t.Errorf("recovered server restored at %.1fs, want within %.0fs after %.0fs", restored, 2*iv, recov)
	}
	res := r.result(false)
	if res.Writes <= 0 || math.IsNaN(res.P99) {
		t.Errorf("implausible result %+v", res)
	}
	// The monitor's cycles all succeeded.
	if r.tickErrs != 0 {
		t.Errorf("%d cycles failed: %v", r.tickErrs, r.firstErr)
	}
}

// TestScenariosParse: every shipped scenario is valid; a typo is refused.
func TestScenariosParse(t *testing.T) {
	files, _ := filepath.Glob("scenarios/*.toml")
	if len(files) < 5 {
		t.Fatalf("only %d shipped scenarios", len(files))
	}
	for _, f := range files {
		if _, err := LoadScenario(f); err != nil {
			t.Error(err)
		}
	}
	_, err := ParseScenario("x.toml", []byte("duration = \"10s\"\n[workload]\nutilisation = 0.5\nmean_demnd = \"1ms\"\n[[server]]\nspeed = 1\n"))
	if err == nil {
		t.Error("a misspelt key was accepted")
	}
	for _, cfg := range []string{LVSConfigTOML, "# defaults\n"} {
		if _, err := MonitorConfig("t", cfg, loadShipped(t, "unequal")); err != nil {
			t.Error(err)
		}
	}
}

// TestIdealLag: the lagged counterfactual writes the ideal weights exactly
// its lag after the event, so it settles then, and the lag costs p99 under
// wrr on a sudden capacity loss.
func TestIdealLag(t *testing.T) {
	sc := shorten(loadShipped(t, "background"), 260*time.Second, 20*time.Second)
	lagged, err := BuiltinPolicy("ideal-lag:5s")
	if err != nil {
		t.Fatal(err)
	}
	id, err := RunOne(sc, 1, "wrr", PolicySpec{Name: PolIdeal})
	if err != nil {
		t.Fatal(err)
	}
	lg, err := RunOne(sc, 1, "wrr", lagged)
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Settle) != 1 || lg.Settle[0] < 5 || lg.Settle[0] > 6 {
		t.Errorf("ideal-lag:5s settled after %v s, want 5 (within the 1 s sampling)", lg.Settle)
	}
	if len(lg.Reach) != 1 || lg.Reach[0] != lg.Settle[0] {
		t.Errorf("ideal-lag:5s reached the ideal after %v s, want when it settled (%v)", lg.Reach, lg.Settle)
	}
	if id.Settle[0] != 0 || id.Reach[0] != 0 {
		t.Errorf("ideal reached, settled after %v, %v s, want 0, 0", id.Reach[0], id.Settle[0])
	}
	if lg.Writes != id.Writes {
		t.Errorf("writes per server per minute: lagged %v, ideal %v; want the same writes, later", lg.Writes, id.Writes)
	}
	if !(lg.P99 > id.P99) {
		t.Errorf("p99 lagged %.3fs, ideal %.3fs: 5 s of lag on a 60 %% capacity loss should cost", lg.P99, id.P99)
	}
	for _, bad := range []string{"ideal-lag:0s", "ideal-lag:-1s", "ideal-lag:soon"} {
		if _, err := BuiltinPolicy(bad); err == nil {
			t.Errorf("BuiltinPolicy(%q): no error", bad)
		}
	}
}

// TestIdealPoll: the polled counterfactual writes the ideal weights at its
// first tick after the event — the ticks fall every period from the seeded
// phase every kernel policy shares, the scenario's interval (5 s) for
// "ideal-poll" — so it settles then, with the ideal's writes.
func TestIdealPoll(t *testing.T) {
	sc := shorten(loadShipped(t, "background"), 260*time.Second, 20*time.Second)
	id, err := RunOne(sc, 1, "wrr", PolicySpec{Name: PolIdeal})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		period float64
	}{{"ideal-poll", sc.Interval.Seconds()}, {"ideal-poll:1s", 1}, {"ideal-poll:2500ms", 2.5}} {
		polled, err := BuiltinPolicy(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := RunOne(sc, 1, "wrr", polled)
		if err != nil {
			t.Fatal(err)
		}
		iv := tt.period
		phase := newRand(1, streamTick).Float64() * iv
		wait := phase + iv*math.Ceil((200-phase)/iv) - 200 // first tick at or after the event at 200 s
		if wait < 0 || wait >= iv {
			t.Fatalf("%s: test arithmetic: wait %v s outside [0, %v)", tt.name, wait, iv)
		}
		if len(pl.Settle) != 1 || pl.Settle[0] < math.Floor(wait) || pl.Settle[0] > math.Ceil(wait)+1 {
			t.Errorf("%s settled after %v s, want %.2f (the next tick, within the 1 s sampling)", tt.name, pl.Settle, wait)
		}
		if pl.Writes != id.Writes {
			t.Errorf("%s: writes per server per minute %v, ideal %v; want the same writes", tt.name, pl.Writes, id.Writes)
		}
	}
	for _, bad := range []string{"ideal-poll:0s", "ideal-poll:-1s", "ideal-poll:often"} {
		if _, err := BuiltinPolicy(bad); err == nil {
			t.Errorf("BuiltinPolicy(%q): no error", bad)
		}
	}
}

// TestBacklogGuardInTheLoop: with the default configuration the real
// monitor's backlog guard runs between its cycles in the simulator: when
// the background job takes 60 % of b's CPU at 200 s, b's weight is cut
// within 4 s (the backlog builds within a second or two, then two 1 s
// checks of the table) — before the first cycle whose interval lies wholly
// after the event, the first that could have measured it — and the cycles
// still run every interval.
func TestBacklogGuardInTheLoop(t *testing.T) {
	sc := shorten(loadShipped(t, "background"), 260*time.Second, 20*time.Second)
	spec, _ := BuiltinPolicy(PolDefault)
	r := runInternal(t, sc, 1, "wrr", spec)
	const b = 1
	if iv := r.pol.Interval(); iv != 1 {
		t.Fatalf("policy ticks every %vs, want the guard's 1 s", iv)
	}
	event := sc.Events[0].At.Seconds()
	cut := -1.0
	for _, h := range r.history {
		if h.k == b && h.policy && h.t >= event && h.w < sc.Servers[b].Weight {
			cut = h.t
			break
		}
	}
	iv := sc.Interval.Seconds()
	first := newRand(1, streamTick).Float64() * iv
	measured := first + iv*math.Ceil((event+iv-first)/iv) // first cycle at or after event + interval
	if cut < 0 || cut-event > 4 || cut >= measured {
		t.Errorf("b's weight first lowered at %.1fs, want within 4 s of the event at %.0fs and before the cycle at %.1fs", cut, event, measured)
	}
	mp := r.pol.(*monitorPolicy)
	last := mp.m.Last().Start.Sub(simEpoch).Seconds()
	if end := sc.Duration.Seconds(); last < end-5 || last > end {
		t.Errorf("the last cycle started at %.1fs, want within the last 5 s interval before %.0fs", last, end)
	}
}

// TestCyclePhase: the default monitor's cycles (guard checks every second
// between them) fall at the same moments as the static and polled
// policies' looks — fraction u of the interval from the seeded phase, then
// every interval — so that no policy learns of an event earlier by luck.
func TestCyclePhase(t *testing.T) {
	sc := shorten(loadShipped(t, "background"), 40*time.Second, 10*time.Second)
	spec, err := BuiltinPolicy(PolDefault)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{1, 2, 3} {
		pol, err := newMonitorPolicy(spec.Name, spec.Monitor, sc)
		if err != nil {
			t.Fatal(err)
		}
		var cycles []float64
		pol.onCycle = func(now float64, _ monitor.CycleReport) { cycles = append(cycles, now) }
		r, err := newRun(sc, NewStream(sc, seed), seed, "wrr", pol)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.loop(); err != nil {
			t.Fatal(err)
		}
		iv := sc.Interval.Seconds()
		first := newRand(seed, streamTick).Float64() * iv
		if len(cycles) != 8 {
			t.Fatalf("seed %d: %d cycles in 40 s, want 8 (every %v s)", seed, len(cycles), iv)
		}
		for i, at := range cycles {
			if want := first + float64(i)*iv; math.Abs(at-want) > 1e-6 {
				t.Errorf("seed %d: cycle %d at %.6f s, want %.6f (the static policies' look)", seed, i, at, want)
			}
		}
	}
}
