package sim

import (
	"math"
	"testing"
	"time"
)

// twoEqual is two one-core servers of speed 1 at the given utilisation
// of the pair, fixed 10 ms demands.
func twoEqual(t *testing.T, util float64, dur time.Duration) *Scenario {
	t.Helper()
	sc := &Scenario{
		Name:     "two",
		Duration: dur,
		Workload: Workload{Utilisation: util, Demand: "fixed", MeanDemand: 10 * time.Millisecond},
		Servers:  []ServerSpec{{Name: "a", Speed: 1}, {Name: "b", Speed: 1}},
	}
	if err := sc.Check(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestRecordedWeightsReplayed: the recorded policy writes each recorded
// weight within replayStep of its time and nothing else. Weights 1:1,
// then b at 0 from 20 s, then 1:3 from 40 s: under wrr the arrivals of
// each stretch (leaving replayStep after each write) are split 1:1, all
// to a, and 1:3, each within one connection of a round.
func TestRecordedWeightsReplayed(t *testing.T) {
	sc := twoEqual(t, 0.5, 60*time.Second)
	spec := PolicySpec{Name: PolRecorded, Replay: &WeightReplay{
		Initial: []int{1, 1},
		Writes: []WeightWrite{
			{At: 20 * time.Second, Server: 1, Weight: 0},
			{At: 40 * time.Second, Server: 1, Weight: 3},
		},
	}}
	r := runInternal(t, sc, 1, "wrr", spec)
	if r.writes[0] != 0 || r.writes[1] != 2 {
		t.Errorf("writes per server %v, want [0 2]", r.writes)
	}
	for i, h := range r.history {
		want := []float64{20, 40}[i]
		if h.t < want || h.t > want+replayStep+1e-9 {
			t.Errorf("write %d made at %.4f s, want within %g s after %g s", i, h.t, replayStep, want)
		}
	}
	for _, s := range []struct {
		from, to float64
		shareB   float64
	}{{0, 20, 0.5}, {20 + replayStep, 40, 0}, {40 + replayStep, 60, 0.75}} {
		var n [2]int
		for i, at := range r.st.Arrive {
			if at >= s.from && at < s.to {
				n[r.served[i]]++
			}
		}
		total := float64(n[0] + n[1])
		if math.Abs(float64(n[1])-s.shareB*total) > 4 {
			t.Errorf("arrivals in [%g, %g): a %d, b %d; want b's share %g within a round", s.from, s.to, n[0], n[1], s.shareB)
		}
	}
	// The same schedule against a scenario of three servers is refused.
	sc3 := twoEqual(t, 0.5, 10*time.Second)
	sc3.Servers = append(sc3.Servers, ServerSpec{Name: "c", Speed: 1, Cores: 1, Weight: 10})
	if _, err := spec.build(sc3); err == nil {
		t.Error("a schedule of 2 servers accepted for 3")
	}
}

// TestOverloadSeconds checks the overload seconds on cases worked by
// hand.
func TestOverloadSeconds(t *testing.T) {
	t.Run("all traffic on one server", func(t *testing.T) {
		// Both servers' traffic on a alone: ρ = 2 × 0.6 = 1.2. Its backlog
		// grows by 0.2 s of work a second, so once it holds a request it
		// never empties: busy 1 every second but the first few. b is
		// idle. 100 s: at least 95 of them, at most 100.
		sc := twoEqual(t, 0.6, 100*time.Second)
		res, err := RunOne(sc, 1, "wrr", PolicySpec{Name: PolRecorded, Replay: &WeightReplay{Initial: []int{1, 0}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Overload < 95 || res.Overload > 100 {
			t.Errorf("overload %v s, want 95 to 100", res.Overload)
		}
	})
	t.Run("light load", func(t *testing.T) {
		// ρ = 0.05 each: 5 requests of 10 ms a second per server; a
		// second 95 % busy needs 95 of them (Poisson of mean 5): never.
		sc := twoEqual(t, 0.05, 100*time.Second)
		res, err := RunOne(sc, 1, "wrr", PolicySpec{Name: PolNominal})
		if err != nil {
			t.Fatal(err)
		}
		if res.Overload != 0 {
			t.Errorf("overload %v s, want 0", res.Overload)
		}
	})
	t.Run("warm-up left out", func(t *testing.T) {
		sc := twoEqual(t, 0.6, 100*time.Second)
		sc.Warmup = 40 * time.Second
		res, err := RunOne(sc, 1, "wrr", PolicySpec{Name: PolRecorded, Replay: &WeightReplay{Initial: []int{1, 0}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Overload != 60 {
			t.Errorf("overload %v s after a 40 s warm-up of 100 s, want 60", res.Overload)
		}
	})
	t.Run("the disk", func(t *testing.T) {
		// Two requests a second, each 1 s of I/O (fixed) and 10 ms of
		// CPU: the disk at ρ = 2 never empties after the first request,
		// the CPU is 2 % busy. 200 s: at least 195 overload seconds, all
		// from the disk.
		sc := oneServerIO(t, "")
		sc.Duration = 200 * time.Second
		sc.Workload.Rate, sc.Workload.Demand, sc.Workload.IODemand = 2, "fixed", "fixed"
		sc.Workload.MeanDemand = 10 * time.Millisecond
		if err := sc.Check(); err != nil {
			t.Fatal(err)
		}
		r := runInternal(t, sc, 1, "rr", PolicySpec{Name: PolNominal})
		for i, b := range r.samples[0] {
			if b >= OverloadBusy {
				t.Fatalf("CPU %v busy in second %d", b, i)
			}
		}
		if got := r.result(false).Overload; got < 195 || got > 200 {
			t.Errorf("overload %v s, want 195 to 200", got)
		}
	})
}
