package policy

import (
	"fmt"
	"math"
	"slices"

	"lvs-feedback/ipvs"
)

// SmoothCapacity folds the n-th observation obs (n ≥ 1) into the smoothed
// estimate prev with the bias-corrected geometric decay of the adaptive
// prediction document (shared/reference/algorithm.md, section 3):
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

// DefaultLight is weight.light's default, seed 000's TH1 (docs/developer/design.md,
// "TH1 and TH2"): a server whose bottleneck (Busy) is less busy than this
// is lightly loaded. Its capacity is not measured — connections ÷ a small
// busy fraction is noise (a 1 s window of 10 ms ticks reads 0.05 ± 0.01,
// i.e. ±20 %; a few heavy requests swing a lightly loaded server's CPU) —
// and it has capacity to spare; while every server of a service is that
// light, nothing is decided (Light). Lower thresholds turn light-load
// noise into weight writes (docs/results/notebook.md has the measurements).
const DefaultLight = 0.2

// The rules that hold a weight, named in CapacityStep.Rule, the reasons
// and explain: seed 000's two thresholds.
const (
	// RuleLight (TH1, weight.light): every server of the service is
	// lightly loaded, so nothing is decided (Light).
	RuleLight = "TH1 light"
	// RuleClose (TH2, weight.anchor): the server's capacity per unit of
	// default weight is close to its service's median, so it keeps its
	// default weight (Close).
	RuleClose = "TH2 close"
)

// light is TH1's threshold: p.Light, or DefaultLight when the parameters
// were built in code without it (the configuration refuses 0).
func (p WeightParams) light() float64 {
	if p.Light > 0 {
		return p.Light
	}
	return DefaultLight
}

// Light is seed 000's TH1: it reports whether every busy fraction in busies
// (each server's bottleneck, Busy, for the servers of a service with agent
// figures) is below light. Then every server has capacity to spare and
// none is measured: there is nothing to decide, and the capacity
// controller decides nothing. No figures at all is not light (nothing is
// known).
func Light(busies []float64, light float64) bool {
	if len(busies) == 0 {
		return false
	}
	for _, b := range busies {
		if !(b < light) {
			return false
		}
	}
	return true
}

// Close is seed 000's TH2 for one server: it reports whether its capacity
// per unit of default weight, f times its service's median, is within
// width of the median (|f − 1| ≤ width). A server at its default weight
// that is close keeps it (AnchoredWeight; width is anchorWidth's).
func Close(f, width float64) bool {
	return math.Abs(f-1) <= width
}

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
// connections served per unit of busy fraction) of a server busy busy
// (its bottleneck's busy fraction, Busy) into its estimate est, when its
// service's median busy fraction is medianBusy:
//
//   - saturated (busy ≥ p.Saturation), an observation above the estimate is
//     not taken: a saturated server's count is bounded by what it was sent,
//     so it cannot show more capacity;
//   - saturated alone (SaturatedAlone), an observation significantly below
//     the estimate (SignificantLoss, with noise the variance of an
//     observation's logarithm) is taken at once (lost capacity: bad news
//     is not smoothed in) when it is confirmed: it rests on at least
//     minLossCount connections served, or the interval before showed the
//     same — one single-core interval that a few very long requests
//     filled shows it as often as a real loss does;
//   - otherwise the observation is smoothed in (SmoothCapacity, p.Smoothing).
func UpdateCapacity(est float64, n int, obs, busy, medianBusy, noise float64, confirmed bool, p WeightParams) float64 {
	if n > 1 && p.Saturation > 0 && busy >= p.Saturation && obs > est {
		return est
	}
	if n > 1 && confirmed && SaturatedAlone(busy, medianBusy, p.Saturation) && SignificantLoss(obs, est, noise) {
		return obs
	}
	return SmoothCapacity(est, n, obs, p.Smoothing)
}

// SignificantLoss reports whether the observation obs is below the
// estimate est by more than Significance standard deviations of an
// observation (noise is the variance of its logarithm; 0 until known: any
// loss counts). A single-core server that a few heavy requests saturate for
// an interval serves fewer connections per unit of busy for no lasting
// reason.
func SignificantLoss(obs, est, noise float64) bool {
	if !(obs < est) {
		return false
	}
	return obs <= 0 || math.Log(est/obs) > lossSignificance*math.Sqrt(noise)
}

// SaturatedAlone reports whether a server is saturated while its service as
// a whole is not: its busy fraction (its bottleneck's, Busy) is at least
// sat, and the median of the service's servers is below sat. Such a server
// has lost capacity (a background job, a degraded disk), and the capacity
// controller takes its lower estimate at once instead of smoothing it in;
// when every server is busy (a burst of traffic) the estimates stay
// smoothed. sat = 0 disables it.
func SaturatedAlone(busy, medianBusy, sat float64) bool {
	return sat > 0 && busy >= sat && medianBusy < sat
}

// Significance is how many standard errors of its estimate a server's
// capacity must stray before the anchored controller moves its weight,
// and a weight it moved must change before it is written: an estimate
// from a few heavy requests (a single-core server, a heavy-tailed demand)
// wanders further than the anchor with nothing changed.
const Significance = 2.0

// minLossCount is how many connections served a saturated-alone loss must
// rest on to be taken in its first interval: a count of c has a relative
// standard deviation of about 1/√c (0.22 at 20), and below that a few long
// requests fill a single-core server's interval as often as a real loss
// does. Tuned on the training family (10 and 20 tried; 20 kept).
const minLossCount = 20

// lossSignificance is Significance for one observation: a capacity
// observation's distribution has a long low tail (an interval that a few
// very long requests filled), so one alone must be further off.
const lossSignificance = 3.0

// noiseSmoothing is the decay of the observation noise's average: slower
// than the estimate's, so that the noise is known over about ten
// intervals.
const noiseSmoothing = 0.9

// ObservationNoise folds the n-th pair of consecutive capacity
// observations (n ≥ 1; obs after prev) into noise, the variance of an
// observation's logarithm: half the square of the difference of their
// logarithms (successive differences, so that a lasting change of capacity
// adds to it once, not for every interval until the estimate catches up).
// From the fourth on a difference is capped at three standard deviations
// of the noise known so far.
func ObservationNoise(noise float64, n int, obs, prev float64) float64 {
	if !(obs > 0) || !(prev > 0) {
		return noise
	}
	dev2 := math.Pow(math.Log(obs/prev), 2) / 2
	if n > 3 {
		dev2 = math.Min(dev2, 9*noise)
	}
	return SmoothCapacity(noise, n, dev2, noiseSmoothing)
}

// EstimateError is the relative standard error of a capacity estimate
// smoothed with smoothing from observations whose logarithm has variance
// noise: an exponential average of independent observations has variance
// (1 − α)/(1 + α) of one.
func EstimateError(noise, smoothing float64) float64 {
	return math.Sqrt(noise * (1 - smoothing) / (1 + smoothing))
}

// CapacityPeer is one server's standing in its service for the anchored
// capacity controller.
type CapacityPeer struct {
	// Known: the server has an estimate (or, idle, a lower bound).
	Known bool
	// PerWeight is the server's capacity estimate ÷ its default weight
	// (0 is a real value: a saturated server that served nothing).
	PerWeight float64
	// Idle: the server was busy less than weight.light (TH1) this
	// interval; PerWeight is then only a lower bound (its smoothed
	// connections served ÷ weight.light), and the server has capacity to
	// spare.
	Idle bool
	// Spare: idle and busy less than half weight.light: clearly
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
	return anchorFactorsInto(make([]float64, len(peers)), new([]float64), peers)
}

// anchorFactorsInto is AnchorFactors written to out (len(peers) long),
// with *scratch reused for the median.
func anchorFactorsInto(out []float64, scratch *[]float64, peers []CapacityPeer) []float64 {
	known := (*scratch)[:0]
	for _, p := range peers {
		if p.Known {
			known = append(known, p.PerWeight)
		}
	}
	lowerBound := medianIsLowerBound(peers)
	*scratch = known
	ref := median(known)
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

// medianIsLowerBound reports whether the service's median in AnchorFactors
// is only a lower bound: some server is lightly loaded (Idle), and its
// figure is a lower bound of its capacity.
func medianIsLowerBound(peers []CapacityPeer) bool {
	for _, p := range peers {
		if p.Idle {
			return true
		}
	}
	return false
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
// times its service's median, known with relative standard error stderr,
// and the server's next state. The server stays at def while f is within
// max(p.Anchor, Significance·stderr) of 1; it leaves def when beyond that
// for p.Confirm intervals in a row — at once when it is more than p.Anchor
// below the median and saturatedAlone (SaturatedAlone: it has lost
// capacity) — and returns when |f − 1| < max(p.Anchor/2, stderr)
// (hysteresis: noise at the edge does not flap). Off def its weight is
// def·f, never below p.Min nor above ipvs.MaxWeight.
func AnchoredWeight(def int, f, stderr float64, saturatedAlone bool, st AnchorState, p WeightParams) (int, AnchorState) {
	d := math.Abs(f - 1)
	width := anchorWidth(st.Deviating, stderr, p)
	switch {
	case st.Deviating && d < width:
		st = AnchorState{}
	case !st.Deviating && (!Close(f, width) || (saturatedAlone && f < 1-p.Anchor)):
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

// anchorWidth is the half-width about 1 that AnchoredWeight holds a
// factor known with relative standard error stderr to: for a server at its
// default weight (not deviating), how far it must be to count as beyond
// the anchor; for one off it, how close it must come to return (half the
// anchor: hysteresis).
func anchorWidth(deviating bool, stderr float64, p WeightParams) float64 {
	if deviating {
		return math.Max(p.Anchor/2, stderr)
	}
	return math.Max(p.Anchor, Significance*stderr)
}

// UpperBoundWeight is AnchoredWeight for a factor that is only an upper
// bound: the server was busy while another server of its service was
// lightly loaded, so the median it was compared with is a lower bound
// (AnchorFactors) and its true factor is at most f. Such a factor may cut
// the server's weight but never raise a server that is off its default
// weight, nor bring it back: being as capable as an idle server's lower
// bound shows nothing (a hogged server at weight 1 that served a burst of
// queued connections would otherwise flap back to its default). ok is false
// when the weight and state are kept.
func UpperBoundWeight(def int, f, stderr float64, saturatedAlone bool, current int, st AnchorState, p WeightParams) (w int, next AnchorState, ok bool) {
	w, next = AnchoredWeight(def, f, stderr, saturatedAlone, st, p)
	if st.Deviating && w > current {
		return 0, st, false
	}
	return w, next, true
}

// CapacityState is the capacity controller's memory of one server.
type CapacityState struct {
	Est  float64 // smoothed capacity estimate (connections served per unit of busy fraction)
	NObs int     // observations folded into Est
	// Anchor is the anchored controller's state; AnchorSet says it was
	// initialised (from the kernel weight, at a start or a takeover).
	Anchor    AnchorState
	AnchorSet bool
	// LowerBound: while the server is lightly loaded, its smoothed
	// connections served ÷ weight.light (NLB intervals folded in).
	LowerBound float64
	NLB        int
	// Noise is the variance of one observation's logarithm (NNoise pairs
	// of consecutive observations folded in; ObservationNoise), LastObs
	// the latest observation.
	Noise   float64
	NNoise  int
	LastObs float64
	// LossSeen: the latest observation was a significant loss of a server
	// saturated alone; a second in a row is taken at once, however few
	// connections it rests on (minLossCount).
	LossSeen bool
}

// minNoisePairs is how many pairs of consecutive observations a server's
// noise needs before it counts: from one or two, a real change would pass
// for noise (and noise for a change).
const minNoisePairs = 3

// knownNoise is the server's observation noise once minNoisePairs pairs
// are in, else 0 (unknown: the thresholds are the anchor's and the band's
// alone).
func (cs *CapacityState) knownNoise() float64 {
	if cs.NNoise < minNoisePairs {
		return 0
	}
	return cs.Noise
}

// CapacityStep is the capacity controller's figures for one server in
// one cycle, for the record.
type CapacityStep struct {
	// Weight is the controller's weight for the server; 0 when it has no
	// estimate yet.
	Weight int
	// Factor is, anchored, the server's capacity per unit of default
	// weight ÷ its service's median; NaN when there is no decision.
	Factor float64
	// SaturatedAlone: busy at least weight.saturation while the service's
	// median is not (SaturatedAlone), having served significantly less per
	// unit of busy than the estimate (SignificantLoss), confirmed (at least
	// minLossCount connections, or the interval before showed the same).
	SaturatedAlone bool
	// BacklogCut: the backlog guard holds the server cut at this cycle and
	// its factor is below the anchor: its connections piled up, evidence
	// of lost capacity independent of its estimate's noise, so it moves
	// at once (as SaturatedAlone).
	BacklogCut bool
	// NothingServed: busy, but no connection arrived or ended this
	// interval: not a capacity observation (the estimate stands).
	NothingServed bool
	// UpperBoundKept: Factor is only an upper bound (another server of the
	// service is lightly loaded) and would have raised a server that is off
	// its default weight, so the weight is kept (UpperBoundWeight).
	UpperBoundKept bool
	// CPU is the server's CPU busy fraction; Busy the utilisation of its
	// bottleneck (Busy), the figure the estimate used, and Bottleneck
	// that resource's name ("cpu", "disk", "memory"). Estimate is the
	// smoothed capacity after this cycle (0: none yet).
	CPU, Busy  float64
	Bottleneck string
	Estimate   float64
	// Reading is what the connections served were divided by: Busy
	// counted with the coefficients' sensitivities (Reading; Busy itself
	// at the shipped coefficients). Driver names the input that moved it
	// most from Busy (the bottleneck's name, "input", "response",
	// "process"); "" when it is Busy.
	Reading float64
	Driver  string
	// Error is the estimate's relative standard error (EstimateError);
	// 0 while the noise is not known (fewer than minNoisePairs pairs of
	// observations).
	Error float64
	// Within is the half-width about 1 the factor was held to this cycle
	// (anchored only, anchorWidth): for a server at its default weight the
	// anchor's, weight.anchor or Significance standard errors of the
	// estimate when wider; for one off it the return's.
	// Beyond is how many intervals in a row a server at its default
	// weight has now been beyond it; it moves at weight.confirm.
	Within float64
	Beyond int
	// Rule names the rule that held the server's weight this cycle:
	// RuleLight (no decision: every server of the service was below
	// weight.light), RuleClose (kept at its default weight: within Within
	// of the median); "" when none did.
	Rule string
}

// lostAtOnce reports whether the step has evidence of lost capacity that
// does not come from the estimate's noise — saturated alone, or held cut
// by the backlog guard — so the server moves at once, not after
// weight.confirm intervals, and by more than its noise band.
func (c CapacityStep) lostAtOnce() bool { return c.SaturatedAlone || c.BacklogCut }

// anchorText says where the factor stood against the anchor (TH2), for a
// server kept at (or back to) its default weight: "TH2 close: within
// ±15%", "TH2 close: within ±34% (2 standard errors of its estimate)",
// "beyond TH2 close ±34% (…) for 2 of 5 intervals in a row".
func (c CapacityStep) anchorText(p WeightParams) string {
	width := fmt.Sprintf("±%.0f%%", c.Within*100)
	if c.Within > p.Anchor && c.Within == Significance*c.Error {
		width += fmt.Sprintf(" (%g standard errors of its estimate)", Significance)
	}
	if c.Beyond > 0 {
		return fmt.Sprintf("beyond %s %s for %d of %d intervals in a row", RuleClose, width, c.Beyond, p.Confirm)
	}
	return RuleClose + ": within " + width
}

// busyText is the bottleneck and its busy fraction in words, "disk 97%
// busy (CPU 12%)"; "CPU 45% busy" when the CPU is the bottleneck; "no agent
// figures" when the server's agent did not answer this cycle.
func (c CapacityStep) busyText() string {
	if c.Bottleneck == "" {
		return "no agent figures"
	}
	if c.Bottleneck == ResourceCPU {
		return fmt.Sprintf("CPU %.0f%% busy", c.CPU*100)
	}
	return fmt.Sprintf("%s %.0f%% busy (CPU %.0f%%)", c.Bottleneck, c.Busy*100, c.CPU*100)
}

// lightText is TH1's rule in words, "TH1 light: every server below 20%
// busy".
func lightText(p WeightParams) string {
	return fmt.Sprintf("%s: every server below %.0f%% busy", RuleLight, p.light()*100)
}

// spareText is TH1's rule for one clearly idle server, "TH1 light: CPU 5%
// busy, under half of 20%: capacity to spare".
func (c CapacityStep) spareText(p WeightParams) string {
	return fmt.Sprintf("%s: %s, under half of %.0f%%: capacity to spare", RuleLight, c.busyText(), p.light()*100)
}

// bottleneckNote names a bottleneck other than the CPU for a reason or a
// verdict, "; bottleneck disk 97% busy (CPU 12%)"; "" for the CPU, so that
// a CPU-bound server's reasons read as they always have.
func (c CapacityStep) bottleneckNote() string {
	var note string
	if c.Bottleneck != "" && c.Bottleneck != ResourceCPU {
		note = "; bottleneck " + c.busyText()
	}
	return note + c.driverNote()
}

// driverNote says how far the coefficients moved the reading from the
// bottleneck's busy fraction and which input moved it most, "; read 1.45×
// its busy fraction, most from response"; "" when they did not (the
// shipped coefficients).
func (c CapacityStep) driverNote() string {
	if c.Driver == "" || !(c.Busy > 0) {
		return ""
	}
	return fmt.Sprintf("; read %.2f× its busy fraction, most from %s", c.Reading/c.Busy, c.Driver)
}

// pressures returns each server's Pressures (Reading) and their medians
// over the servers that have them. Each input is taken from the server's
// trace (Engine.assess fills it in before Measure): its share of new
// connections per unit of its kernel weight's share of the service's
// weights, when its counter has an earlier reading; its probe time ÷
// reference, when probed; its runnable tasks per CPU, with an agent reply.
func pressures(servers []Server, sc *capacityScratch) ([]Pressures, Pressures) {
	x := grown(&sc.pressures, len(servers))
	var weights float64
	for _, sv := range servers {
		weights += float64(max(sv.Obs.Kernel, 0))
	}
	in, resp, proc := sc.in[:0], sc.resp[:0], sc.proc[:0]
	for i, sv := range servers {
		o, tr := sv.Obs, &sv.Out.Trace
		x[i] = Pressures{Input: math.NaN(), Response: math.NaN(), Process: math.NaN()}
		if o.NewConns >= 0 && o.Kernel > 0 && weights > 0 {
			x[i].Input = tr.Inputs.Input * weights / float64(len(servers)) / float64(o.Kernel)
			in = append(in, x[i].Input)
		}
		if o.reachable() && tr.Inputs.Response > 0 {
			x[i].Response = tr.Inputs.Response
			resp = append(resp, x[i].Response)
		}
		if o.agentOK() {
			x[i].Process = o.Process
			proc = append(proc, o.Process)
		}
	}
	sc.in, sc.resp, sc.proc = in, resp, proc
	return x, Pressures{Input: median(in), Response: median(resp), Process: median(proc)}
}

// capacityController weighs servers by their measured capacity: the
// connections each served per unit of the busy fraction of its bottleneck
// among the resources coef enables (Busy) — throughput ÷ utilisation —
// smoothed over intervals (docs/developer/design.md).
type capacityController struct {
	coef Coefficients
	// scratch, when set, is storage Measure reuses from call to call
	// (NewController sets it); without it every call allocates its own.
	scratch *capacityScratch
}

// capacityScratch is what one Measure call works in: the servers' steps,
// and the figures it takes medians of.
type capacityScratch struct {
	steps                  []CapacityStep
	busies, known, factors []float64
	peers                  []CapacityPeer
	pressures              []Pressures
	in, resp, proc         []float64
}

// grown returns (*s)[:n], grown if need be and kept in *s; its entries
// hold what the last call left there.
func grown[T any](s *[]T, n int) []T {
	*s = slices.Grow((*s)[:0], n)[:n]
	return *s
}

func (capacityController) Name() string { return ControllerCapacity }

// Measure estimates each server's capacity. Anchored (the default), a
// server keeps its configured weight until its capacity per unit of that
// weight strays from the service's median (AnchoredWeight); with anchor 0
// weights are in proportion to the most capable server's (CapacityWeight).
// A server with no good measurement this interval keeps its estimate.
//
// A follower does not measure — its own IPVS counters do not see the
// service's traffic, so every server would look saturated with nothing
// served — and leaves the anchor state to be taken from the table by the
// takeover's first cycle (not earlier: the writer's latest weights may
// arrive just before it): estimates start afresh, and a server the writer
// had moved off its default weight stays there until the new writer's own
// measurements say otherwise.
func (cc capacityController) Measure(p WeightParams, servers []Server, follower bool) {
	if follower {
		for _, sv := range servers {
			sv.State.Capacity = CapacityState{}
			sv.State.Guard = GuardState{} // the new writer's guard starts afresh
		}
		return
	}
	sc := cc.scratch
	if sc == nil {
		sc = new(capacityScratch)
	}
	steps := grown(&sc.steps, len(servers)) // every entry set below
	busies := sc.busies[:0]
	for i, sv := range servers {
		o := sv.Obs
		steps[i] = CapacityStep{Factor: math.NaN(), CPU: o.CPU}
		if o.agentOK() {
			steps[i].Busy, steps[i].Bottleneck = Busy(o.Figures(), cc.coef)
			busies = append(busies, steps[i].Busy)
		}
	}
	sc.busies = busies
	medianBusy := median(busies)
	light := p.light()
	// The director's inputs count only above their shipped coefficients
	// (DirectorSensitivity); at or below them no server's needs reading.
	var x []Pressures // nil: no server's are read, all count as zero
	var ref Pressures
	if DirectorCorrected(cc.coef) {
		x, ref = pressures(servers, sc)
	}
	for i, sv := range servers {
		if sv.Obs.agentOK() {
			var xi Pressures
			if x != nil {
				xi = x[i]
			}
			steps[i].Reading, steps[i].Driver = Reading(steps[i].Busy, medianBusy, light, steps[i].Bottleneck, xi, ref, cc.coef)
		}
	}
	allLight := Light(busies, light)
	maxEst := 0.0
	peers := grown(&sc.peers, len(servers))
	clear(peers)
	for i, sv := range servers {
		o, cs := sv.Obs, &sv.State.Capacity
		busy := steps[i].Busy
		def := float64(o.Record.DefaultWeight(o.Configured))
		measured := o.agentOK() && o.NewConns >= 0
		served := ServedConnections(o.NewConns, o.ActiveDelta)
		switch {
		case measured && busy >= light && o.NewConns == 0 && served == 0:
			// Busy, and no connection arrived or ended: a long request
			// held the server all interval (under wlc it is sent nothing
			// while it holds one), or its share is too small for an
			// arrival every interval. Nothing to measure. A server sent
			// connections it does not finish (its active ones grow) did
			// serve nothing, and that is measured.
			cs.NLB = 0
			steps[i].NothingServed = true
		case measured && busy >= light:
			cs.NLB = 0
			obs, noise := served/steps[i].Reading, cs.knownNoise()
			if cs.LastObs > 0 && obs > 0 {
				cs.NNoise++
				cs.Noise = ObservationNoise(cs.Noise, cs.NNoise, obs, cs.LastObs)
			}
			cs.LastObs = obs
			// A first observation is all there is: significant, and
			// confirmed. A loss resting on a handful of connections must
			// show at two intervals in a row (UpdateCapacity).
			loss := SaturatedAlone(busy, medianBusy, p.Saturation) && (cs.NObs == 0 || SignificantLoss(obs, cs.Est, noise))
			confirmed := cs.NObs == 0 || cs.LossSeen || served >= minLossCount
			steps[i].SaturatedAlone = loss && confirmed
			cs.LossSeen = loss
			cs.NObs++
			cs.Est = UpdateCapacity(cs.Est, cs.NObs, obs, busy, medianBusy, noise, confirmed, p)
		case measured:
			// Lightly loaded: capacity to spare, at least served ÷
			// weight.light — smoothed like an estimate, since with
			// light traffic an interval often has no connection at all.
			// Clearly idle (Spare): back to the default weight.
			peers[i].Idle = true
			peers[i].Spare = busy < light/2
			cs.NLB++
			cs.LowerBound = SmoothCapacity(cs.LowerBound, cs.NLB, served/light, p.Smoothing)
			peers[i].PerWeight = cs.LowerBound / def
			peers[i].Known = true
		}
		if cs.NObs > 0 {
			maxEst = math.Max(maxEst, cs.Est)
			steps[i].Estimate = cs.Est
			steps[i].Error = EstimateError(cs.knownNoise(), p.Smoothing)
			if !peers[i].Idle {
				peers[i].PerWeight = cs.Est / def
				peers[i].Known = true
			}
		}
	}
	switch {
	case p.Anchor > 0:
		lowerBoundMedian := medianIsLowerBound(peers)
		sc.factors = anchorFactorsInto(grown(&sc.factors, len(peers)), &sc.known, peers)
		for i, f := range sc.factors {
			o, cs := servers[i].Obs, &servers[i].State.Capacity
			steps[i].Factor = f
			def := o.Record.DefaultWeight(o.Configured)
			if !cs.AnchorSet { // a start, a takeover: a server off its default was moved there
				cs.Anchor, cs.AnchorSet = AnchorState{Deviating: o.Kernel != def}, true
			}
			gs := &servers[i].State.Guard
			steps[i].BacklogCut = gs.Holding() && !gs.Raised && f < 1-p.Anchor
			lost := steps[i].lostAtOnce()
			steps[i].Within = anchorWidth(cs.Anchor.Deviating, steps[i].Error, p)
			switch {
			case allLight && !peers[i].Spare:
				// TH1: every server has capacity to spare, nothing to
				// decide (a clearly idle one still goes back to its
				// default weight, below).
				steps[i].Rule = RuleLight
			case math.IsNaN(f):
			case lowerBoundMedian && !peers[i].Idle:
				if w, next, ok := UpperBoundWeight(def, f, steps[i].Error, lost, o.Kernel, cs.Anchor, p); ok {
					steps[i].Weight, cs.Anchor = w, next
				} else {
					steps[i].UpperBoundKept = true
				}
			default:
				steps[i].Weight, cs.Anchor = AnchoredWeight(def, f, steps[i].Error, lost, cs.Anchor, p)
			}
			steps[i].Beyond = cs.Anchor.Beyond
			switch {
			case peers[i].Spare:
				steps[i].Rule = RuleLight // clearly idle: its default weight
			case steps[i].Weight > 0 && !cs.Anchor.Deviating && cs.Anchor.Beyond == 0:
				steps[i].Rule = RuleClose
			}
		}
	case allLight:
		for i := range servers {
			steps[i].Rule = RuleLight
		}
	default:
		for i, sv := range servers {
			if cs := sv.State.Capacity; cs.NObs > 0 {
				steps[i].Weight = CapacityWeight(cs.Est, maxEst, p.Resolution, p.Min)
			}
		}
	}
	// The step goes where the caller keeps it with the decision, or to
	// new storage (never the scratch, which the next call overwrites).
	kept := steps
	if cc.scratch != nil {
		kept = nil
	}
	for i, sv := range servers {
		if sv.Step != nil {
			*sv.Step = steps[i]
			sv.Out.Trace.Capacity = sv.Step
			continue
		}
		if kept == nil {
			kept = make([]CapacityStep, len(servers))
		}
		kept[i] = steps[i]
		sv.Out.Trace.Capacity = &kept[i]
	}
}

// Step is the capacity controller's last step: the server's capacity
// weight, written when it moves by more than the band, when it returns to
// the default weight (anchored), at every step of a slow-start ramp, or
// when the kernel weight is below the minimum. Without a capacity decision
// this cycle the weight is kept — but a slow-start ramp goes on towards the
// last weight (the restore weight of a server back from down), up to and
// including its last step, in the cycle the ramp ends.
func (capacityController) Step(p WeightParams, o *Observed, st *ServerState, ramp float64, d *Decision) {
	var c CapacityStep
	if d.Trace.Capacity != nil {
		c = *d.Trace.Capacity
	}
	ramping := ramp < 1 || d.Trace.RampEnded
	switch {
	case c.Weight > 0:
		st.Ctrl = float64(c.Weight)
	case ramping && st.Ctrl > 0:
	default:
		return
	}
	to := rampWeight(st.Ctrl, ramp, p.Min)
	// A change within the estimate's noise is not written either.
	band := p.Band
	if !c.lostAtOnce() {
		band = math.Max(band, Significance*c.Error)
	}
	rule := fmt.Sprintf("band %.0f%%", band*100)
	if band > p.Band {
		rule += fmt.Sprintf(" (%g standard errors of its estimate)", Significance)
	}
	cmp := &Comparison{Kernel: o.Kernel, Next: to, Rule: rule, Passes: PassesBand(o.Kernel, to, band)}
	d.Trace.Compare = cmp
	def := o.Record.DefaultWeight(o.Configured)
	switch {
	case cmp.Passes:
	case o.Kernel < p.Min:
		cmp.Overrule = fmt.Sprintf("the kernel weight %d is below min %d", o.Kernel, p.Min)
	case ramping && to != o.Kernel:
		cmp.Overrule = "a slow-start step"
	case p.Anchor > 0 && int(st.Ctrl) == def && to != o.Kernel:
		// Anchored, back to the default weight is always written (the
		// hysteresis of AnchoredWeight keeps it from flapping).
		cmp.Overrule = "back to the default weight"
	default:
		return
	}
	var reason string
	switch {
	case c.Weight <= 0 && c.Rule == RuleLight:
		reason = fmt.Sprintf("towards weight %d (%s: no capacity decision this cycle)", int(st.Ctrl), lightText(p))
	case c.Weight <= 0:
		reason = fmt.Sprintf("towards weight %d (no capacity decision this cycle)", int(st.Ctrl))
	case p.Anchor <= 0:
		reason = fmt.Sprintf("capacity share %d of %d", c.Weight, p.Resolution)
	case c.Weight == def && c.Rule == RuleLight:
		reason = c.spareText(p) + ", default weight"
	case c.Weight == def:
		reason = fmt.Sprintf("capacity %.2f× its default weight's share; %s: default weight", c.Factor, c.anchorText(p))
	case c.BacklogCut:
		reason = fmt.Sprintf("capacity %.2f× its default weight's share, held cut by the backlog guard: taken at once", c.Factor)
	default:
		reason = fmt.Sprintf("capacity %.2f× its default weight's share", c.Factor)
	}
	if c.Weight > 0 {
		reason += c.bottleneckNote()
	}
	propose(d, to, reason, ramp)
}

// capacityKeys are the [weight] keys only the capacity controller reads.
func capacityKeys() []Param[WeightParams] {
	return []Param[WeightParams]{
		{Key: "smoothing", Default: 0.7, Values: "0…<1", Reload: "next cycle",
			Doc: "Capacity controller: the geometric decay α of the capacity estimate (bias-corrected; 0 = " +
				"the last interval only).",
			Check: func(p WeightParams) string {
				return refuse(!(p.Smoothing >= 0 && p.Smoothing < 1), "must be from 0 to below 1, got %v", p.Smoothing)
			},
		},
		{Key: "band", Default: 0.2, Values: "0…<1", Reload: "next cycle",
			Doc: "Capacity controller: a weight is written only when it moves by more than this share of its " +
				"current value — or, when the server's capacity estimate is noisy, by more than two of its " +
				"standard errors (design.md).",
			Check: func(p WeightParams) string {
				return refuse(!(p.Band >= 0 && p.Band < 1), "must be from 0 to below 1 (a share of the current weight), got %v", p.Band)
			},
		},
		{Key: "resolution", Default: 20, Values: "`weight.min`…65535", Reload: "next cycle",
			Doc: "Capacity controller with `anchor = 0`: the weight of the service's most capable server; " +
				"the others in proportion. A small value keeps wrr rounds short.",
			Near: "min",
			Check: func(p WeightParams) string {
				return refuse(p.Resolution < 1 || p.Resolution > ipvs.MaxWeight || p.Resolution < p.Min, "must be from weight.min to %d, got %d", ipvs.MaxWeight, p.Resolution)
			},
		},
		{Key: "saturation", Default: 0.9, Values: "0…1", Reload: "next cycle",
			Doc: "Capacity controller: a server at least this busy is saturated — its estimate may fall but " +
				"not rise (what it was sent bounds what it can show); saturated while its service's median " +
				"is not, it has lost capacity and its lower estimate is taken at once when it rests on at " +
				"least 20 connections served or the interval before showed the same (one single-core " +
				"interval a few long requests filled shows it too). 0 disables both.",
			Check: func(p WeightParams) string {
				return refuse(!(p.Saturation >= 0 && p.Saturation <= 1), "must be from 0 (off) to 1, got %v", p.Saturation)
			},
		},
		{Key: "anchor", Default: 0.15, Values: "0…<1", Reload: "next cycle",
			Doc: "Capacity controller, seed 000's **TH2 (\"close\")**: a server keeps its configured (default) " +
				"weight while its capacity per unit of that weight is within this share of its service's " +
				"median; beyond it, its weight is the default × its capacity ÷ the median's (written when " +
				"it moves by more than `band`), and it returns to the default once within half the share. " +
				"The share widens to two standard errors of a server's estimate when that estimate is noisy " +
				"(a single-core server, heavy-tailed requests), and the return to one. Explain names it: " +
				"\"TH2 close: within ±15%\". 0 = weights in proportion to capacity, the largest at " +
				"`resolution` ([design.md](developer/design.md#th1-and-th2-seed-000s-thresholds)).",
			Check: func(p WeightParams) string {
				return refuse(!(p.Anchor >= 0 && p.Anchor < 1), "must be from 0 (off) to below 1 (a share of the median), got %v", p.Anchor)
			},
		},
		{Key: "light", Default: DefaultLight, Values: ">0…<1", Reload: "next cycle",
			Doc: "Capacity controller, seed 000's **TH1 (\"light\")**: a server whose bottleneck (the busiest " +
				"resource `[coefficients]` enable) is less busy than this over the interval is lightly " +
				"loaded — its capacity is not measured (connections ÷ a small busy fraction is noise; its " +
				"connections ÷ `light` count as a lower bound), and below half of it it returns to its " +
				"default weight. While every server of a service is below it, nothing is decided and no " +
				"capacity weight is written (availability, drains, slow start and the backlog guard still " +
				"act); explain says \"TH1 light: every server below 20% busy\". " +
				"([design.md](developer/design.md#th1-and-th2-seed-000s-thresholds))",
			Check: func(p WeightParams) string {
				return refuse(!(p.Light > 0 && p.Light < 1), "must be above 0 and below 1 (a busy fraction), got %v", p.Light)
			},
		},
		{Key: "confirm", Default: 5, Values: "1…100", Reload: "next cycle",
			Doc: "Capacity controller: a server leaves its configured weight only after this many intervals " +
				"in a row beyond the anchor (a single-core server's estimate strays beyond the anchor for " +
				"three intervals in a row often enough that, at 3, the held-out clusters with nothing " +
				"changing saw 0.27 writes per server per minute under wrr and wlc; at 5, with the " +
				"guard-held cut below, 0.18 — commit `36c60ab`, `lvs-sim -family test -generate 24 " +
				"-steady`, [results.md](results/notebook.md#what-a-controller-that-looks-can-reach-commit-36c60ab)). " +
				"A server saturated while its service is not moves at once (on fewer than 20 connections " +
				"served, at the second such interval in a row), and so does one the backlog guard holds cut " +
				"at the cycle with a factor below the anchor. 1 = at once.",
			Check: func(p WeightParams) string {
				return refuse(p.Confirm < 1 || p.Confirm > 100, "must be from 1 (at once) to 100 intervals, got %d", p.Confirm)
			},
		},
	}
}
