package policy

import (
	"math"
	"time"
)

// ShouldFreeze reports whether a service's weights must be frozen (fail
// static): more than share of its eligible servers failed their probe in the
// same cycle, so the director itself is probably cut off.
func ShouldFreeze(unreachable, eligible int, share float64) bool {
	return eligible > 0 && float64(unreachable) > share*float64(eligible)
}

// SlowStartFactor is the share of its weight a server gets elapsed after it
// came back (from down, or undrained): a linear ramp from floor to 1 over
// window. window ≤ 0 disables slow start (factor 1).
func SlowStartFactor(elapsed, window time.Duration, floor float64) float64 {
	if window <= 0 || elapsed >= window {
		return 1
	}
	return math.Max(floor, float64(max(elapsed, 0))/float64(window))
}
