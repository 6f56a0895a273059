package tune

import (
	"math"
	"testing"
	"time"

	"lvs-feedback/sim"
)

// The genetic search, started from a deliberately wrong set (all the
// weight on MEMORY, which in this scenario says nothing about the server
// whose CPU a background job takes), finds coefficients that beat it on
// held-out seeds: the background scenario under wrr, where the weights
// decide the balance, shortened to its first event.
func TestSearchBeatsAWrongStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 60 simulations")
	}
	sc, err := sim.LoadScenario("../sim/scenarios/background.toml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = 300 * time.Second
	wrong := Vector{0, 0, 1, 0, 0, 0}
	s := &Search{Scenario: sc, Scheduler: "wrr", Base: sim.LVSConfigTOML,
		Train: []uint64{1, 2}, Held: []uint64{3, 4}, Start: wrong,
		Population: 8, Generations: 4, Weights: DefaultFitnessWeights, Seed: 1}
	res, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("best %v: training %.2f, held-out ratios %.2f (start %.2f), gain %.2f ± %.2f, %d vectors, history %.2f",
		res.Best, res.BestTrain.Fitness, res.BestHeld.Ratio, res.StartHeld.Ratio, res.GainMean, res.GainSD, res.Evaluated, res.History)
	if !(res.BestHeld.Fitness < res.StartHeld.Fitness) || !(res.GainMean > 0) {
		t.Fatalf("best %v scores %.3f on held-out seeds, the wrong start %.3f", res.Best, res.BestHeld.Fitness, res.StartHeld.Fitness)
	}
	for g := 1; g < len(res.History); g++ {
		if res.History[g] > res.History[g-1] {
			t.Errorf("best fitness rose from %.3f to %.3f in generation %d (elitism keeps the best)", res.History[g-1], res.History[g], g)
		}
	}
	if len(res.History) != 4 || res.Evaluated < 8 {
		t.Errorf("%d generations, %d vectors evaluated", len(res.History), res.Evaluated)
	}
}

// Bad settings are errors, not a silent default.
func TestSearchChecks(t *testing.T) {
	sc := &sim.Scenario{}
	w := DefaultFitnessWeights
	for _, s := range []Search{
		{Population: 8, Generations: 1, Train: []uint64{1}, Held: []uint64{2}, Weights: w},
		{Scenario: sc, Population: 1, Generations: 1, Train: []uint64{1}, Held: []uint64{2}, Weights: w},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{1}, Weights: w},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Weights: w},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{2}, Weights: FitnessWeights{Balance: 1.2, Stability: -0.2}},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{2}, Weights: FitnessWeights{Balance: 0.5, Stability: 0.4}},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{2}},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{2}, Weights: w, Base: "coefficients.cpu = 1\n"},
	} {
		if _, err := s.Run(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}

// The score on a seed weighs its two parts, x1 + x2 = 1: by hand,
// 0.9·2 + 0.1·10 = 2.8, 0.9·4 + 0.1·0 = 3.6; with the defaults
// 0.95·3 + 0.05·12 = 3.45; all balance, 3; all stability, 12.
func TestFitnessWeights(t *testing.T) {
	for _, c := range []struct {
		w                   FitnessWeights
		ratio, writes, want float64
	}{
		{FitnessWeights{0.9, 0.1}, 2, 10, 2.8},
		{FitnessWeights{0.9, 0.1}, 4, 0, 3.6},
		{DefaultFitnessWeights, 3, 12, 3.45},
		{FitnessWeights{1, 0}, 3, 12, 3},
		{FitnessWeights{0, 1}, 3, 12, 12},
	} {
		if got := c.w.Score(c.ratio, c.writes); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v.Score(%v, %v) = %v, want %v", c.w, c.ratio, c.writes, got, c.want)
		}
	}
}

// The search's verdict, by hand: gains 0.6, 0.2, 0.4 over three held-out
// seeds have mean 0.4, sd 0.2, standard error 0.2/√3 = 0.1155, t 3.464 >
// t(2) 2.920: apply. Gains 0.6, 0.2 over two: mean 0.4, sd 0.2828,
// standard error 0.2, t 2 < t(1) 6.314: keep. One seed, or the best being
// the start: keep.
func TestSearchVerdict(t *testing.T) {
	start := Vector{0.1, 0.3, 0.1, 0.1, 0.3, 0.1}
	other := Vector{0, 0.5, 0, 0, 0.5, 0}
	result := func(best Vector, gains ...float64) SearchResult {
		m, sd := meanSD(gains)
		return SearchResult{Best: best, BestHeld: Score{Ratio: make([]float64, len(gains))}, GainMean: m, GainSD: sd}
	}
	for _, c := range []struct {
		res         SearchResult
		apply       bool
		t, critical float64
	}{
		{result(other, 0.6, 0.2, 0.4), true, 3.4641, 2.9200},
		{result(other, 0.6, 0.2), false, 2, 6.3138},
		{result(other, -0.6, -0.2, -0.4), false, -3.4641, 2.9200},
		{result(start, 0.6, 0.2, 0.4), false, 3.4641, 2.9200},
		{result(other, 0.5), false, math.NaN(), math.NaN()},
	} {
		apply, tt, crit, why := SearchVerdict(c.res, start, 0.05)
		if apply != c.apply || !within(tt, c.t, 1e-4) || !within(crit, c.critical, 1e-4) || apply != (why == "") {
			t.Errorf("%v gain %.3f ± %.3f: apply %v t %.4f critical %.4f (%s); want %v, %.4f, %.4f",
				c.res.Best, c.res.GainMean, c.res.GainSD, apply, tt, crit, why, c.apply, c.t, c.critical)
		}
	}
}

func within(got, want, tol float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= tol
}

// A search is a function of its settings: the same seed gives the same
// result whether the simulations run one at a time or in parallel.
func TestSearchIsDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 20 simulations")
	}
	sc, err := sim.LoadScenario("../sim/scenarios/background.toml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = 240 * time.Second
	var results []SearchResult
	for _, workers := range []int{1, 3} {
		s := &Search{Scenario: sc, Scheduler: "wrr", Base: sim.LVSConfigTOML, Train: []uint64{1}, Held: []uint64{2},
			Start: Vector{0, 0, 1, 0, 0, 0}, Population: 4, Generations: 2, Weights: DefaultFitnessWeights, Seed: 9, Workers: workers}
		res, err := s.Run()
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	a, b := results[0], results[1]
	if a.Best != b.Best || a.BestHeld.Fitness != b.BestHeld.Fitness || a.Evaluated != b.Evaluated {
		t.Fatalf("1 worker: %v %.4f (%d vectors); 3 workers: %v %.4f (%d vectors)",
			a.Best, a.BestHeld.Fitness, a.Evaluated, b.Best, b.BestHeld.Fitness, b.Evaluated)
	}
}
