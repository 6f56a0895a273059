package tune

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"lvs-feedback/history"
)

// Sample is one server in one cycle: its six inputs at cycle t and the
// outcome at cycle t+1.
//
// The outcome is the server's active connections at t+1 per unit of the
// weight it had from t to t+1, divided by the mean of that figure over
// the service's servers at t+1. It is what the load figure is for: the
// server that, for its share of the traffic, backs up more than the
// others. It is not one of the inputs (the next response time would be,
// and would mostly predict itself), the director counts it for every
// server every cycle (a probe can fail, an agent be stale), and dividing
// by the service's mean removes what moves every server alike (traffic
// rising and falling), which no weight can balance.
type Sample struct {
	Time    time.Time // cycle t
	Service string
	Server  string
	X       Vector  // the inputs at t, in the order of Names
	Y       float64 // the outcome at t+1
}

// HeldOutShare is the share of the time, at its end, that Regress holds
// out of the fit to measure its error.
const HeldOutShare = 0.2

// SamplesFromHistory pairs every managed server's record that has inputs
// with the same server's record of the service's next cycle, and returns
// the samples in time order. A pair is left out when the next cycle is
// missing, the server was not managed in either, its weight was 0, or no
// server of the service had an active connection at t+1 (no outcome to
// compare against). It is a Sampler fed the records in time order.
func SamplesFromHistory(recs []history.Record) []Sample {
	sorted := slices.Clone(recs)
	slices.SortStableFunc(sorted, func(a, b history.Record) int { return a.Time.Compare(b.Time) })
	var out []Sample
	s := NewSampler(func(x Sample) { out = append(out, x) })
	for _, r := range sorted {
		s.Add(r)
	}
	s.Flush()
	return out
}

// Fit is the result of Regress.
type Fit struct {
	// Significance is the level of the F-tests and of the held-out
	// comparisons; Candidates the figures the selection could use (the
	// ones the configured controller reads), Selected the ones it kept.
	Significance float64
	Candidates   [6]bool
	Selected     [6]bool
	// Steps are the selection's entries and removals, in order.
	Steps []Step
	// Coefficients are the fitted coefficients on the inputs' own scale
	// (what the configuration takes): non-negative, summing to 1, 0 for
	// a figure not selected; all 0 when none was.
	Coefficients Vector
	// Standardised are the coefficients on inputs scaled to unit standard
	// deviation, normalised to sum to 1: how much of the predicted spread
	// of the outcome each figure carries. A figure that did not vary
	// (Constant: standard deviation below MinSpread) has 0 in both.
	Constant     [6]bool
	Standardised Vector
	// F is each candidate's partial F statistic on the training time
	// against the selected model: for a selected figure, how much the
	// residual sum of squares grows when it is left out; for one not
	// selected, how much it shrinks when it is added; against the
	// residual variance. FCritical is the F(1, n−k−1) quantile at the
	// significance that F was compared with.
	F, FCritical Vector
	// The outcome is predicted as Intercept + Scale·Σ coefficient·input.
	Scale, Intercept float64
	// Train and Held are the numbers of samples fitted and held out.
	Train, Held int
	// HeldRMSE is the root mean square error on the held-out time;
	// ConstantRMSE that of predicting the training mean, HeldRelative
	// their ratio (1: no better than a constant).
	HeldRMSE, ConstantRMSE, HeldRelative float64
	// RunningRMSE is the held-out error of the running coefficients of
	// the candidate figures (with their own scale and intercept fitted
	// on the training time).
	RunningRMSE float64
	// VsRunning and VsConstant compare the fit's held-out squared errors
	// with the running coefficients' and the constant's, paired.
	VsRunning, VsConstant Comparison
	// Gain is 1 − HeldRMSE/RunningRMSE over each of GainBlocks
	// consecutive stretches of the held-out time: mean and standard
	// deviation. Positive: the fit predicts the outcome better.
	GainMean, GainSD float64
}

// RegressOptions are Regress's settings.
type RegressOptions struct {
	// Significance is the level of the F-tests and of the held-out
	// comparisons, in (0, 0.5]; 0 means DefaultSignificance.
	Significance float64
	// Candidates are the figures the selection may use, normally
	// ControllerReads(controller).Inputs; none set means all six.
	Candidates [6]bool
}

// MinSpread is the standard deviation over the training time below which
// a figure counts as constant and is left out of the fit. The figures are
// fractions and ratios of order 1; one that moved by less than 0.001 (the
// host's root filesystem shared by every server, say) carries no usable
// signal, and standardising it would turn a tiny share of the outcome into
// a large coefficient on its own scale.
const MinSpread = 1e-3

// GainBlocks is the number of stretches of held-out time the gain's
// spread is measured over.
const GainBlocks = 5

// Regress fits the coefficients to the samples (in time order, as
// SamplesFromHistory returns them); see RegressSource.
func Regress(samples []Sample, running Vector, opts RegressOptions) (Fit, error) {
	return RegressSource(func(fn func(Sample)) error {
		for _, s := range samples {
			fn(s)
		}
		return nil
	}, running, opts)
}

// A SampleSource calls fn with every sample, in time order, each time it
// is called; RegressSource calls it three times.
type SampleSource func(fn func(Sample)) error

// RegressSource fits the coefficients to the samples of src: on the
// standardised inputs of the first 1 − HeldOutShare of the time, the
// figures are selected stepwise by partial F-tests at the significance
// (stepwise), among the candidates; the selected ones are fitted by
// least squares under non-negativity and normalised to sum to 1. The
// rest of the time is held out to measure the error of the fit, of the
// running coefficients (those of the candidates) and of a constant, and
// to compare them pair by pair (Comparison).
//
// It keeps no sample: the first reading counts the samples of each cycle
// time (to place the split), the second sums what the fit and the errors
// need — the means and the sums of cross-products of the inputs and the
// outcome, over the training time and over each stretch of the held-out
// time — and the third, with the fit known, sums each held-out cycle's
// differences of squared errors, so its memory does not grow with the
// history.
//
// Minimising over non-negative β with a free scale s = Σβ and c = β/s is
// the same problem as fitting s·(c·x) with c on the simplex, so the
// sum-to-1 constraint costs nothing but the scale, which the load's
// target and the controller's gain take up.
func RegressSource(src SampleSource, running Vector, opts RegressOptions) (Fit, error) {
	alpha := opts.Significance
	if alpha == 0 {
		alpha = DefaultSignificance
	}
	if !(alpha > 0 && alpha <= 0.5) {
		return Fit{}, fmt.Errorf("significance %v: want a level in (0, 0.5]", alpha)
	}
	cand := opts.Candidates
	if cand == [6]bool{} {
		cand = [6]bool{true, true, true, true, true, true}
	}
	// The first reading: samples per cycle time, in order.
	var perTime []int
	var last time.Time
	total := 0
	if err := src(func(s Sample) {
		if len(perTime) == 0 || !s.Time.Equal(last) {
			perTime = append(perTime, 0)
			last = s.Time
		}
		perTime[len(perTime)-1]++
		total++
	}); err != nil {
		return Fit{}, err
	}
	if total == 0 {
		return Fit{}, errors.New("no samples: the history holds no consecutive cycles of managed servers with inputs")
	}
	// The first 1 − HeldOutShare of the cycle times are fitted; all
	// samples of one time fall on the same side.
	nTrain := 0
	for _, n := range perTime[:int(float64(len(perTime))*(1-HeldOutShare))%len(perTime)] {
		nTrain += n
	}
	nHeld := total - nTrain
	if nTrain < 20 || nHeld < GainBlocks {
		return Fit{}, fmt.Errorf("%d samples over %d training and %d held-out: need at least 20 and %d",
			total, nTrain, nHeld, GainBlocks)
	}

	// The second reading: the sums.
	var train, held moments
	var blocks [GainBlocks]moments // consecutive stretches of the held-out samples
	i, b := 0, 0
	if err := src(func(s Sample) {
		v := [7]float64{s.X[0], s.X[1], s.X[2], s.X[3], s.X[4], s.X[5], s.Y}
		if i < nTrain {
			train.add(v)
		} else if h := i - nTrain; h < nHeld {
			for (b+1)*nHeld/GainBlocks <= h {
				b++
			}
			held.add(v)
			blocks[b].add(v)
		}
		i++
	}); err != nil {
		return Fit{}, err
	}
	if i != total {
		return Fit{}, fmt.Errorf("the samples changed between two readings (%d, then %d)", total, i)
	}

	fit := Fit{Train: nTrain, Held: nHeld, Significance: alpha, Candidates: cand}
	var mean, sd Vector
	for j := range sd {
		mean[j] = train.mean[j]
		sd[j] = math.Sqrt(train.c[j][j] / train.n)
		if sd[j] < 1e-12 {
			sd[j] = 0
		}
	}
	ymean := train.mean[6]

	usable := cand
	for j := range sd {
		if sd[j] < MinSpread {
			fit.Constant[j] = true
			usable[j] = false
		}
	}
	fit.Selected, fit.Steps, fit.F, fit.FCritical = stepwise(&train, sd, usable, alpha)
	beta, std, _ := fitStandardised(&train, sd, fit.Selected)
	var scale, stdSum float64
	for j := range beta {
		scale += beta[j]
		stdSum += std[j]
	}
	fit.Intercept = ymean
	if scale > 0 {
		fit.Scale = scale
		for j := range beta {
			fit.Coefficients[j] = beta[j] / scale
			fit.Standardised[j] = std[j] / stdSum
			fit.Intercept -= beta[j] * mean[j]
		}
	}

	var runVec Vector
	for j := range running {
		if cand[j] {
			runVec[j] = running[j]
		}
	}
	runScale, runIntercept := fitLine(&train, runVec)
	var runW Vector
	for j := range runW {
		runW[j] = runScale * runVec[j]
	}
	fit.HeldRMSE = held.rmse(fit.Intercept, beta)
	fit.ConstantRMSE = held.rmse(ymean, Vector{})
	fit.HeldRelative = fit.HeldRMSE / fit.ConstantRMSE
	fit.RunningRMSE = held.rmse(runIntercept, runW)

	gains := make([]float64, 0, GainBlocks)
	for b := range blocks {
		if r := blocks[b].rmse(runIntercept, runW); r > 0 {
			gains = append(gains, 1-blocks[b].rmse(fit.Intercept, beta)/r)
		}
	}
	fit.GainMean, fit.GainSD = meanSD(gains)

	// The third reading: the held-out cycles' paired differences.
	var vsRunning, vsConstant pairs
	var cycleRun, cycleConst float64
	cycleN := 0
	var cycleTime time.Time
	flush := func() {
		if cycleN > 0 {
			vsRunning.addCycle(cycleRun, cycleN)
			vsConstant.addCycle(cycleConst, cycleN)
		}
		cycleRun, cycleConst, cycleN = 0, 0, 0
	}
	i = 0
	if err := src(func(s Sample) {
		if i >= nTrain && i < total {
			if cycleN > 0 && !s.Time.Equal(cycleTime) {
				flush()
			}
			cycleTime = s.Time
			eFit := s.Y - fit.Intercept - dot(beta, s.X)
			eRun := s.Y - runIntercept - dot(runW, s.X)
			eConst := s.Y - ymean
			cycleRun += eFit*eFit - eRun*eRun
			cycleConst += eFit*eFit - eConst*eConst
			cycleN++
		}
		i++
	}); err != nil {
		return Fit{}, err
	}
	flush()
	if i != total {
		return Fit{}, fmt.Errorf("the samples changed between two readings (%d, then %d)", total, i)
	}
	fit.VsRunning = vsRunning.comparison(alpha)
	fit.VsConstant = vsConstant.comparison(alpha)
	return fit, nil
}

// moments are the running sums of samples (the six inputs and the
// outcome, in that order): their count, means and sums of cross-products
// of deviations from the means, updated one sample at a time (Welford's
// method, which stays accurate where the deviations are small against
// the means).
type moments struct {
	n    float64
	mean [7]float64
	c    [7][7]float64
}

func (m *moments) add(v [7]float64) {
	m.n++
	var d [7]float64
	for j := range v {
		d[j] = v[j] - m.mean[j]
		m.mean[j] += d[j] / m.n
	}
	for j := range v {
		e := v[j] - m.mean[j]
		for k := range v {
			m.c[j][k] += e * d[k]
		}
	}
}

// rmse is the root mean square error of predicting the outcome as
// a + w·x over the samples: the mean error squared plus the spread of
// the error, from the sums. NaN for no sample.
func (m *moments) rmse(a float64, w Vector) float64 {
	if m.n == 0 {
		return math.NaN()
	}
	u := [7]float64{w[0], w[1], w[2], w[3], w[4], w[5], -1}
	e := a
	var q float64
	for j := range u {
		e += u[j] * m.mean[j]
		for k := range u {
			q += u[j] * u[k] * m.c[j][k]
		}
	}
	return math.Sqrt(math.Max(0, e*e+q/m.n))
}

// fitStandardised fits the centred outcome on the centred inputs scaled
// to unit deviation (the columns in use only), by NNLS on their Gram
// matrix, which is the sums of cross-products scaled; it returns the
// coefficients on the inputs' own scale, the standardised ones and the
// residual sum of squares.
func fitStandardised(m *moments, sd Vector, use [6]bool) (beta, std Vector, rss float64) {
	g := make([][]float64, 6)
	b := make([]float64, 6)
	for j := range g {
		g[j] = make([]float64, 6)
		if !use[j] {
			continue
		}
		b[j] = m.c[j][6] / sd[j]
		for k := range g[j] {
			if use[k] {
				g[j][k] = m.c[j][k] / (sd[j] * sd[k])
			}
		}
	}
	sol := nnls(g, b)
	rss = m.c[6][6]
	for j := range sol {
		std[j] = sol[j]
		if use[j] {
			beta[j] = sol[j] / sd[j]
		}
		rss -= 2 * sol[j] * b[j]
		for k := range sol {
			rss += sol[j] * g[j][k] * sol[k]
		}
	}
	return beta, std, math.Max(0, rss)
}

// fitLine fits y = a + s·(v·x) with s ≥ 0 by least squares.
func fitLine(m *moments, v Vector) (s, a float64) {
	var ml, sxy, sxx float64
	for j := range v {
		ml += v[j] * m.mean[j]
		sxy += v[j] * m.c[j][6]
		for k := range v {
			sxx += v[j] * v[k] * m.c[j][k]
		}
	}
	if sxx > 0 {
		s = math.Max(0, sxy/sxx)
	}
	return s, m.mean[6] - s*ml
}

func dot(a, b Vector) float64 {
	var s float64
	for j := range a {
		s += a[j] * b[j]
	}
	return s
}

// meanSD returns the mean and the sample standard deviation (0 for fewer
// than two values) of the finite values of xs.
func meanSD(xs []float64) (mean, sd float64) {
	xs = slices.DeleteFunc(slices.Clone(xs), func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) })
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}
