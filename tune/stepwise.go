package tune

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"

	"lvs-feedback/policy"
)

// DefaultSignificance is the significance level of the stepwise F-tests
// and of the held-out comparison when none is given: the conventional 5 %.
const DefaultSignificance = 0.05

// Reads is what a weight controller reads of the six coefficients.
type Reads struct {
	Controller string
	// Inputs are the figures whose coefficients change the controller's
	// weights, in the order of Names; the others only change the load
	// that status, explain, history and the metrics show.
	Inputs [6]bool
	// Sizes is true when the controller uses the coefficients' sizes,
	// false when only whether each is above 0 matters.
	Sizes bool
}

// ControllerReads is the one place that says which coefficients each
// weight controller reads (docs/developer/design.md): the LVS formula weighs all
// six; the capacity controller reads all six as sensitivities against
// the shipped values (policy.Reading), so their sizes matter under both.
func ControllerReads(controller string) (Reads, error) {
	switch controller {
	case policy.ControllerLVS:
		return Reads{Controller: controller, Inputs: [6]bool{true, true, true, true, true, true}, Sizes: true}, nil
	case policy.ControllerCapacity:
		return Reads{Controller: controller, Inputs: [6]bool{true, true, true, true, true, true}, Sizes: true}, nil
	}
	return Reads{}, fmt.Errorf("weight controller %q: lvs-tune knows %q and %q", controller, policy.ControllerLVS, policy.ControllerCapacity)
}

// Names returns the names of the figures the controller reads.
func (r Reads) Names() []string {
	var out []string
	for j, n := range Names {
		if r.Inputs[j] {
			out = append(out, n)
		}
	}
	return out
}

// FCritical is the 1 − alpha quantile of the F distribution with 1 and
// dof degrees of freedom: the value a partial F statistic of one figure
// must exceed to be significant at level alpha.
func FCritical(alpha, dof float64) float64 {
	if !(alpha > 0 && alpha < 1) || !(dof > 0) {
		return math.NaN()
	}
	return distuv.F{D1: 1, D2: dof}.Quantile(1 - alpha)
}

// TCritical is the 1 − alpha quantile of Student's t distribution with
// dof degrees of freedom: one-sided, the value a mean over its standard
// error must exceed to be significant at level alpha.
func TCritical(alpha, dof float64) float64 {
	if !(alpha > 0 && alpha < 1) || !(dof > 0) {
		return math.NaN()
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: dof}.Quantile(1 - alpha)
}

// Step is one step of the stepwise selection.
type Step struct {
	Figure  int  // index into Names
	Entered bool // false: removed
	// F is the figure's partial F statistic at that step, Critical the
	// F(1, n−k−1) quantile it was compared with (k: the figures in the
	// model with it).
	F, Critical float64
}

func (s Step) String() string {
	verb, cmp := "entered", ">"
	if !s.Entered {
		verb, cmp = "removed", "<"
	}
	return fmt.Sprintf("%s %s (F %.2f %s %.2f)", verb, Names[s.Figure], s.F, cmp, s.Critical)
}

// maxSteps bounds the selection: with six figures a cycle of entries and
// removals is possible only in degenerate data, and a bound is cheaper
// than proving it cannot happen.
const maxSteps = 24

// stepwise selects, among the candidates, the figures of the fit by
// forward entry and backward removal (seed 003's method): the candidate
// with the largest partial F enters when that F exceeds the F(1, n−k−1)
// quantile at alpha (k counting it); after each entry, the figure in the
// model with the smallest partial F leaves while that F is below the
// quantile. Each fit is least squares on the standardised inputs under
// non-negativity, as the configuration takes no negative coefficient: a
// figure that would enter with a negative sign adds nothing and has F 0.
// It returns the selection, the steps taken, and each figure's partial F
// and critical value against the final model (for a figure in it, the F
// of leaving it out; for a candidate out of it, the F of adding it).
func stepwise(m *moments, sd Vector, cand [6]bool, alpha float64) (sel [6]bool, steps []Step, f, crit Vector) {
	n := m.n
	rssOf := func(use [6]bool) float64 {
		_, _, r := fitStandardised(m, sd, use)
		return r
	}
	count := func(use [6]bool) (k int) {
		for _, u := range use {
			if u {
				k++
			}
		}
		return k
	}
	// partialF is the F of the difference between a smaller model's
	// residual sum of squares and a larger one's, with k figures.
	partialF := func(smaller, larger float64, k int) float64 {
		dof := n - float64(k) - 1
		switch {
		case dof <= 0:
			return 0
		case larger <= 0:
			if smaller > 0 {
				return math.Inf(1)
			}
			return 0
		}
		return math.Max(0, smaller-larger) / (larger / dof)
	}
	rss := rssOf(sel)
	for len(steps) < maxSteps {
		k := count(sel)
		best, bestF, bestRSS := -1, 0.0, 0.0
		for j := range cand {
			if !cand[j] || sel[j] {
				continue
			}
			with := sel
			with[j] = true
			r := rssOf(with)
			if fj := partialF(rss, r, k+1); best < 0 || fj > bestF {
				best, bestF, bestRSS = j, fj, r
			}
		}
		c := FCritical(alpha, n-float64(k+1)-1)
		if best < 0 || !(bestF > c) {
			break
		}
		sel[best], rss = true, bestRSS
		steps = append(steps, Step{Figure: best, Entered: true, F: bestF, Critical: c})
		for len(steps) < maxSteps {
			k = count(sel)
			worst, worstF, worstRSS := -1, 0.0, 0.0
			for j := range sel {
				if !sel[j] || j == best {
					continue
				}
				without := sel
				without[j] = false
				r := rssOf(without)
				if fj := partialF(r, rss, k); worst < 0 || fj < worstF {
					worst, worstF, worstRSS = j, fj, r
				}
			}
			c := FCritical(alpha, n-float64(k)-1)
			if worst < 0 || !(worstF < c) {
				break
			}
			sel[worst], rss = false, worstRSS
			steps = append(steps, Step{Figure: worst, Entered: false, F: worstF, Critical: c})
		}
	}
	k := count(sel)
	for j := range cand {
		switch {
		case sel[j]:
			without := sel
			without[j] = false
			f[j] = partialF(rssOf(without), rss, k)
			crit[j] = FCritical(alpha, n-float64(k)-1)
		case cand[j]:
			with := sel
			with[j] = true
			f[j] = partialF(rss, rssOf(with), k+1)
			crit[j] = FCritical(alpha, n-float64(k+1)-1)
		}
	}
	return sel, steps, f, crit
}

// Comparison is the fit's held-out error against another predictor's,
// paired sample by sample: the difference of their squared errors,
// summed over each held-out cycle (the servers of one cycle share the
// service mean the outcome is divided by, so they are not independent)
// and compared, cycle by cycle, with its standard error.
type Comparison struct {
	// Cycles is the number of held-out cycle times.
	Cycles int
	// Diff is the mean over the held-out samples of the fit's squared
	// error minus the other's (negative: the fit is better), SE its
	// standard error (from the spread of the per-cycle sums).
	Diff, SE float64
	// T is −Diff/SE, Critical the one-sided Student t quantile at the
	// significance with Cycles − 1 degrees of freedom.
	T, Critical float64
	// Better is T > Critical: the fit's held-out error is lower than the
	// other's beyond its uncertainty.
	Better bool
}

// pairs accumulates the per-cycle sums of a paired difference (Welford's
// method over the cycles).
type pairs struct {
	cycles   int
	mean, m2 float64
	total    float64
	samples  int
}

func (p *pairs) addCycle(sum float64, samples int) {
	p.cycles++
	p.samples += samples
	p.total += sum
	d := sum - p.mean
	p.mean += d / float64(p.cycles)
	p.m2 += d * (sum - p.mean)
}

func (p *pairs) comparison(alpha float64) Comparison {
	c := Comparison{Cycles: p.cycles, T: math.NaN(), Critical: math.NaN(), SE: math.NaN()}
	if p.samples == 0 {
		c.Diff = math.NaN()
		return c
	}
	c.Diff = p.total / float64(p.samples)
	if p.cycles < 2 {
		return c
	}
	seCycle := math.Sqrt(p.m2 / float64(p.cycles-1) / float64(p.cycles))
	c.SE = seCycle * float64(p.cycles) / float64(p.samples)
	c.Critical = TCritical(alpha, float64(p.cycles-1))
	switch {
	case seCycle > 0:
		c.T = -p.mean / seCycle
		c.Better = c.T > c.Critical
	case p.mean < 0: // every cycle better by the same amount
		c.T = math.Inf(1)
		c.Better = true
	default:
		c.T = 0
	}
	return c
}

// Proposal is the coefficient set lvs-tune offers from a fit, for a
// controller that reads r: the figures the controller does not read keep
// their running values (they change nothing under it, so the block does
// not touch them), and the ones it reads share the rest of the sum of 1
// in the fit's proportions. When the running values of the unread ones
// leave less than 0.01 for each selected figure, the fit's coefficients
// are taken alone. Rounded to 0.01 and summing to 1.
func Proposal(fit Fit, running Vector, r Reads) Vector {
	var unread float64
	selected := 0
	for j := range running {
		if !r.Inputs[j] {
			unread += running[j]
		}
		if fit.Selected[j] {
			selected++
		}
	}
	rest := 1 - unread
	if rest < 0.01*float64(selected) {
		return fit.Coefficients.Rounded()
	}
	var v Vector
	for j := range v {
		if r.Inputs[j] {
			v[j] = rest * fit.Coefficients[j]
		} else {
			v[j] = running[j]
		}
	}
	return v.Rounded()
}

// Verdict says whether a proposal from a fit is worth applying under a
// controller that reads r, and why not when it is not: a figure must
// have passed the F-test, the fit must beat both the running
// coefficients and a constant on the held-out time beyond the
// uncertainty of the difference, and the proposal must change something
// the controller reads.
func Verdict(fit Fit, running, proposal Vector, r Reads) (apply bool, why string) {
	any := false
	for _, s := range fit.Selected {
		any = any || s
	}
	switch {
	case !any:
		return false, fmt.Sprintf("no figure passed the F-test at significance %g: the history does not tell a server that backs up from one that does not", fit.Significance)
	case !fit.VsRunning.Better:
		return false, fmt.Sprintf("the fit is not better than the running coefficients on the held-out time beyond its uncertainty (t %.2f, needs > %.2f)", fit.VsRunning.T, fit.VsRunning.Critical)
	case !fit.VsConstant.Better:
		return false, fmt.Sprintf("the fit is not better than a constant on the held-out time beyond its uncertainty (t %.2f, needs > %.2f)", fit.VsConstant.T, fit.VsConstant.Critical)
	}
	if !r.Sizes {
		same := true
		for j := range running {
			if r.Inputs[j] && (running[j] > 0) != (proposal[j] > 0) {
				same = false
			}
		}
		if same {
			return false, fmt.Sprintf("the fit enables the same resources as the running coefficients, and the %q controller reads only which of them are above 0: nothing it reads would change", r.Controller)
		}
	}
	return true, ""
}
