package tune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"lvs-feedback/history"
)

// synthetic returns the history of one service of n servers over cycles
// cycles whose outcome follows truth: the active connections at t+1 per
// unit of weight are 1000·(0.2 + truth·inputs(t)) times a noise factor of
// standard deviation noise. The inputs are independent, uniform in
// [0.2, 1.2); memory and process are drawn but, where truth gives them 0,
// carry no information. Weights differ between servers.
func synthetic(truth Vector, n, cycles int, noise float64, seed uint64) []history.Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	var recs []history.Record
	prev := make([]float64, n) // the outcome each server's last inputs cause
	for c := 0; c < cycles; c++ {
		for i := 0; i < n; i++ {
			weight := 5 + i%3*5
			in := history.Inputs{Input: 0.2 + rng.Float64(), CPU: 0.2 + rng.Float64(), Memory: 0.2 + rng.Float64(),
				Disk: 0.2 + rng.Float64(), Response: 0.2 + rng.Float64(), Process: 0.2 + rng.Float64()}
			active := 0
			if c > 0 {
				active = int(math.Round(prev[i] * float64(weight)))
			}
			recs = append(recs, history.Record{V: history.SchemaVersion, Time: t0.Add(time.Duration(c) * 5 * time.Second),
				Service: "192.0.2.10:80/tcp", Server: fmt.Sprintf("198.51.100.%d:80", 10+i), State: "managed",
				WeightAfter: weight, ActiveConns: active, Inputs: &in})
			x := Vector{in.Input, in.CPU, in.Memory, in.Disk, in.Response, in.Process}
			prev[i] = 1000 * (0.2 + dot(truth, x)) * (1 + noise*rng.NormFloat64())
		}
	}
	return recs
}

// Recovery of known coefficients: with 5 % noise on the outcome, 8
// servers and 500 cycles (the outcome divided by the service mean, as the
// history gives it), every fitted coefficient is within 0.05 of the true
// one, the stepwise selection keeps exactly the figures with a true
// coefficient above 0, and the fit predicts the held-out time better than
// the default coefficients and a constant, beyond the uncertainty.
func TestRegressRecoversKnownCoefficients(t *testing.T) {
	const tolerance = 0.05
	running := Vector{0.1, 0.3, 0.1, 0.1, 0.3, 0.1}
	for _, truth := range []Vector{
		{0.2, 0.5, 0, 0, 0.3, 0},
		{0, 0.1, 0, 0.6, 0, 0.3},
		{0.5, 0, 0.5, 0, 0, 0},
	} {
		t.Run(fmt.Sprint(truth), func(t *testing.T) {
			samples := SamplesFromHistory(synthetic(truth, 8, 500, 0.05, 7))
			if want := 8 * 499; len(samples) != want {
				t.Fatalf("%d samples, want %d (every consecutive pair)", len(samples), want)
			}
			fit, err := Regress(samples, running, RegressOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			for j, c := range fit.Coefficients {
				sum += c
				if math.Abs(c-truth[j]) > tolerance {
					t.Errorf("%s = %.3f, want %.2f ± %.2f", Names[j], c, truth[j], tolerance)
				}
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("coefficients sum to %v", sum)
			}
			for j := range truth {
				if fit.Selected[j] != (truth[j] > 0) || (fit.F[j] > fit.FCritical[j]) != (truth[j] > 0) {
					t.Errorf("%s: selected %v, partial F %.1f against %.2f; want selected exactly where the truth is positive",
						Names[j], fit.Selected[j], fit.F[j], fit.FCritical[j])
				}
			}
			if fit.Held < 700 || fit.Train < 3000 || fit.HeldRelative >= 1 || !(fit.GainMean > 0) ||
				!fit.VsRunning.Better || !fit.VsConstant.Better {
				t.Errorf("train %d held %d, held-out RMSE %.4f (relative %.3f), running %.4f, gain %.3f ± %.3f",
					fit.Train, fit.Held, fit.HeldRMSE, fit.HeldRelative, fit.RunningRMSE, fit.GainMean, fit.GainSD)
			}
			t.Logf("fit %.3f F %.0f held-out RMSE %.4f relative %.3f running %.4f gain %.3f ± %.3f",
				fit.Coefficients, fit.F, fit.HeldRMSE, fit.HeldRelative, fit.RunningRMSE, fit.GainMean, fit.GainSD)
		})
	}
}

// Too little history is an error that says how much there was.
func TestRegressNeedsSamples(t *testing.T) {
	if _, err := Regress(nil, Vector{}, RegressOptions{}); err == nil {
		t.Fatal("no error for no samples")
	}
	samples := SamplesFromHistory(synthetic(Vector{1}, 2, 6, 0, 1))
	if _, err := Regress(samples, Vector{}, RegressOptions{}); err == nil {
		t.Fatalf("no error for %d samples", len(samples))
	}
}

// Pairs need the next cycle, a managed server and a weight; the outcome
// is relative to the service mean.
func TestSamplesFromHistory(t *testing.T) {
	recs := synthetic(Vector{0, 1}, 3, 3, 0, 1)
	recs[3].State = "drained" // server 0 at cycle 1: neither (0,1) nor (1,2) pairs for it
	samples := SamplesFromHistory(recs)
	if len(samples) != 2*3-2 {
		t.Fatalf("%d samples, want 4: %+v", len(samples), samples)
	}
	for c := 0; c < 2; c++ {
		a, b := samples[2*c], samples[2*c+1]
		if a.Server == "198.51.100.10:80" || b.Server == "198.51.100.10:80" || !a.Time.Equal(b.Time) {
			t.Errorf("cycle %d: samples of %s and %s at %v and %v", c, a.Server, b.Server, a.Time, b.Time)
		}
		// Relative to their mean: the two outcomes of a cycle sum to 2.
		if math.Abs(a.Y+b.Y-2) > 1e-9 {
			t.Errorf("cycle %d: outcomes sum to %v, want 2", c, a.Y+b.Y)
		}
	}
}

func TestRounded(t *testing.T) {
	for _, c := range []struct{ in, want Vector }{
		{Vector{0.333, 0.333, 0.334}, Vector{0.33, 0.33, 0.34}},
		{Vector{1, 1, 1}, Vector{0.34, 0.33, 0.33}},
		{Vector{-1, 2}, Vector{0, 1}},
		{Vector{}, Vector{0.17, 0.17, 0.17, 0.17, 0.16, 0.16}},
	} {
		if got := c.in.Rounded(); got != c.want {
			t.Errorf("Rounded(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// A figure that barely moves — the host's root filesystem every server
// shares, 0.2 ± 0.0002 — is constant: left out with 0 in every column,
// not given a large coefficient on its own tiny scale, and the others are
// still recovered.
func TestRegressNearConstantFigure(t *testing.T) {
	truth := Vector{0.2, 0.5, 0, 0, 0.3, 0}
	samples := SamplesFromHistory(synthetic(truth, 8, 500, 0.05, 7))
	for i := range samples {
		samples[i].X[3] = 0.2 + 0.0002*math.Sin(float64(i)) // disk: sd ≈ 0.00014
	}
	fit, err := Regress(samples, Vector{0.1, 0.3, 0.1, 0.1, 0.3, 0.1}, RegressOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !fit.Constant[3] || fit.Coefficients[3] != 0 || fit.Standardised[3] != 0 {
		t.Errorf("disk: constant %v, coefficient %v, standardised %v; want constant, 0, 0",
			fit.Constant[3], fit.Coefficients[3], fit.Standardised[3])
	}
	for j, c := range fit.Coefficients {
		if math.Abs(c-truth[j]) > 0.05 {
			t.Errorf("%s = %.3f, want %.2f ± 0.05", Names[j], c, truth[j])
		}
	}
}
