package monitor

import (
	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"math"
	"time"
)

// Inputs are one real server's normalised inputs for one interval, each on
// the scale 0 = idle, 1 = fully loaded, above 1 = overloaded.
type Inputs struct {
	Input    float64 // share of new connections relative to the service mean
	CPU      float64
	Memory   float64
	Disk     float64
	Response float64
	Process  float64
}

// AggregateLoad combines the inputs with the coefficients R1..R6:
//
//	load = R1·INPUT + R2·CPU + R3·MEMORY + R4·DISK + R5·RESPONSE + R6·PROCESS
func AggregateLoad(in Inputs, c Coefficients) float64 {
	return c.Input*in.Input + c.CPU*in.CPU + c.Memory*in.Memory +
		c.Disk*in.Disk + c.Response*in.Response + c.Process*in.Process
}

// NeutralInput is the INPUT of a server when the share of new connections
// cannot be measured: no traffic reached the service in the interval, or the
// server has no earlier counter reading yet. It is the value every server has
// when traffic is perfectly even, so missing data neither raises nor lowers
// a server against the others.
const NeutralInput = 1.0

// InputLoads computes INPUT_i = N_i / (ΣN_j / n) for the servers in rotation,
// where N_i is the number of new connections server i received in the
// interval (from counter deltas). A negative N_i means "unknown" (no earlier
// reading): that server gets NeutralInput and is left out of the mean. When
// no known server received any connection, every server gets NeutralInput.
// The result is never NaN or infinite.
func InputLoads(newConns []int64) []float64 {
	out := make([]float64, len(newConns))
	var sum int64
	known := 0
	for _, n := range newConns {
		if n >= 0 {
			sum += n
			known++
		}
	}
	for i, n := range newConns {
		if n < 0 || sum == 0 {
			out[i] = NeutralInput
			continue
		}
		mean := float64(sum) / float64(known)
		out[i] = float64(n) / mean
	}
	return out
}

// ResponseLoad normalises a measured response time against the reference
// time that counts as fully loaded: RESPONSE = rtt / reference.
func ResponseLoad(rtt, reference time.Duration) float64 {
	if reference <= 0 || rtt < 0 {
		return 0
	}
	return float64(rtt) / float64(reference)
}

// NextWeight applies the LVS dynamic-feedback formula to the controller's
// current weight w:
//
//	w' = w + Gain·∛(Target − load)
//
// bounded to [Min, Scale·defaultWeight] (and to the kernel's maximum). At
// load = Target the weight is unchanged; above it the weight falls, below it
// the weight rises. The result is fractional: the controller keeps it between
// intervals so that small steps accumulate; RoundWeight turns it into the
// integer written to the kernel.
func NextWeight(w, load float64, defaultWeight int, p WeightParams) float64 {
	next := w + p.Gain*math.Cbrt(p.Target-load)
	return clamp(next, float64(p.Min), maxWeightFor(defaultWeight, p))
}

// maxWeightFor returns SCALE·default, bounded by the kernel's maximum.
func maxWeightFor(defaultWeight int, p WeightParams) float64 {
	return math.Min(p.Scale*float64(defaultWeight), 65535)
}

func clamp(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return lo
	}
	return math.Max(lo, math.Min(hi, v))
}

// RoundWeight rounds a controller weight to the integer written to the
// kernel (half away from zero).
func RoundWeight(w float64) int { return int(math.Round(w)) }

// PassesThreshold reports whether a change from the kernel's current weight
// to next is large enough to write: |next − current| > threshold.
func PassesThreshold(current, next, threshold int) bool {
	d := next - current
	if d < 0 {
		d = -d
	}
	return d > threshold
}

// DirectorOnlyLoad is the aggregate load of a server whose agent is stale:
// only the inputs the director measures itself (INPUT and RESPONSE) count,
// with their coefficients renormalised to sum to 1. ok is false when both
// coefficients are 0: there is then nothing to compute a load from.
func DirectorOnlyLoad(in Inputs, c Coefficients) (load float64, ok bool) {
	sum := c.Input + c.Response
	if sum <= 0 {
		return 0, false
	}
	return (c.Input*in.Input + c.Response*in.Response) / sum, true
}

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

// SmoothCapacity folds the n-th observation obs (n ≥ 1) into the smoothed
// estimate prev with the bias-corrected geometric decay of the adaptive
// prediction document (algorithm.md §3):
//
//	U_{n} = ((1 − α)·O + (α − αⁿ)·U_{n−1}) / (1 − αⁿ)
//
// α = 0 uses the last observation only; the first observation is taken as
// it is.
func SmoothCapacity(prev float64, n int, obs, alpha float64) float64 {
	if n <= 1 || alpha == 0 {
		return obs
	}
	an := math.Pow(alpha, float64(n))
	return ((1-alpha)*obs + (alpha-an)*prev) / (1 - an)
}

// MinCapacityBusy is the CPU busy fraction below which a server's capacity
// is not measured: connections ÷ a small busy fraction is noise (a 1 s
// window of 10 ms ticks reads 0.05 ± 0.01, i.e. ±20 %; a few heavy
// requests swing a lightly loaded server's CPU), and such a server has
// capacity to spare. Measured in the simulator: at 0.05 and 0.1 light-load
// noise wrote 1.2–2.3 times per server per minute under sed; at 0.2 (and
// confirm 3) at most 0.19 under sed and 0.93 on any scenario
// (docs/results.md).
const MinCapacityBusy = 0.2

// CapacityWeight is the capacity controller's weight for a server with
// smoothed capacity est when the most capable server of the service has
// maxEst: in proportion, the most capable at resolution, never below min.
func CapacityWeight(est, maxEst float64, resolution, min int) int {
	if !(maxEst > 0) || !(est > 0) {
		return min
	}
	return max(min, RoundWeight(float64(resolution)*est/maxEst))
}

// PassesBand reports whether the capacity controller writes a change from
// current to next: it moves by more than band × current.
func PassesBand(current, next int, band float64) bool {
	return math.Abs(float64(next-current)) > band*float64(current)
}

// ServedConnections is the number of connections a server served in an
// interval: the new connections it received less the growth of its active
// connections (those still queued or in progress). At saturation its
// arrivals exceed what it serves; this counts what it served.
func ServedConnections(newConns int64, activeDelta int) float64 {
	return max(0, float64(newConns)-float64(activeDelta))
}

// UpdateCapacity folds the n-th capacity observation obs (n ≥ 1;
// connections served per unit of CPU) of a server busy cpu into its
// estimate est, when its service's median busy fraction is medianCPU:
//
//   - saturated (cpu ≥ p.Saturation), an observation above the estimate is
//     not taken: a saturated server's count is bounded by what it was sent,
//     so it cannot show more capacity;
//   - saturated alone (SaturatedAlone), an observation below the estimate
//     is taken at once (lost capacity: bad news is not smoothed in);
//   - otherwise the observation is smoothed in (SmoothCapacity, p.Smoothing).
func UpdateCapacity(est float64, n int, obs, cpu, medianCPU float64, p WeightParams) float64 {
	if n > 1 && p.Saturation > 0 && cpu >= p.Saturation && obs > est {
		return est
	}
	if n > 1 && SaturatedAlone(cpu, medianCPU, p.Saturation) && obs < est {
		return obs
	}
	return SmoothCapacity(est, n, obs, p.Smoothing)
}

// SaturatedAlone reports whether a server is saturated while its service as
// a whole is not: its CPU busy fraction is at least sat, and the median of
// the service's servers is below sat. Such a server has lost capacity (a
// background job, a degraded disk), and the capacity controller takes its
// lower estimate at once instead of smoothing it in; when every server is
// busy (a burst of traffic) the estimates stay smoothed. sat = 0 disables it.
func SaturatedAlone(cpu, medianCPU, sat float64) bool {
	return sat > 0 && cpu >= sat && medianCPU < sat
}

// CapacityPeer is one server's standing in its service for the anchored
// capacity controller.
type CapacityPeer struct {
	// Known: the server has an estimate (or, idle, a lower bound).
	Known bool
	// PerWeight is the server's capacity estimate ÷ its default weight
	// (0 is a real value: a saturated server that served nothing).
	PerWeight float64
	// Idle: the server was busy less than MinCapacityBusy this interval;
	// PerWeight is then only a lower bound (its smoothed connections
	// served ÷ MinCapacityBusy), and the server has capacity to spare.
	Idle bool
	// Spare: idle and busy less than half MinCapacityBusy: clearly
	// unloaded, the server goes back to its default weight. An idle
	// server that is not Spare keeps its weight (hysteresis).
	Spare bool
}

// AnchorFactors returns each server's capacity per unit of default weight
// as a multiple of its service's median (the input of AnchoredWeight), NaN
// for a server with no estimate or no decision (its weight is kept). A
// Spare server's factor is 1: it has capacity to spare, whatever its
// estimate says; another idle server's is NaN. An idle server's lower
// bound counts towards the median; with an idle server in the service the
// median is a lower bound too, so a factor above 1 proves nothing and is
// cut to 1, while a busy server below it is below the true median as well.
func AnchorFactors(peers []CapacityPeer) []float64 {
	var known []float64
	lowerBound := false
	for _, p := range peers {
		if p.Known {
			known = append(known, p.PerWeight)
		}
		lowerBound = lowerBound || p.Idle
	}
	ref := median(known)
	out := make([]float64, len(peers))
	for i, p := range peers {
		out[i] = math.NaN()
		switch {
		case p.Spare:
			out[i] = 1
		case p.Idle:
		case p.Known && ref > 0:
			out[i] = p.PerWeight / ref
			if lowerBound {
				out[i] = math.Min(out[i], 1)
			}
		}
	}
	return out
}

// AnchorState is the anchored capacity controller's memory of one server.
type AnchorState struct {
	// Deviating: the server is off its default weight.
	Deviating bool
	// Beyond counts the consecutive intervals a server at its default
	// weight has been beyond the anchor.
	Beyond int
}

// AnchoredWeight is the anchored capacity controller's weight for a server
// of default weight def whose capacity per unit of default weight is f
// times its service's median, and the server's next state. The server
// stays at def while f is within p.Anchor of 1; it leaves def when
// |f − 1| > p.Anchor for p.Confirm intervals in a row — at once when it is
// below the median and saturatedAlone (SaturatedAlone: it has lost
// capacity) — and returns when |f − 1| < p.Anchor/2 (hysteresis: noise at
// the edge does not flap). Off def its weight is def·f, never below p.Min
// nor above ipvs.MaxWeight.
func AnchoredWeight(def int, f float64, saturatedAlone bool, st AnchorState, p WeightParams) (int, AnchorState) {
	d := math.Abs(f - 1)
	switch {
	case st.Deviating && d < p.Anchor/2:
		st = AnchorState{}
	case !st.Deviating && d > p.Anchor:
		st.Beyond++
		if (saturatedAlone && f < 1) || st.Beyond >= p.Confirm {
			st = AnchorState{Deviating: true}
		}
	case !st.Deviating:
		st.Beyond = 0
	}
	if !st.Deviating {
		return def, st
	}
	return int(clamp(math.Round(float64(def)*f), float64(p.Min), ipvs.MaxWeight)), st
}

// IntervalCPU is the CPU busy fraction a cycle uses for a server: the mean
// over the time since the previous poll, from the agent's running totals
// (agent.BusyBetween), when they cover at most maxSpan seconds; otherwise
// (no earlier totals, an agent restart or an old agent without totals, the
// same sample twice, a gap after failed polls) the agent's last window,
// last. span is the seconds the mean covers, 0 for last.
//
// The connection counts of INPUT and of the capacity estimate are counted
// over the same interval, so the mean lines the two up; the agent's own
// window (1 s by default) is a fifth of a 5 s interval and noisier.
func IntervalCPU(prev, cur *agent.CPUTime, last, maxSpan float64) (cpu, span float64) {
	busy, ok := agent.BusyBetween(prev, cur)
	if !ok {
		return last, 0
	}
	span = cur.SampledSeconds - prev.SampledSeconds
	if span > maxSpan {
		return last, 0
	}
	return busy, span
}
