package sim

import "math"

// IdealShareTolerance is how exact the ideal-weights counterfactual is:
// every server's weight share within 0.1 % (relative) of its capacity
// share.
const IdealShareTolerance = 0.001

// MaxKernelWeight is the largest weight IPVS takes (ipvsadm -w 0..65535).
const MaxKernelWeight = 65535

// idealIntegerWeights returns the smallest integer weights proportional to
// caps within IdealShareTolerance: for a largest weight m = 1, 2, … up to
// MaxKernelWeight, each weight is m·capacity/largest capacity rounded, and
// the first m whose shares are all within the tolerance wins. A capacity
// of 0 (down, drained) gets weight 0; a positive capacity never gets 0.
// When no m is exact enough (capacities more than ~65535:1 apart), the
// weights at MaxKernelWeight are returned, with 1 as the floor.
//
// Why the smallest and not simply the largest: the kernel's wrr walks its
// current weight down from the largest weight in steps of the weights'
// gcd, so large weights with a small gcd send long runs of connections in
// a row to the heaviest server (65535 and 32768 make 32767 picks of the
// first one in a row). The smallest exact weights keep wrr's interleaving
// what an operator writing those proportions would get.
func idealIntegerWeights(caps []float64) []int {
	w := make([]int, len(caps))
	top, sum := 0.0, 0.0
	for _, c := range caps {
		if c > 0 {
			top = math.Max(top, c)
			sum += c
		}
	}
	if top == 0 {
		return w
	}
	for m := 1; m <= MaxKernelWeight; m++ {
		if scaledWeights(w, caps, top, m, 0) && sharesWithin(w, caps, sum, IdealShareTolerance) {
			return w
		}
	}
	scaledWeights(w, caps, top, MaxKernelWeight, 1)
	return w
}

// scaledWeights fills w with round(m·caps/top), at least floor for a
// positive capacity; it reports false when a positive capacity rounds to 0.
func scaledWeights(w []int, caps []float64, top float64, m, floor int) bool {
	ok := true
	for k, c := range caps {
		if c <= 0 {
			w[k] = 0
			continue
		}
		w[k] = max(floor, int(math.Round(float64(m)*c/top)))
		if w[k] == 0 {
			ok = false
		}
	}
	return ok
}

// sharesWithin reports whether every positive capacity's weight share is
// within tol (relative) of its capacity share.
func sharesWithin(w []int, caps []float64, capSum, tol float64) bool {
	ws := 0
	for _, x := range w {
		ws += x
	}
	if ws == 0 {
		return false
	}
	for k, c := range caps {
		if c <= 0 {
			continue
		}
		want := c / capSum
		if math.Abs(float64(w[k])/float64(ws)-want) > tol*want {
			return false
		}
	}
	return true
}
