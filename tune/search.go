package tune

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"lvs-feedback/sim"
)

// RatioCap is the p99 ratio a run is scored with when its p99 is
// infinite (more than 1 % of its requests failed) or the ratio is larger:
// a finite, very bad score keeps means and spreads defined.
const RatioCap = 100

// FitnessWeights weigh the two parts of a search's score on a seed, as
// seed 001's fitness weighs its parts: x1·balance + x2·stability, with
// x1 + x2 = 1. Balance is the p99 response time divided by the
// ideal-weights counterfactual's (1: as good as knowing every server's
// speed), stability the weight writes per server per minute (each write
// restarts the kernel's wrr round). Lower is better for both.
type FitnessWeights struct {
	Balance, Stability float64 // x1, x2
}

// DefaultFitnessWeights are lvs-tune search's defaults: the balance counts,
// and a write per server per minute costs what 5 % of the ideal p99
// does, so that a vector writing 10 times a minute more must buy a p99
// about half the ideal's lower (0.05·10 ÷ 0.95).
var DefaultFitnessWeights = FitnessWeights{Balance: 0.95, Stability: 0.05}

func (w FitnessWeights) check() error {
	if !(w.Balance >= 0 && w.Stability >= 0) || math.Abs(w.Balance+w.Stability-1) > 1e-9 {
		return fmt.Errorf("fitness weights balance %v and stability %v: want two non-negative weights summing to 1", w.Balance, w.Stability)
	}
	return nil
}

// Score is the score on one seed: w.Balance·ratio + w.Stability·writes.
func (w FitnessWeights) Score(ratio, writes float64) float64 {
	return w.Balance*ratio + w.Stability*writes
}

// Search is a genetic search for the coefficients, each candidate scored
// by the simulator: the real monitor, configured with Base and the
// candidate's [coefficients], runs Scenario under Scheduler; its score on
// a seed weighs, by Weights, its balance (p99 response time divided by
// the ideal-weights counterfactual's on the same seed and scheduler) and
// its stability (weight writes per server per minute). The fitness is
// the mean score over the Train seeds; the best of the last generation
// is reported on the Held seeds, which the search never saw, beside
// Start.
//
// A generation of Population vectors on the simplex (non-negative,
// summing to 1, rounded to 0.01) becomes the next by:
//
//   - elitism: the Elite best pass unchanged, so the best never gets
//     worse from one generation to the next;
//   - selection: each parent is the fitter of two drawn at random
//     (tournament of two), which favours the fit without letting one
//     vector take over a small population;
//   - crossover: the child is a random convex mix a·p + (1−a)·q of its
//     parents, which stays on the simplex;
//   - mutation: each coefficient moves by a normal step of MutationSD
//     with probability 1/3, and with probability 1/10 one coefficient is
//     set to 0 (the search can drop a figure altogether); the child is
//     then renormalised and rounded.
//
// The first generation is Start and Population − 1 vectors drawn
// uniformly from the simplex. Every draw comes from Seed, and runs are
// pure functions of their inputs, so a search is deterministic whatever
// Workers is.
type Search struct {
	Scenario  *sim.Scenario
	Scheduler string
	// Base is the monitor configuration (TOML without [[service]], as a
	// sim/variants file) the candidates' [coefficients] are put into.
	Base        string
	Train, Held []uint64
	Start       Vector

	Population, Generations int
	// Elite is how many of the best pass to the next generation (default 2).
	Elite int
	// MutationSD is the standard deviation of a mutation step (default 0.1).
	MutationSD float64
	// Weights weigh balance and stability in the score (x1 + x2 = 1).
	Weights FitnessWeights
	Seed    uint64
	// Workers bounds the simulations in parallel (default GOMAXPROCS).
	Workers int
	// Progress, if set, is called after each generation with its number
	// (from 0) and its best.
	Progress func(generation int, best Score)
}

// Score is a vector's score over a set of seeds.
type Score struct {
	Vector Vector
	// Fitness is the mean over the seeds of Weights.Score(Ratio, Writes).
	Fitness float64
	// Ratio and Writes are per seed: p99 ÷ the ideal's p99 (capped at
	// RatioCap), and weight writes per server per minute.
	Ratio, Writes []float64
}

// SearchResult is what a search found.
type SearchResult struct {
	// Best is the fittest vector of the last generation on the training
	// seeds; BestTrain its score there, BestHeld and StartHeld the scores
	// of it and of Start on the held-out seeds.
	Best                           Vector
	BestTrain, BestHeld, StartHeld Score
	// History is the best training fitness of each generation.
	History []float64
	// Evaluated is the number of distinct vectors simulated.
	Evaluated int
	// GainMean and GainSD are the mean and standard deviation over the
	// held-out seeds of Start's score minus Best's: positive, Best is
	// better.
	GainMean, GainSD float64
}

// SearchVerdict says whether a search's best is worth applying: it must
// differ from the start and its held-out gain must be above 0 beyond its
// uncertainty — the mean over the held-out seeds against its standard
// error, above the one-sided Student t quantile at alpha with seeds − 1
// degrees of freedom (the seeds pair the two vectors on the same random
// draws). One held-out seed gives no spread: the verdict is then to keep.
// It returns the t statistic and the quantile too.
func SearchVerdict(res SearchResult, start Vector, alpha float64) (apply bool, t, critical float64, why string) {
	n := len(res.BestHeld.Ratio)
	t, critical = math.NaN(), math.NaN()
	if n >= 2 {
		critical = TCritical(alpha, float64(n-1))
		if se := res.GainSD / math.Sqrt(float64(n)); se > 0 {
			t = res.GainMean / se
		} else if res.GainMean > 0 {
			t = math.Inf(1)
		} else {
			t = 0
		}
	}
	switch {
	case res.Best == start.Rounded():
		return false, t, critical, "the best vector is the start"
	case n < 2:
		return false, t, critical, fmt.Sprintf("%d held-out seed: no spread to weigh the gain against (give at least 2)", n)
	case !(t > critical):
		return false, t, critical, fmt.Sprintf("the gain on the held-out seeds is not above 0 beyond its uncertainty (t %.2f, needs > %.2f)", t, critical)
	}
	return true, t, critical, ""
}

func (s *Search) check() error {
	switch {
	case s.Scenario == nil:
		return errors.New("search: no scenario")
	case s.Population < 2:
		return fmt.Errorf("search: population %d: need at least 2", s.Population)
	case s.Generations < 1:
		return fmt.Errorf("search: %d generations: need at least 1", s.Generations)
	case len(s.Train) == 0 || len(s.Held) == 0:
		return errors.New("search: need training and held-out seeds")
	}
	if err := s.Weights.check(); err != nil {
		return fmt.Errorf("search: %w", err)
	}
	for _, h := range s.Held {
		if slices.Contains(s.Train, h) {
			return fmt.Errorf("search: seed %d is both a training and a held-out seed", h)
		}
	}
	if _, err := ReplaceCoefficients([]byte(s.Base), s.Start); err != nil {
		return fmt.Errorf("search: base configuration: %w", err)
	}
	return nil
}

// Run performs the search.
func (s *Search) Run() (SearchResult, error) {
	if err := s.check(); err != nil {
		return SearchResult{}, err
	}
	elite := s.Elite
	if elite <= 0 {
		elite = 2
	}
	elite = min(elite, s.Population-1)
	sd := s.MutationSD
	if sd <= 0 {
		sd = 0.1
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x7475_6e65))
	ev := &evaluator{s: s, ideal: map[uint64]float64{}, cache: map[Vector]Score{}}

	pop := []Vector{s.Start.Rounded()}
	for len(pop) < s.Population {
		if v := randomSimplex(rng); !slices.Contains(pop, v) {
			pop = append(pop, v)
		}
	}
	var res SearchResult
	var scores []Score
	for g := 0; g < s.Generations; g++ {
		var err error
		if scores, err = ev.scoreAll(pop, s.Train); err != nil {
			return SearchResult{}, err
		}
		order := make([]int, len(pop))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmpFloat(scores[a].Fitness, scores[b].Fitness) })
		sorted := make([]Score, len(order))
		for i, k := range order {
			sorted[i] = scores[k]
		}
		scores = sorted
		res.History = append(res.History, scores[0].Fitness)
		if s.Progress != nil {
			s.Progress(g, scores[0])
		}
		if g == s.Generations-1 {
			break
		}
		next := make([]Vector, 0, s.Population)
		for _, sc := range scores[:elite] {
			next = append(next, sc.Vector)
		}
		for tries := 0; len(next) < s.Population; tries++ {
			p, q := tournament(rng, scores), tournament(rng, scores)
			a := rng.Float64()
			var child Vector
			for j := range child {
				child[j] = a*p[j] + (1-a)*q[j]
				if rng.IntN(3) == 0 {
					child[j] += sd * rng.NormFloat64()
				}
			}
			if rng.IntN(10) == 0 {
				child[rng.IntN(6)] = 0
			}
			child = child.Rounded()
			// A copy of a member teaches nothing; after many tries (a
			// population converged on one point) it is let in.
			if !slices.Contains(next, child) || tries > 100*s.Population {
				next = append(next, child)
			}
		}
		pop = next
	}
	res.Best, res.BestTrain = scores[0].Vector, scores[0]
	res.Evaluated = len(ev.cache)
	held, err := ev.scoreAll([]Vector{res.Best, s.Start}, s.Held)
	if err != nil {
		return SearchResult{}, err
	}
	res.BestHeld, res.StartHeld = held[0], held[1]
	gains := make([]float64, len(s.Held))
	for i := range s.Held {
		gains[i] = s.Weights.Score(res.StartHeld.Ratio[i], res.StartHeld.Writes[i]) - s.Weights.Score(res.BestHeld.Ratio[i], res.BestHeld.Writes[i])
	}
	res.GainMean, res.GainSD = meanSD(gains)
	return res, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// tournament returns the fitter of two members drawn at random from
// scores (sorted, fittest first: the lower index wins).
func tournament(rng *rand.Rand, scores []Score) Vector {
	return scores[min(rng.IntN(len(scores)), rng.IntN(len(scores)))].Vector
}

// randomSimplex draws a vector uniformly from the simplex (normalised
// exponential draws), rounded.
func randomSimplex(rng *rand.Rand) Vector {
	var v Vector
	for j := range v {
		v[j] = rng.ExpFloat64()
	}
	return v.Rounded()
}

// evaluator runs the simulations, and remembers the ideal runs' p99 per
// seed and every vector's training score.
type evaluator struct {
	s     *Search
	mu    sync.Mutex
	ideal map[uint64]float64
	cache map[Vector]Score // training scores
}

// scoreAll scores every vector on seeds, running what is not known in
// parallel.
func (e *evaluator) scoreAll(vs []Vector, seeds []uint64) ([]Score, error) {
	training := slices.Equal(seeds, e.s.Train)
	type job struct {
		v    int // index into vs; -1: the ideal run
		seed int // index into seeds
	}
	var jobs []job
	for i, seed := range seeds {
		if _, ok := e.ideal[seed]; !ok {
			jobs = append(jobs, job{-1, i})
		}
	}
	todo := map[Vector]bool{}
	for _, v := range vs {
		if _, ok := e.cache[v]; (!training || !ok) && !todo[v] {
			todo[v] = true
			for i := range seeds {
				jobs = append(jobs, job{slices.Index(vs, v), i})
			}
		}
	}
	p99 := map[job]sim.Result{}
	workers := e.s.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		wg       sync.WaitGroup
		firstErr error
		next     = make(chan job)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				spec := sim.PolicySpec{Name: sim.PolIdeal}
				if j.v >= 0 {
					cfg, err := ReplaceCoefficients([]byte(e.s.Base), vs[j.v])
					if err != nil {
						e.fail(&firstErr, err)
						continue
					}
					spec = sim.PolicySpec{Name: "tune", Monitor: string(cfg)}
				}
				r, err := sim.RunOne(e.s.Scenario, seeds[j.seed], e.s.Scheduler, spec)
				if err != nil {
					e.fail(&firstErr, fmt.Errorf("coefficients %v: %w", vs[max(j.v, 0)], err))
					continue
				}
				e.mu.Lock()
				p99[j] = r
				e.mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for j, r := range p99 {
		if j.v < 0 {
			e.ideal[seeds[j.seed]] = r.P99
		}
	}
	out := make([]Score, len(vs))
	for k, v := range vs {
		if sc, ok := e.cache[v]; ok && training {
			out[k] = sc
			continue
		}
		first := slices.Index(vs, v)
		sc := Score{Vector: v}
		for i, seed := range seeds {
			r := p99[job{first, i}]
			ratio := r.P99 / e.ideal[seed]
			if math.IsNaN(ratio) || ratio > RatioCap {
				ratio = RatioCap
			}
			sc.Ratio = append(sc.Ratio, ratio)
			sc.Writes = append(sc.Writes, r.Writes)
			sc.Fitness += e.s.Weights.Score(ratio, r.Writes) / float64(len(seeds))
		}
		if training {
			e.cache[v] = sc
		}
		out[k] = sc
	}
	return out, nil
}

func (e *evaluator) fail(first *error, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if *first == nil {
		*first = err
	}
}
