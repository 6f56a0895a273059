package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// msSeries returns n response times of 1, 2, … n ms.
func msSeries(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i+1) / 1000
	}
	return out
}

// TestResponseStats: a failed request counts in the percentiles as slower
// than any completed one; the mean is over completed requests.
func TestResponseStats(t *testing.T) {
	inf := math.Inf(1)
	failLast := func(resp []float32, k int, v float32) []float32 {
		for i := len(resp) - k; i < len(resp); i++ {
			resp[i] = v
		}
		return resp
	}
	nan := float32(math.NaN())
	for _, tt := range []struct {
		name                string
		resp                []float32
		warmN               int // requests arriving before the warm-up
		requests, failed    int
		mean, p50, p95, p99 float64
	}{
		// Nearest rank over 1000: p99 is the 990th, p95 the 950th.
		{"none failed", msSeries(1000), 0, 1000, 0, 0.5005, 0.500, 0.950, 0.990},
		// 5 of 1000 failed: the p99 is still the 990th value, 990 ms; with
		// the failures dropped it was the 986th of the 995 left.
		{"0.5 % failed", failLast(msSeries(1000), 5, -1), 0, 1000, 5, 0.498, 0.500, 0.950, 0.990},
		// 11 of 1000 failed: more than 1 %, the p99 is +Inf.
		{"1.1 % failed", failLast(msSeries(1000), 11, -1), 0, 1000, 11, 0.495, 0.500, 0.950, inf},
		{"never finished counts as failed", failLast(msSeries(1000), 11, nan), 0, 1000, 11, 0.495, 0.500, 0.950, inf},
		// The first 100 arrive before the warm-up: 101..1000 ms are left,
		// p99 is the 891st of 900 (891·… ms = 100 + 891).
		{"warm-up left out", msSeries(1000), 100, 900, 0, 0.5505, 0.550, 0.955, 0.991},
		{"every request failed", failLast(msSeries(10), 10, -1), 0, 10, 10, 0, inf, inf, inf},
	} {
		arrive := make([]float64, len(tt.resp))
		for i := range arrive {
			arrive[i] = float64(i)
		}
		requests, failed, mean, p50, p95, p99 := responseStats(arrive, tt.resp, float64(tt.warmN))
		near := func(a, b float64) bool { return a == b || math.Abs(a-b) < 1e-6 }
		if requests != tt.requests || failed != tt.failed || !near(mean, tt.mean) || !near(p50, tt.p50) ||
			!near(p95, tt.p95) || !near(p99, tt.p99) {
			t.Errorf("%s: requests %d failed %d mean %.6f p50 %.6f p95 %.6f p99 %v; want %d %d %.6f %.6f %.6f %v",
				tt.name, requests, failed, mean, p50, p95, p99, tt.requests, tt.failed, tt.mean, tt.p50, tt.p95, tt.p99)
		}
	}
}

// TestWriteRates: whole-run writes count every policy write after the
// warm-up, steady writes only those outside steady_after past an event.
func TestWriteRates(t *testing.T) {
	sc := &Scenario{Duration: 600 * time.Second, Warmup: 60 * time.Second, SteadyAfter: 60 * time.Second,
		Events: []EventSpec{{At: 200 * time.Second}, {At: 400 * time.Second}}}
	steady := steadyPeriods(sc)
	// From steady_after past the start, but not before the warm-up ends.
	if want := [][2]float64{{60, 200}, {260, 400}, {460, 600}}; !slices.Equal(steady, want) {
		t.Fatalf("steady periods %v, want %v", steady, want)
	}
	w := func(t float64, policy bool) weightChange { return weightChange{t: t, k: 0, w: 1, policy: policy} }
	h := []weightChange{
		w(30, true),   // before the warm-up
		w(100, true),  // steady
		w(150, true),  // steady
		w(210, true),  // 10 s after an event
		w(250, false), // the operator's: not counted
		w(300, true),  // steady
		w(420, true), w(430, true),
		w(500, true), // steady
		w(600, true), // at the end: after the run
	}
	all, inSteady := writeRates(h, 2, 60, 600, steady)
	// 7 writes / 2 servers / 9 min; 4 / 2 / 7 min (420 s steady).
	if math.Abs(all-7.0/18) > 1e-12 || math.Abs(inSteady-4.0/14) > 1e-12 {
		t.Errorf("writes %v steady %v, want %v and %v", all, inSteady, 7.0/18, 4.0/14)
	}
}

// TestSlidingP99 checks the bucketed sliding p99 on a hand-built stream and
// against sorting every window on a random one.
func TestSlidingP99(t *testing.T) {
	// Arrivals at 0.5, 1.5, 2.5, 3.5 (2 requests each), 2 s windows, 1 s
	// step: windows end at 2, 3, 4.
	arrive := []float64{0.5, 0.5, 1.5, 1.5, 2.5, 2.5, 3.5, 3.5}
	resp := []float32{0.1, 0.2, 0.3, 0.05, -1, 0.01, 0.02, 0.03}
	got := slidingP99(arrive, resp, 2, 1, 4)
	want := []float64{float64(float32(0.3)), math.Inf(1), math.Inf(1)}
	if !slices.Equal(got, want) {
		t.Errorf("hand-built: %v, want %v", got, want)
	}
	if got := slidingP99([]float64{0.5}, []float32{0.1}, 2, 1, 5); !math.IsNaN(got[3]) || len(got) != 4 {
		t.Errorf("empty windows: %v, want NaN from the second on", got)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	arrive, resp = nil, nil
	for tm := 0.0; tm < 60; tm += rng.ExpFloat64() / 50 {
		arrive = append(arrive, tm)
		v := float32(rng.ExpFloat64() / 10)
		if rng.IntN(150) == 0 {
			v = -1
		}
		resp = append(resp, v)
	}
	got = slidingP99(arrive, resp, RecoveryWindow, RecoveryStep, 60)
	if len(got) != 51 {
		t.Fatalf("%d windows, want 51", len(got))
	}
	for n, v := range got {
		end := RecoveryWindow + float64(n)*RecoveryStep
		var buf []float64
		for i, a := range arrive {
			if a >= end-RecoveryWindow && a < end {
				buf = append(buf, responseTime(resp[i]))
			}
		}
		slices.Sort(buf)
		if w := percentile(buf, 0.99); v != w {
			t.Errorf("window ending at %v: %v, want %v", end, v, w)
		}
	}
}

// TestRecoveryTime checks recovery on hand-built sliding p99 series: one
// window end per second from 1 s, the counterfactual at 100 ms, an event
// at 100 s, the next at 200 s; in the band up to 1.2 × 100 ms, for 30 s.
func TestRecoveryTime(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	const n = 300
	// series: 100 ms everywhere except v over [from, to] (window ends).
	series := func(spans ...[3]float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			tm := float64(i + 1)
			s[i] = 0.1
			for _, sp := range spans {
				if tm >= sp[0] && tm <= sp[1] {
					s[i] = sp[2]
				}
			}
		}
		return s
	}
	ideal := series()
	for _, tt := range []struct {
		name string
		p, q []float64
		te   float64
		tEnd float64
		want float64
	}{
		{"never leaves the band", series(), ideal, 100, 200, 0},
		{"out before the event only", series([3]float64{50, 100, 1}), ideal, 100, 200, 0},
		{"at 1.2× is in the band", series([3]float64{101, 150, 0.12}), ideal, 100, 200, 0},
		{"out for 10 windows", series([3]float64{101, 110, 0.2}), ideal, 100, 200, 10},
		{"back for 20 s, out once more, back for good", series([3]float64{101, 110, 0.2}, [3]float64{131, 131, 0.5}), ideal, 100, 200, 31},
		{"left a while after the event", series([3]float64{120, 125, 0.2}), ideal, 100, 200, 25},
		{"failures (+Inf) against a finite counterfactual", series([3]float64{101, 105, inf}), ideal, 100, 200, 5},
		{"both +Inf is in the band", series([3]float64{101, 105, inf}), series([3]float64{101, 105, inf}), 100, 200, 0},
		{"windows without requests are in the band", series([3]float64{101, 110, nan}), ideal, 100, 200, 0},
		{"back 5 s before the next event", series([3]float64{101, 195, 0.2}), ideal, 100, 200, 95},
		{"out from the event to the next: never back", series([3]float64{101, 200, 0.2}), ideal, 100, 200, inf},
		// 30 s in the band right after the event count, whatever follows.
		{"in for 30 s, then out to the next event", series([3]float64{131, 200, 0.2}), ideal, 100, 200, 0},
		{"in for 29 s, then out to the next event", series([3]float64{130, 200, 0.2}), ideal, 100, 200, inf},
		{"after the next event is not judged", series([3]float64{201, 250, 0.2}), ideal, 100, 200, 0},
		{"no window ends in the span", series(), ideal, 100, 100.5, nan},
		{"the last event: judged to the end", series([3]float64{101, 299, 0.2}), ideal, 100, 300, 299 - 100},
	} {
		got := recoveryTime(tt.p, tt.q, 1, 1, tt.te, tt.tEnd)
		if !(got == tt.want || math.IsNaN(got) && math.IsNaN(tt.want)) {
			t.Errorf("%s: recovery %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRecoveryPaired: a bench pairs each kernel run with the ideal run of
// the same scenario, seed and scheduler; the ideal recovers at once from
// its own events, a reference has no recovery, and the ideal weights are
// the exact smallest ones (degrade: 2, 4, 4, 8 cores → 1, 2, 2, 4; c at
// half speed → 1, 2, 1, 4).
func TestRecoveryPaired(t *testing.T) {
	sc := shorten(loadShipped(t, "degrade"), 250*time.Second, 30*time.Second)
	b := &Bench{Scenarios: []*Scenario{sc}, Schedulers: []string{"wrr"}, Seeds: []uint64{1},
		Policies: []PolicySpec{{Name: PolNominal}, {Name: PolIdeal}, {Name: PolPooled}}}
	rs, err := b.Run()
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Result{}
	for _, r := range rs {
		by[r.Policy] = r
	}
	if got := by[PolIdeal].Recovery; len(got) != 1 || got[0] != 0 {
		t.Errorf("ideal recovery %v, want [0]", got)
	}
	if got := by[PolNominal].Recovery; len(got) != 1 || math.IsNaN(got[0]) || got[0] < 0 {
		t.Errorf("nominal recovery %v, want one time ≥ 0", got)
	}
	if got := by[PolPooled].Recovery; got != nil {
		t.Errorf("pooled recovery %v, want none", got)
	}

	st := NewStream(sc, 1)
	pol, err := PolicySpec{Name: PolIdeal}.build(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRun(sc, st, 1, "wrr", pol)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.initW, []int{1, 2, 2, 4}) {
		t.Errorf("ideal weights at the start %v, want 1 2 2 4", r.initW)
	}
	if got := r.dests; got[0].Weight != 1 || got[1].Weight != 2 || got[2].Weight != 1 || got[3].Weight != 4 {
		t.Errorf("ideal weights after the slow-down %v, want 1 2 1 4", got)
	}
}
