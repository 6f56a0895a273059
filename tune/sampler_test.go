package tune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"lvs-feedback/history"
)

// streamSamples runs recs through a Sampler.
func streamSamples(recs []history.Record) []Sample {
	var out []Sample
	s := NewSampler(func(smp Sample) { out = append(out, smp) })
	for _, r := range recs {
		s.Add(r)
	}
	s.Flush()
	return out
}

// The Sampler makes, record by record, the samples SamplesFromHistory
// makes of the whole slice, in the same order: two services of
// interleaved records (their batches in the writer's order, not sorted),
// a drained server, a server that appears late, a missing record and a
// duplicate.
func TestSamplerMatchesSamplesFromHistory(t *testing.T) {
	a := synthetic(Vector{0.2, 0.5, 0, 0, 0.3}, 4, 30, 0.05, 3)
	b := synthetic(Vector{0, 1}, 3, 30, 0.05, 4)
	for i := range b {
		b[i].Service = "192.0.2.9:443/tcp" // sorts before a's service
	}
	var recs []history.Record
	for c := 0; c < 30; c++ { // each cycle: a's records, then b's
		recs = append(recs, a[4*c:4*c+4]...)
		recs = append(recs, b[3*c:3*c+3]...)
	}
	recs[7*5+1].State = "drained"
	recs = slices.Delete(recs, 7*9+2, 7*9+3)       // a record missing
	recs = slices.Insert(recs, 7*12, recs[7*12+1]) // a duplicate, earlier in its cycle
	late := recs[7*20]
	late.Server = "198.51.100.99:80"
	recs = slices.Insert(recs, 7*20+1, late)

	want := SamplesFromHistory(recs)
	got := streamSamples(recs)
	if len(want) < 150 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%d samples streamed, %d from the slice; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []Sample) int {
	for i := range min(len(a), len(b)) {
		if fmt.Sprint(a[i]) != fmt.Sprint(b[i]) {
			return i
		}
	}
	return min(len(a), len(b))
}

// A cycle earlier than the service's previous one (a clock stepped back)
// is not paired across the step: the cycles on each side pair among
// themselves.
func TestSamplerClockStep(t *testing.T) {
	recs := synthetic(Vector{0, 1}, 2, 6, 0, 1)  // cycles 0..5, 2 servers
	stepped := slices.Concat(recs[6:], recs[:6]) // cycles 3, 4, 5, then 0, 1, 2
	got := streamSamples(stepped)
	var times []time.Time
	for _, s := range got {
		times = append(times, s.Time)
	}
	t0 := recs[0].Time
	want := []time.Time{t0.Add(15 * time.Second), t0.Add(15 * time.Second), t0.Add(20 * time.Second), t0.Add(20 * time.Second),
		t0, t0, t0.Add(5 * time.Second), t0.Add(5 * time.Second)}
	if fmt.Sprint(times) != fmt.Sprint(want) {
		t.Errorf("sample times %v, want %v", times, want)
	}
}

// The sums by hand: x = 1, 2, 3, 4 in the first input, y = 2, 4, 6, 9.
// Means 2.5 and 5.25; Σ(x−x̄)² = 5, Σ(x−x̄)(y−ȳ) = 11.5,
// Σ(y−ȳ)² = 26.75. Predicting y = 0.5 + 2x: errors 0.5, 0.5, 0.5, −0.5,
// RMSE 0.5. The line fitted on v = (1, 0, …): slope 11.5/5 = 2.3,
// intercept 5.25 − 2.3·2.5 = −0.5.
func TestMoments(t *testing.T) {
	var m moments
	for i, y := range []float64{2, 4, 6, 9} {
		m.add([7]float64{float64(i + 1), 0, 0, 0, 0, 0, y})
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"n", m.n, 4},
		{"mean x", m.mean[0], 2.5},
		{"mean y", m.mean[6], 5.25},
		{"Sxx", m.c[0][0], 5},
		{"Sxy", m.c[0][6], 11.5},
		{"Syx", m.c[6][0], 11.5},
		{"Syy", m.c[6][6], 26.75},
		{"rmse of 0.5 + 2x", m.rmse(0.5, Vector{2}), 0.5},
		{"rmse of the mean", m.rmse(5.25, Vector{}), math.Sqrt(26.75 / 4)},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	s, a := fitLine(&m, Vector{1})
	if math.Abs(s-2.3) > 1e-12 || math.Abs(a+0.5) > 1e-12 {
		t.Errorf("line: slope %v intercept %v, want 2.3 and −0.5", s, a)
	}
	if r := (&moments{}).rmse(0, Vector{}); !math.IsNaN(r) {
		t.Errorf("rmse of no sample: %v, want NaN", r)
	}
}

// Regress from the sums gives the fit the samples themselves give: the
// direct computation (each figure summed over the samples, as Regress did
// when it kept them) agrees to 1e-9.
func TestRegressSumsMatchDirect(t *testing.T) {
	running := Vector{0.1, 0.3, 0.1, 0.1, 0.3, 0.1}
	samples := SamplesFromHistory(synthetic(Vector{0.2, 0.5, 0, 0, 0.3, 0}, 8, 300, 0.05, 9))
	fit, err := Regress(samples, running, RegressOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := regressDirect(samples, running, fit.Selected)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"held RMSE", fit.HeldRMSE, want.HeldRMSE},
		{"held relative", fit.HeldRelative, want.HeldRelative},
		{"running RMSE", fit.RunningRMSE, want.RunningRMSE},
		{"gain mean", fit.GainMean, want.GainMean},
		{"gain sd", fit.GainSD, want.GainSD},
		{"scale", fit.Scale, want.Scale},
		{"intercept", fit.Intercept, want.Intercept},
		{"constant RMSE", fit.ConstantRMSE, want.ConstantRMSE},
		{"vs running: diff", fit.VsRunning.Diff, want.VsRunning.Diff},
		{"vs running: SE", fit.VsRunning.SE, want.VsRunning.SE},
		{"vs constant: diff", fit.VsConstant.Diff, want.VsConstant.Diff},
		{"vs constant: SE", fit.VsConstant.SE, want.VsConstant.SE},
	} {
		if math.Abs(c.got-c.want) > 1e-9*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %v, direct %v", c.name, c.got, c.want)
		}
	}
	for j := range fit.Coefficients {
		if math.Abs(fit.Coefficients[j]-want.Coefficients[j]) > 1e-9 || math.Abs(fit.F[j]-want.F[j]) > 1e-6*math.Max(1, want.F[j]) {
			t.Errorf("%s: coefficient %v F %v, direct %v F %v", Names[j], fit.Coefficients[j], fit.F[j], want.Coefficients[j], want.F[j])
		}
	}
	if fit.Train != want.Train || fit.Held != want.Held || fit.VsRunning.Cycles != want.VsRunning.Cycles {
		t.Errorf("train %d held %d over %d cycles, direct %d %d over %d", fit.Train, fit.Held, fit.VsRunning.Cycles,
			want.Train, want.Held, want.VsRunning.Cycles)
	}
}

// regressDirect is Regress with the figures of selected, computed from
// the samples held in memory: two-pass means and deviations, the Gram
// matrix of the standardised rows, residuals and errors summed sample by
// sample, the paired differences summed per held-out cycle.
func regressDirect(samples []Sample, running Vector, selected [6]bool) Fit {
	var times []time.Time
	for _, s := range samples {
		if len(times) == 0 || !times[len(times)-1].Equal(s.Time) {
			times = append(times, s.Time)
		}
	}
	cut := times[int(float64(len(times))*(1-HeldOutShare))%len(times)]
	i, _ := slices.BinarySearchFunc(samples, cut, func(s Sample, t time.Time) int { return s.Time.Compare(t) })
	train, held := samples[:i], samples[i:]
	fit := Fit{Train: len(train), Held: len(held)}
	n := float64(len(train))
	var mean, sd Vector
	var ymean float64
	for _, s := range train {
		for j := range s.X {
			mean[j] += s.X[j] / n
		}
		ymean += s.Y / n
	}
	for _, s := range train {
		for j := range s.X {
			sd[j] += (s.X[j] - mean[j]) * (s.X[j] - mean[j]) / n
		}
	}
	full := selected
	for j := range sd {
		sd[j] = math.Sqrt(sd[j])
		fit.Constant[j] = sd[j] < MinSpread
	}
	solve := func(use [6]bool) (beta, std Vector, rss float64) {
		g := make([][]float64, 6)
		b := make([]float64, 6)
		for j := range g {
			g[j] = make([]float64, 6)
		}
		z := func(s Sample, j int) float64 {
			if !use[j] {
				return 0
			}
			return (s.X[j] - mean[j]) / sd[j]
		}
		for _, s := range train {
			for j := range 6 {
				b[j] += z(s, j) * (s.Y - ymean)
				for k := range 6 {
					g[j][k] += z(s, j) * z(s, k)
				}
			}
		}
		sol := nnls(g, b)
		for _, s := range train {
			r := s.Y - ymean
			for j := range sol {
				r -= sol[j] * z(s, j)
			}
			rss += r * r
		}
		for j := range sol {
			std[j] = sol[j]
			if use[j] {
				beta[j] = sol[j] / sd[j]
			}
		}
		return beta, std, rss
	}
	beta, std, rss := solve(full)
	var stdSum float64
	for j := range beta {
		fit.Scale += beta[j]
		stdSum += std[j]
	}
	fit.Intercept = ymean
	used := 0
	for j := range beta {
		fit.Coefficients[j] = beta[j] / fit.Scale
		fit.Standardised[j] = std[j] / stdSum
		fit.Intercept -= beta[j] * mean[j]
		if beta[j] > 0 {
			used++
		}
	}
	for j := range full {
		if full[j] {
			without := full
			without[j] = false
			_, _, r := solve(without)
			fit.F[j] = (r - rss) / (rss / float64(len(train)-used-1))
		} else if !fit.Constant[j] {
			with := full
			with[j] = true
			_, _, r := solve(with)
			fit.F[j] = (rss - r) / (r / float64(len(train)-used-2))
		}
	}
	var ml, my float64
	for _, s := range train {
		ml += dot(running, s.X) / n
		my += s.Y / n
	}
	var sxy, sxx float64
	for _, s := range train {
		sxy += (dot(running, s.X) - ml) * (s.Y - my)
		sxx += (dot(running, s.X) - ml) * (dot(running, s.X) - ml)
	}
	runScale := math.Max(0, sxy/sxx)
	runIntercept := my - runScale*ml
	rmse := func(ss []Sample, predict func(Sample) float64) float64 {
		var sum float64
		for _, s := range ss {
			sum += (predict(s) - s.Y) * (predict(s) - s.Y)
		}
		return math.Sqrt(sum / float64(len(ss)))
	}
	predict := func(s Sample) float64 { return fit.Intercept + fit.Scale*dot(fit.Coefficients, s.X) }
	predictRunning := func(s Sample) float64 { return runIntercept + runScale*dot(running, s.X) }
	fit.HeldRMSE = rmse(held, predict)
	fit.ConstantRMSE = rmse(held, func(Sample) float64 { return ymean })
	fit.HeldRelative = fit.HeldRMSE / fit.ConstantRMSE
	fit.RunningRMSE = rmse(held, predictRunning)
	var gains []float64
	for b := range GainBlocks {
		block := held[b*len(held)/GainBlocks : (b+1)*len(held)/GainBlocks]
		gains = append(gains, 1-rmse(block, predict)/rmse(block, predictRunning))
	}
	fit.GainMean, fit.GainSD = meanSD(gains)
	// Paired: each held-out cycle's sum of squared-error differences;
	// the mean per sample, and its standard error from the cycles'
	// spread, scaled by cycles per sample.
	compare := func(other func(Sample) float64) Comparison {
		var sums []float64
		for k, s := range held {
			if k == 0 || !s.Time.Equal(held[k-1].Time) {
				sums = append(sums, 0)
			}
			e, o := s.Y-predict(s), s.Y-other(s)
			sums[len(sums)-1] += e*e - o*o
		}
		m, sdev := meanSD(sums)
		c := float64(len(sums))
		return Comparison{Cycles: len(sums), Diff: m * c / float64(len(held)), SE: sdev / math.Sqrt(c) * c / float64(len(held))}
	}
	fit.VsRunning = compare(predictRunning)
	fit.VsConstant = compare(func(Sample) float64 { return ymean })
	return fit
}

// RegressSource keeps no sample: fitting 10,000 and 100,000 samples (of
// 8 servers a cycle, made on the fly) allocates the same few kilobytes
// but for the count of each cycle time that places the split (8 bytes,
// and its slice's growth by doubling: at most 64 bytes a cycle in all).
// Keeping the samples would take 64 bytes each, 512 a cycle.
func TestRegressSourceBoundedMemory(t *testing.T) {
	allocated := func(cycles int) uint64 {
		src := func(fn func(Sample)) error {
			rng := rand.New(rand.NewPCG(1, 2))
			t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
			for c := range cycles {
				for range 8 {
					var x Vector
					for j := range x {
						x[j] = 0.2 + rng.Float64()
					}
					fn(Sample{Time: t0.Add(time.Duration(c) * time.Second), Service: "s", Server: "r",
						X: x, Y: 0.5*x[1] + 0.3*x[4] + 0.2*x[0] + 0.05*rng.NormFloat64()})
				}
			}
			return nil
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := RegressSource(src, Vector{0.1, 0.3, 0.1, 0.1, 0.3, 0.1}, RegressOptions{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(10000/8), allocated(100000/8)
	perCycle := float64(large-small) / float64(100000/8-10000/8)
	t.Logf("10,000 samples: %d bytes allocated; 100,000: %d (%.1f bytes per added cycle)", small, large, perCycle)
	if perCycle > 64 || small > 64<<10 {
		t.Errorf("allocated %d bytes for 10,000 samples, %d for 100,000: %.1f bytes per added cycle time, want at most 64",
			small, large, perCycle)
	}
}
