package sim

import (
	"math"
	"slices"
)

// The recovery target: after a capacity event, how long until response
// times are back to what the ideal weights give on the same requests.
const (
	// RecoveryWindow is the sliding window of the p99 compared, seconds.
	RecoveryWindow = 10.0
	// RecoveryStep is the spacing of the windows' ends, seconds: the
	// resolution of the recovery time.
	RecoveryStep = 1.0
	// RecoveryBand is how close counts as recovered: the policy's window
	// p99 at most 1.2× the counterfactual's same window.
	RecoveryBand = 1.2
	// RecoveryHold is how long the p99 must stay in the band, seconds.
	RecoveryHold = 30.0
)

// slidingP99 is the p99 response time (failures as +Inf, responseTime) of
// the requests arriving in each window [t−win, t), for t = win, win+step, …
// up to end; NaN for a window without arrivals. arrive is ascending and
// win a multiple of step: requests are sorted once per step-long bucket,
// and each window's p99 is read off the tails of its buckets.
func slidingP99(arrive []float64, resp []float32, win, step, end float64) []float64 {
	nb := int(math.Ceil(end/step - 1e-9))
	bw := int(math.Round(win / step))
	if nb <= 0 || bw <= 0 {
		return nil
	}
	buckets := make([][]float64, nb)
	for i, t := range arrive {
		b := int(t / step)
		if b < 0 || b >= nb {
			continue
		}
		buckets[b] = append(buckets[b], responseTime(resp[i]))
	}
	for _, b := range buckets {
		slices.Sort(b)
	}
	var out []float64
	pos := make([]int, bw)
	for n := 0; n+bw <= nb; n++ {
		win := buckets[n : n+bw]
		total := 0
		for j, b := range win {
			total += len(b)
			pos[j] = len(b) - 1
		}
		if total == 0 {
			out = append(out, math.NaN())
			continue
		}
		// The nearest-rank p99 is the fromTop-th largest (0-based).
		idx := max(0, min(total-1, int(math.Ceil(0.99*float64(total)))-1))
		fromTop := total - 1 - idx
		var v float64
		for range fromTop + 1 {
			best := -1
			for j, b := range win {
				if pos[j] >= 0 && (best < 0 || b[pos[j]] > win[best][pos[best]]) {
					best = j
				}
			}
			v = win[best][pos[best]]
			pos[best]--
		}
		out = append(out, v)
	}
	return out
}

// inBand reports whether a window's p99 p is within RecoveryBand of the
// counterfactual's q. A window without requests is in the band, and so is
// any p when q is +Inf (the ideal weights lost more than 1 % there too).
func inBand(p, q float64) bool {
	if math.IsNaN(p) || math.IsNaN(q) {
		return true
	}
	return p <= RecoveryBand*q
}

// recoveryTime is the recovery time after an event at te, judged until
// tEnd, from two sliding p99 series — the policy's p and the ideal-weights
// counterfactual's q, value n for the window ending at t0 + n·dt: the
// seconds from the event to the end of the last window that is out of the
// band (inBand) before RecoveryHold seconds of windows in it, or before
// every window up to tEnd is in it. 0 when no window ending after the event
// is out of the band before such a stretch (the p99 never left it); +Inf
// when the last window ending by tEnd is out of it (it never came back);
// NaN when no window ends in (te, tEnd].
func recoveryTime(p, q []float64, t0, dt, te, tEnd float64) float64 {
	from := te // the end of the last window out of the band
	seen, lastIn := false, false
	for n := range min(len(p), len(q)) {
		t := t0 + float64(n)*dt
		if t <= te+1e-9 {
			continue
		}
		if t > tEnd+1e-9 {
			break
		}
		seen = true
		lastIn = inBand(p[n], q[n])
		if !lastIn {
			from = t
			continue
		}
		if t-from >= RecoveryHold-1e-9 {
			return from - te
		}
	}
	switch {
	case !seen:
		return math.NaN()
	case lastIn:
		return from - te
	}
	return math.Inf(1)
}

// recoveries is res's recovery time per event against the counterfactual
// run ideal (same scenario, seed and scheduler): NaN for events that change
// no capacity.
func recoveries(res, ideal *Result) []float64 {
	out := nanPerEvent(len(res.spans))
	for i, sp := range res.spans {
		if math.IsNaN(sp[0]) {
			continue
		}
		out[i] = recoveryTime(res.p99w, ideal.p99w, RecoveryWindow, RecoveryStep, sp[0], sp[1])
	}
	return out
}

// pairRecovery fills Result.Recovery of every kernel policy's run from the
// ideal-weights run of the same scenario, seed and scheduler among results
// (index-aligned with scenarios); runs without one keep NaN.
func pairRecovery(results []Result, scenarios []*Scenario) {
	type key struct {
		sc    *Scenario
		seed  uint64
		sched string
	}
	ideal := map[key]int{}
	for i, r := range results {
		if r.IsKernel && r.Policy == PolIdeal {
			ideal[key{scenarios[i], r.Seed, r.Scheduler}] = i
		}
	}
	for i := range results {
		r := &results[i]
		if !r.IsKernel {
			continue
		}
		if j, ok := ideal[key{scenarios[i], r.Seed, r.Scheduler}]; ok {
			r.Recovery = recoveries(r, &results[j])
		}
	}
}
