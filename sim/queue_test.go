package sim

import (
	"math"
	"testing"
	"time"
)

// singleServer is an M/G/1-PS queue: one server of speed 1 and one core
// (so rate(n) = 1/n, plain processor sharing), Poisson arrivals at load rho.
func singleServer(demand string, rho float64, dur time.Duration) *Scenario {
	sc := &Scenario{
		Name:     "mg1ps",
		Duration: dur,
		Warmup:   dur / 20,
		Workload: Workload{Utilisation: rho, Demand: demand, MeanDemand: 10 * time.Millisecond},
		Servers:  []ServerSpec{{Name: "s", Speed: 1, Cores: 1}},
	}
	if err := sc.Check(); err != nil {
		panic(err)
	}
	return sc
}

// runInternal runs one policy and returns the run for inspection.
func runInternal(t *testing.T, sc *Scenario, seed uint64, sched string, spec PolicySpec) *run {
	t.Helper()
	pol, err := spec.build(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRun(sc, NewStream(sc, seed), seed, sched, pol)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMG1PS checks the processor-sharing server against queueing theory.
// For M/G/1-PS the mean response time is E[S]/(1−ρ) whatever the demand
// distribution, and, more sharply, the expected response time of a
// request of demand x is x/(1−ρ): the mean slowdown T/S is 1/(1−ρ).
func TestMG1PS(t *testing.T) {
	cases := []struct {
		demand           string
		tolMean, tolSlow float64
	}{
		// ≈180 000 requests each. The heavy-tailed bounded Pareto
		// (α = 1.2, max/min 1000) makes the mean converge more slowly;
		// the slowdown converges fast for both.
		{"exp", 0.03, 0.02},
		{"pareto", 0.05, 0.02},
	}
	for _, c := range cases {
		t.Run(c.demand, func(t *testing.T) {
			sc := singleServer(c.demand, 0.6, 3000*time.Second)
			r := runInternal(t, sc, 42, "rr", PolicySpec{Name: PolNominal})
			warm := sc.Warmup.Seconds()
			var sumT, sumS, sumSlow, offered float64
			n := 0
			for i, a := range r.st.Arrive {
				offered += r.st.Demand[i]
				if a < warm {
					continue
				}
				rt := float64(r.resp[i])
				if !(rt >= 0) {
					t.Fatalf("request %d has no response time (%v)", i, rt)
				}
				sumT += rt
				sumS += r.st.Demand[i]
				sumSlow += rt / r.st.Demand[i]
				n++
			}
			// Use the sample's own load and mean demand, so that the check
			// is on the queue, not on the arrival and demand samplers
			// (tested on their own below).
			rho := offered / sc.Duration.Seconds()
			es := sumS / float64(n)
			want := es / (1 - rho)
			got := sumT / float64(n)
			if math.Abs(got/want-1) > c.tolMean {
				t.Errorf("mean response %.4fs, M/G/1-PS predicts %.4fs (E[S] %.4fs, ρ %.2f, %d requests): off by %.1f%%",
					got, want, es, rho, n, 100*(got/want-1))
			}
			slow := sumSlow / float64(n)
			if math.Abs(slow*(1-rho)-1) > c.tolSlow {
				t.Errorf("mean slowdown %.3f, M/G/1-PS predicts %.3f", slow, 1/(1-rho))
			}
			t.Logf("%s: %d requests, mean %.4fs (theory %.4fs), slowdown %.3f (theory %.3f)", c.demand, n, got, want, slow, 1/(1-rho))
		})
	}
}

// TestDemandMean checks the bounded-Pareto sampler against its configured
// mean and bounds.
func TestDemandMean(t *testing.T) {
	w := Workload{Demand: "pareto", MeanDemand: 20 * time.Millisecond, Alpha: 1.2, MaxRatio: 1000}
	ds := NewDemandSampler(w)
	lo, hi := ds.Bounds()
	r := newRand(7, 1)
	var s float64
	const n = 400000
	for i := 0; i < n; i++ {
		x := ds.Sample(r)
		if x < lo || x > hi {
			t.Fatalf("sample %v outside [%v, %v]", x, lo, hi)
		}
		s += x
	}
	if m := s / n; math.Abs(m/0.02-1) > 0.03 {
		t.Errorf("mean demand %.5f, want 0.02", m)
	}
}

// TestPoissonRate checks the arrival process's rate, and the wave's.
func TestPoissonRate(t *testing.T) {
	sc := singleServer("exp", 0.5, 2000*time.Second)
	st := NewStream(sc, 3)
	want := sc.BaseRate() * sc.Duration.Seconds()
	if got := float64(st.Len()); math.Abs(got/want-1) > 0.02 {
		t.Errorf("%v arrivals, want about %v", got, want)
	}
	sc.Workload.Wave = Wave{Amplitude: 0.5, Period: 100 * time.Second}
	st = NewStream(sc, 3)
	// Arrivals in the first half-period (rate up to ×1.5) outnumber the
	// second (down to ×0.5): ratio of integrals (1+2a/π)/(1−2a/π) ≈ 1.93.
	var up, down int
	for _, a := range st.Arrive {
		if math.Mod(a, 100) < 50 {
			up++
		} else {
			down++
		}
	}
	if r := float64(up) / float64(down); math.Abs(r-1.93) > 0.1 {
		t.Errorf("wave: up/down arrivals %.2f, want ≈ 1.93", r)
	}
}

// TestAddedDelay checks the oracle's cost on a plain PS server (one core):
// a new request of demand s adds s + 2·Σ min(r_j, s) to the sum of
// response times (its own, s + Σ min(r_j, s), and min(r_j, s) to each
// request present), all divided by the rate.
func TestAddedDelay(t *testing.T) {
	s := newServer(ServerSpec{Speed: 2, Cores: 1})
	for i, d := range []float64{0.5, 0.1, 2, 0.3} {
		s.push(d, i)
	}
	for _, d := range []float64{0.05, 0.3, 1, 5} {
		want := d
		for _, r := range []float64{0.5, 0.1, 2, 0.3} {
			want += 2 * math.Min(r, d)
		}
		want /= 2
		if got := s.addedDelay(d); math.Abs(got-want) > 1e-9 {
			t.Errorf("addedDelay(%v) = %v, want %v", d, got, want)
		}
	}
}
