package tune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The quantiles against published tables (F at 0.95 and 0.99, t at
// 0.95, e.g. NIST/SEMATECH e-Handbook 1.3.6.7): F(1, 10) 4.9646, F(1, 30)
// 4.1709, F(1, 120) 3.9201; F(1, 3) 10.128 (= t(0.975, 3)² = 3.1824²).
// A level outside (0, 1) or no degree of freedom is NaN, not a panic.
func TestCriticalValues(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"F(1,10) 0.95", FCritical(0.05, 10), 4.9646, 1e-4},
		{"F(1,30) 0.95", FCritical(0.05, 30), 4.1709, 1e-4},
		{"F(1,120) 0.95", FCritical(0.05, 120), 3.9201, 1e-4},
		{"F(1,3) 0.95", FCritical(0.05, 3), 10.128, 1e-3},
		{"F(1,10) 0.99", FCritical(0.01, 10), 10.044, 1e-3},
		{"F(1,30) 0.99", FCritical(0.01, 30), 7.5625, 1e-4},
		{"F(1,120) 0.99", FCritical(0.01, 120), 6.8509, 1e-4},
		{"t(10) 0.95", TCritical(0.05, 10), 1.8125, 1e-4},
		{"t(30) 0.95", TCritical(0.05, 30), 1.6973, 1e-4},
		{"t(1) 0.95", TCritical(0.05, 1), 6.3138, 1e-4},
		{"t(2) 0.95", TCritical(0.05, 2), 2.9200, 1e-4},
	} {
		if math.Abs(c.got-c.want) > c.tol {
			t.Errorf("%s = %.5f, want %.5f", c.name, c.got, c.want)
		}
	}
	for _, x := range []float64{FCritical(0, 10), FCritical(1, 10), FCritical(0.05, 0), TCritical(-1, 3), TCritical(0.05, 0)} {
		if !math.IsNaN(x) {
			t.Errorf("a bad level or no degree of freedom gave %v, want NaN", x)
		}
	}
}

// One figure by hand: x = 1 2 3 4 5, y = 1 3 2 5 4. Sxx 10, Sxy 8, Syy
// 10; the constant's residual sum of squares is 10, the line's 10 − 8²/10
// = 3.6, so the partial F is (10 − 3.6) / (3.6 / (5 − 1 − 1)) = 5.333.
// At 0.05 it needs F(1, 3) = 10.128 and stays out; at 0.2 it needs
// F(1, 3) at 0.8 = t(0.9, 3)² = 1.6377² = 2.682 and enters.
func TestStepwiseByHand(t *testing.T) {
	var m moments
	for i, y := range []float64{1, 3, 2, 5, 4} {
		m.add([7]float64{float64(i + 1), 0, 0, 0, 0, 0, y})
	}
	sd := Vector{math.Sqrt(10.0 / 5)}
	cand := [6]bool{true}
	for _, c := range []struct {
		alpha    float64
		selected bool
		critical float64
	}{
		{0.05, false, 10.128},
		{0.2, true, 2.682},
	} {
		sel, steps, f, crit := stepwise(&m, sd, cand, c.alpha)
		if sel[0] != c.selected || math.Abs(f[0]-16.0/3) > 1e-9 || math.Abs(crit[0]-c.critical) > 1e-3 {
			t.Errorf("alpha %v: selected %v, F %.4f against %.4f; want %v, 5.3333 against %.3f", c.alpha, sel[0], f[0], crit[0], c.selected, c.critical)
		}
		if c.selected && (len(steps) != 1 || !steps[0].Entered || steps[0].Figure != 0 || math.Abs(steps[0].F-16.0/3) > 1e-9) {
			t.Errorf("alpha %v: steps %v, want input entered with F 5.33", c.alpha, steps)
		}
	}
}

// The paired comparison by hand: per-cycle sums −1, −3, −2 of one sample
// each have mean −2, sd 1, standard error 1/√3 = 0.5774, t 3.464 > t(2)
// 2.920: better. Sums −2 and −6 of two samples each: −8 over 4 samples =
// −2 per sample; per cycle mean −4, sd 2.828, standard error 2 (per
// sample 1), t 2 < t(1) 6.314: not better. Equal errors: t 0, not better.
func TestComparisonByHand(t *testing.T) {
	for _, c := range []struct {
		sums      []float64
		per       int
		diff, se  float64
		tt, crit  float64
		better    bool
		cycles    int
		describes string
	}{
		{[]float64{-1, -3, -2}, 1, -2, 0.57735, 3.4641, 2.9200, true, 3, "three cycles"},
		{[]float64{-2, -6}, 2, -2, 1, 2, 6.3138, false, 2, "two cycles of two"},
		{[]float64{0, 0, 0}, 1, 0, 0, 0, 2.9200, false, 3, "equal errors"},
	} {
		var p pairs
		for _, s := range c.sums {
			p.addCycle(s, c.per)
		}
		got := p.comparison(0.05)
		if got.Cycles != c.cycles || got.Better != c.better || math.Abs(got.Diff-c.diff) > 1e-9 || math.Abs(got.SE-c.se) > 1e-5 ||
			math.Abs(got.T-c.tt) > 1e-4 || math.Abs(got.Critical-c.crit) > 1e-4 {
			t.Errorf("%s: %+v; want diff %v ± %v, t %v against %v, better %v", c.describes, got, c.diff, c.se, c.tt, c.crit, c.better)
		}
	}
}

// knownAnswer returns samples over cycles of 6 servers whose outcome is
// a·x[i] + b·x[j] plus noise of sd 0.05, the other four figures drawn as
// independently but carrying nothing.
func knownAnswer(i, j int, a, b float64, cycles int, seed uint64) []Sample {
	rng := rand.New(rand.NewPCG(seed, 3))
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	var out []Sample
	for c := range cycles {
		for s := range 6 {
			var x Vector
			for k := range x {
				x[k] = 0.2 + rng.Float64()
			}
			out = append(out, Sample{Time: t0.Add(time.Duration(c) * 5 * time.Second), Service: "s",
				Server: fmt.Sprint(s), X: x, Y: a*x[i] + b*x[j] + 0.05*rng.NormFloat64()})
		}
	}
	return out
}

// The selection on data with a known answer: two informative figures
// and four of noise. The stronger enters first, then the weaker, and
// nothing else, whichever pair it is; the coefficients are their shares.
// A figure that acts against the outcome (a negative coefficient, which
// the configuration cannot take) is not selected. Four figures of noise
// alone select nothing: the fit is a constant and the verdict is to keep.
func TestStepwiseKnownAnswer(t *testing.T) {
	running := Vector{0.1, 0.3, 0.1, 0.1, 0.3, 0.1}
	for _, c := range []struct {
		i, j   int
		a, b   float64
		want   [6]bool
		order  []int // the figures in the order they enter
		shares Vector
	}{
		{1, 4, 0.7, 0.3, [6]bool{false, true, false, false, true, false}, []int{1, 4}, Vector{0, 0.7, 0, 0, 0.3, 0}},
		{3, 0, 0.6, 0.4, [6]bool{true, false, false, true, false, false}, []int{3, 0}, Vector{0.4, 0, 0, 0.6, 0, 0}},
		{5, 2, 0.8, 0.2, [6]bool{false, false, true, false, false, true}, []int{5, 2}, Vector{0, 0, 0.2, 0, 0, 0.8}},
		{1, 4, 0.7, -0.3, [6]bool{false, true, false, false, false, false}, []int{1}, Vector{0, 1, 0, 0, 0, 0}},
		{1, 4, 0, 0, [6]bool{}, nil, Vector{}},
	} {
		t.Run(fmt.Sprintf("%s×%v+%s×%v", Names[c.i], c.a, Names[c.j], c.b), func(t *testing.T) {
			fit, err := Regress(knownAnswer(c.i, c.j, c.a, c.b, 250, uint64(10*c.i+c.j)), running, RegressOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var order []int
			for _, s := range fit.Steps {
				if !s.Entered {
					t.Errorf("step %v: nothing should leave", s)
				}
				order = append(order, s.Figure)
			}
			if fit.Selected != c.want || fmt.Sprint(order) != fmt.Sprint(c.order) {
				t.Errorf("selected %v in order %v (steps %v); want %v in order %v", fit.Selected, order, fit.Steps, c.want, c.order)
			}
			for k := range fit.Coefficients {
				if math.Abs(fit.Coefficients[k]-c.shares[k]) > 0.03 {
					t.Errorf("%s = %.3f, want %.2f ± 0.03", Names[k], fit.Coefficients[k], c.shares[k])
				}
				if (fit.F[k] > fit.FCritical[k]) != c.want[k] {
					t.Errorf("%s: F %.2f against %.2f, selected %v", Names[k], fit.F[k], fit.FCritical[k], c.want[k])
				}
			}
			apply, why := Verdict(fit, running, Proposal(fit, running, Reads{Inputs: fit.Candidates, Sizes: true}), Reads{Sizes: true})
			if apply != (c.order != nil) {
				t.Errorf("verdict apply %v (%s), want %v", apply, why, c.order != nil)
			}
			t.Logf("steps %v; F %.1f; held-out RMSE %.4f, running %.4f, constant %.4f; vs running %+v", fit.Steps, fit.F,
				fit.HeldRMSE, fit.RunningRMSE, fit.ConstantRMSE, fit.VsRunning)
		})
	}
}

// A significance outside (0, 0.5] is an error.
func TestRegressSignificance(t *testing.T) {
	samples := knownAnswer(1, 4, 0.7, 0.3, 50, 1)
	for _, a := range []float64{-0.1, 0.6, 1, math.NaN()} {
		if _, err := Regress(samples, Vector{}, RegressOptions{Significance: a}); err == nil {
			t.Errorf("significance %v: no error", a)
		}
	}
}

// Both controllers read all six coefficients by size, so the proposal is
// the fit itself. A controller that read only whether some are above 0
// (Reads without Sizes, here cpu, memory and disk) keeps the figures it
// does not read at their running values and the read ones share the rest.
// By hand: running input 0.1, response 0.3, process 0.2 leave 0.4, which
// a fit of cpu 0.6, disk 0.4 splits 0.24 and 0.16. Enabling disk changes
// what it reads: apply. A fit of cpu alone enables what runs already:
// keep.
func TestProposalAndVerdictByController(t *testing.T) {
	capacity, err := ControllerReads("capacity")
	if err != nil {
		t.Fatal(err)
	}
	lvs, err := ControllerReads("lvs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ControllerReads("pid"); err == nil {
		t.Error("an unknown controller: no error")
	}
	if capacity.Inputs != [6]bool{true, true, true, true, true, true} || !capacity.Sizes ||
		lvs.Inputs != [6]bool{true, true, true, true, true, true} || !lvs.Sizes {
		t.Errorf("capacity reads %+v, lvs %+v", capacity, lvs)
	}
	enabledOnly := Reads{Controller: "enabled-only", Inputs: [6]bool{false, true, true, true, false, false}}
	running := Vector{0.1, 0.4, 0, 0, 0.3, 0.2}
	better := Comparison{Better: true}
	cpuDisk := Fit{Selected: [6]bool{false, true, false, true}, Coefficients: Vector{0, 0.6, 0, 0.4}, VsRunning: better, VsConstant: better}
	cpuOnly := Fit{Selected: [6]bool{false, true}, Coefficients: Vector{0, 1}, VsRunning: better, VsConstant: better}
	for _, c := range []struct {
		name  string
		fit   Fit
		r     Reads
		want  Vector
		apply bool
	}{
		{"capacity, cpu and disk", cpuDisk, capacity, Vector{0, 0.6, 0, 0.4, 0, 0}, true},
		{"capacity, cpu alone", cpuOnly, capacity, Vector{0, 1, 0, 0, 0, 0}, true},
		{"enabled only, cpu and disk", cpuDisk, enabledOnly, Vector{0.1, 0.24, 0, 0.16, 0.3, 0.2}, true},
		{"enabled only, cpu alone", cpuOnly, enabledOnly, Vector{0.1, 0.4, 0, 0, 0.3, 0.2}, false},
		{"lvs, cpu and disk", cpuDisk, lvs, Vector{0, 0.6, 0, 0.4, 0, 0}, true},
		{"lvs, not better than running", Fit{Selected: cpuDisk.Selected, Coefficients: cpuDisk.Coefficients, VsConstant: better}, lvs, Vector{0, 0.6, 0, 0.4, 0, 0}, false},
		{"lvs, not better than a constant", Fit{Selected: cpuDisk.Selected, Coefficients: cpuDisk.Coefficients, VsRunning: better}, lvs, Vector{0, 0.6, 0, 0.4, 0, 0}, false},
	} {
		got := Proposal(c.fit, running, c.r)
		apply, why := Verdict(c.fit, running, got, c.r)
		if got != c.want || apply != c.apply {
			t.Errorf("%s: proposal %v, apply %v (%s); want %v, %v", c.name, got, apply, why, c.want, c.apply)
		}
	}
}
