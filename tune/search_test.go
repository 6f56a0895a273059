package tune

import (
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
		Population: 8, Generations: 4, WritePenalty: 0.05, Seed: 1}
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
	for _, s := range []Search{
		{Population: 8, Generations: 1, Train: []uint64{1}, Held: []uint64{2}},
		{Scenario: sc, Population: 1, Generations: 1, Train: []uint64{1}, Held: []uint64{2}},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{1}},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{2}, WritePenalty: -1},
		{Scenario: sc, Population: 4, Generations: 1, Train: []uint64{1}, Held: []uint64{2}, Base: "coefficients.cpu = 1\n"},
	} {
		if _, err := s.Run(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
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
			Start: Vector{0, 0, 1, 0, 0, 0}, Population: 4, Generations: 2, WritePenalty: 0.05, Seed: 9, Workers: workers}
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
