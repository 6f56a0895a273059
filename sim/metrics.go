package sim

import (
	"math"
	"slices"
)

// Result is the outcome of one run (scenario, seed, scheduler, policy).
// Times are in seconds.
type Result struct {
	Scenario  string
	Scheduler string // "" for the references that do not use one
	Policy    string
	Seed      uint64

	// Timeline is the per-server timeline (Bench.Timeline), windows of
	// TimelineWindow seconds; ServerNames name its servers.
	Timeline       []TimelineRow
	TimelineWindow float64
	ServerNames    []string

	Requests int // arriving after the warm-up
	Failed   int // reached a dead server, or lost when it failed
	// Mean is over the requests that completed; the percentiles count a
	// failed request as slower than any that completed (+Inf), so a
	// policy that fails more than 1 % of the requests has P99 = +Inf.
	Mean       float64
	P50        float64
	P95        float64
	P99        float64
	Util       []float64 // per server: mean busy fraction after the warm-up
	UtilMax    float64
	UtilSpread float64 // max − min over servers that were up
	// Overload is the overload seconds: how many of the one-second
	// samples after the warm-up and before the end of the arrivals had
	// some server's CPU, or its disk, busy at least OverloadBusy of the
	// second (a server down is busy 0). 0 for the pooled reference.
	Overload float64
	// Hot is the share of steady-state windows in which some server was
	// above 95 % busy while the cluster as a whole was below 90 %.
	Hot float64
	// Weight writes by the policy per server per minute: after the
	// warm-up, and in steady state only.
	Writes       float64
	SteadyWrites float64
	// Osc is the steady-state weight oscillation: the coefficient of
	// variation of each server's weight share, sampled every interval,
	// averaged over servers (0 = constant weights).
	Osc float64
	// Flips is the number of steady-state direction reversals of a
	// server's weight per server per minute.
	Flips float64
	// Settle is, per scenario event (NaN for events that change no
	// capacity), the time from the event until every weight share is and
	// stays within SettleTolerance of the ideal share; +Inf when it never
	// does before the next event (or the end).
	Settle []float64
	// Reach is, per event like Settle, the time from the event until every
	// weight share is within SettleTolerance of the ideal share for the
	// first time (for at least ReachDwell, or until the next event),
	// whether it stays there or not; +Inf when it never is. Reach ≤
	// Settle: the difference is time spent leaving the band again (noise,
	// a backlog guard's move).
	Reach []float64
	// Recovery is, per event like Settle, the time from the event until
	// the sliding p99 is back within RecoveryBand of the ideal-weights
	// counterfactual's and stays there (recoveryTime); NaN for events that
	// change no capacity. Nil when the run was not paired with an ideal
	// run of the same scenario, seed and scheduler (Bench.Run pairs them),
	// and for the references.
	Recovery []float64
	// DriftLoss lists, for each drift event that slows its server (in
	// event order), the share of the server's capacity the drift had
	// taken when a policy write first lowered that server's weight
	// (driftLosses); +Inf when none did before the drift ended or the
	// server's next event. Nil for the references.
	DriftLoss []float64
	// IsKernel is false for the references (no weights).
	IsKernel bool

	series *series // kept for plots
	// p99w is the sliding p99 over RecoveryWindow, one value per
	// RecoveryStep, the n-th for the window ending at (n+1)·RecoveryWindow
	// … see slidingP99; spans holds per event the stretch [event, next
	// capacity event) over which convergence is judged (NaN: no capacity
	// change). Both feed Recovery.
	p99w  []float64
	spans [][2]float64
}

// series holds the time series a plot needs (one run).
type series struct {
	dt      float64
	busy    [][]float32 // per server (and pool)
	weights [][]float32 // per sample
	ideal   [][]float32
	p99     []float64 // sliding p99 per sample (NaN when empty)
	p99t    []float64
}

// percentile of sorted xs (nearest rank).
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(len(sorted)-1, i))]
}

// steadyPeriods returns the steady-state intervals: from warm-up (and
// steady_after past the start) and steady_after past every event, to the
// next event or the end.
func steadyPeriods(sc *Scenario) [][2]float64 {
	end := sc.Duration.Seconds()
	after := sc.SteadyAfter.Seconds()
	starts := []float64{0}
	for _, e := range sc.Events {
		starts = append(starts, e.At.Seconds())
	}
	var out [][2]float64
	for i, s := range starts {
		stop := end
		if i+1 < len(starts) {
			stop = starts[i+1]
		}
		a := math.Max(s+after, sc.Warmup.Seconds())
		if a < stop {
			out = append(out, [2]float64{a, stop})
		}
	}
	return out
}

func inPeriods(ps [][2]float64, t float64) bool {
	for _, p := range ps {
		if t >= p[0] && t < p[1] {
			return true
		}
	}
	return false
}

// result computes a run's statistics.
func (r *run) result(keepSeries bool) Result {
	sc := r.sc
	warm := sc.Warmup.Seconds()
	end := sc.Duration.Seconds()
	n := len(sc.Servers)
	res := Result{Scenario: sc.Name, Policy: r.pol.Name(), Seed: r.seed, IsKernel: r.pol.Kernel()}
	if r.pol.Kernel() {
		res.Scheduler = r.schedN
	}

	res.Requests, res.Failed, res.Mean, res.P50, res.P95, res.P99 = responseStats(r.st.Arrive, r.resp, warm)

	// Utilisation per server after the warm-up (the pool for "pooled").
	first := int(math.Ceil(warm / r.sampleDt))
	last := int(end / r.sampleDt) // samples cover (i·dt, (i+1)·dt]
	utilIdx := make([]int, 0, n)
	if r.pool != nil {
		utilIdx = append(utilIdx, len(r.srv)-1)
	} else {
		for k := 0; k < n; k++ {
			utilIdx = append(utilIdx, k)
		}
	}
	res.UtilMax, res.UtilSpread = 0, 0
	lo := math.Inf(1)
	for _, k := range utilIdx {
		s := r.samples[k]
		var u float64
		cnt := 0
		for i := first; i < last && i < len(s); i++ {
			u += float64(s[i])
			cnt++
		}
		if cnt > 0 {
			u /= float64(cnt)
		}
		res.Util = append(res.Util, u)
		res.UtilMax = math.Max(res.UtilMax, u)
		lo = math.Min(lo, u)
	}
	if !math.IsInf(lo, 1) {
		res.UtilSpread = res.UtilMax - lo
	}

	steady := steadyPeriods(sc)
	res.Hot = r.hotShare(steady)
	if r.pool == nil {
		res.Overload = r.overloadSeconds()
	}
	res.spans = eventSpans(sc, r.idealW)
	res.p99w = slidingP99(r.st.Arrive, r.resp, RecoveryWindow, RecoveryStep, end)

	if r.pol.Kernel() {
		r.weightStats(&res, steady)
		res.DriftLoss = r.driftLosses()
	} else {
		res.Osc, res.Flips, res.Writes, res.SteadyWrites = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		res.Settle, res.Reach = nanPerEvent(len(sc.Events)), nanPerEvent(len(sc.Events))
	}
	if keepSeries {
		res.series = r.series()
	}
	if r.tl != nil {
		res.Timeline, res.TimelineWindow = r.tl.rows, r.tl.dt
		for _, sv := range sc.Servers {
			res.ServerNames = append(res.ServerNames, sv.Name)
		}
	}
	return res
}

// hotShare is the share of steady windows where a server that is up was
// above 95 % busy while the cluster (capacity-weighted) was below 90 %.
func (r *run) hotShare(steady [][2]float64) float64 {
	if r.pool != nil {
		return 0
	}
	sc := r.sc
	per := int(math.Round(sc.Window.Seconds() / r.sampleDt))
	if per < 1 {
		per = 1
	}
	n := len(sc.Servers)
	total, hot := 0, 0
	nS := len(r.samples[0])
	for w0 := 0; w0+per <= nS; w0 += per {
		t0 := float64(w0) * r.sampleDt
		t1 := float64(w0+per) * r.sampleDt
		if !inPeriods(steady, t0) || !inPeriods(steady, t1-1e-9) {
			continue
		}
		var clusterBusy, clusterCap float64
		maxBusy := 0.0
		for k := 0; k < n; k++ {
			var b float64
			for i := w0; i < w0+per; i++ {
				b += float64(r.samples[k][i])
			}
			b /= float64(per)
			c := sc.Servers[k].Capacity()
			if b == 0 && r.idealsAt(w0 + per - 1)[k] == 0 {
				continue // down or drained
			}
			clusterBusy += b * c
			clusterCap += c
			maxBusy = math.Max(maxBusy, b)
		}
		total++
		if clusterCap > 0 && maxBusy > 0.95 && clusterBusy/clusterCap < 0.90 {
			hot++
		}
	}
	if total == 0 {
		return math.NaN()
	}
	return float64(hot) / float64(total)
}

func (r *run) idealsAt(i int) []float32 {
	if i < len(r.ideals) {
		return r.ideals[i]
	}
	return r.ideals[len(r.ideals)-1]
}

// weightsAt replays the weight history up to and including time t.
type weightReplay struct {
	w   []int
	h   []weightChange
	pos int
}

func (r *run) replay() *weightReplay {
	return &weightReplay{w: slices.Clone(r.initW), h: r.history}
}

// advanceTo applies every change at or before t.
func (wr *weightReplay) advanceTo(t float64) {
	for wr.pos < len(wr.h) && wr.h[wr.pos].t <= t {
		c := wr.h[wr.pos]
		wr.w[c.k] = c.w
		wr.pos++
	}
}

// withinTolerance reports whether every weight share is within tol
// (relative) of the ideal share; a server whose ideal is 0 must be at 0.
func withinTolerance(w, ideal []int, tol float64) bool {
	var sw, si float64
	for k := range w {
		sw += float64(w[k])
		si += float64(ideal[k])
	}
	if sw == 0 || si == 0 {
		return sw == si
	}
	for k := range w {
		is := float64(ideal[k]) / si
		ws := float64(w[k]) / sw
		if is == 0 {
			if ws != 0 {
				return false
			}
			continue
		}
		if math.Abs(ws-is) > tol*is {
			return false
		}
	}
	return true
}

func (r *run) weightStats(res *Result, steady [][2]float64) {
	sc := r.sc
	n := len(sc.Servers)
	warm := sc.Warmup.Seconds()
	end := sc.Duration.Seconds()

	res.Writes, res.SteadyWrites = writeRates(r.history, n, warm, end, steady)
	var steadyLen float64
	for _, p := range steady {
		steadyLen += p[1] - p[0]
	}

	// Oscillation: CV of weight shares sampled every interval in steady
	// state; flips: steady direction reversals.
	iv := sc.Interval.Seconds()
	var cvSum float64
	cvN := 0
	for _, p := range steady {
		wr := r.replay()
		var shares [][]float64
		for t := p[0]; t < p[1]; t += iv {
			wr.advanceTo(t)
			var sw float64
			for _, x := range wr.w {
				sw += float64(x)
			}
			row := make([]float64, n)
			for k, x := range wr.w {
				if sw > 0 {
					row[k] = float64(x) / sw
				}
			}
			shares = append(shares, row)
		}
		if len(shares) < 2 {
			continue
		}
		for k := 0; k < n; k++ {
			var m, m2 float64
			for _, row := range shares {
				m += row[k]
			}
			m /= float64(len(shares))
			if m == 0 {
				continue
			}
			for _, row := range shares {
				m2 += (row[k] - m) * (row[k] - m)
			}
			cvSum += math.Sqrt(m2/float64(len(shares))) / m
			cvN++
		}
	}
	if cvN > 0 {
		res.Osc = cvSum / float64(cvN)
	}
	prev := r.initW
	prevDir := make([]int, n)
	flips := 0
	cur := slices.Clone(prev)
	for _, c := range r.history {
		d := 0
		switch {
		case c.w > cur[c.k]:
			d = 1
		case c.w < cur[c.k]:
			d = -1
		}
		cur[c.k] = c.w
		if !c.policy || c.w == 0 {
			prevDir[c.k] = 0 // availability writes and the operator reset the direction
			continue
		}
		if d != 0 && prevDir[c.k] != 0 && d != prevDir[c.k] && inPeriods(steady, c.t) {
			flips++
		}
		if d != 0 {
			prevDir[c.k] = d
		}
	}
	if steadyLen > 0 {
		res.Flips = float64(flips) / float64(n) / (steadyLen / 60)
	}

	// Settling after each event that changes the ideal weights.
	res.Settle, res.Reach = nanPerEvent(len(sc.Events)), nanPerEvent(len(sc.Events))
	for i, e := range sc.Events {
		ideal := r.idealW[i]
		if ideal == nil {
			continue
		}
		te, tEnd := res.spans[i][0], res.spans[i][1]
		// The ideal after the last event at the same instant.
		for j := i + 1; j < len(sc.Events) && sc.Events[j].At == e.At; j++ {
			if r.idealW[j] != nil {
				ideal = r.idealW[j]
			}
		}
		res.Reach[i], res.Settle[i] = settling(r.replay(), te, tEnd, ideal, SettleTolerance)
	}
}

// SettleTolerance is how close to the ideal weights settling is judged:
// every server's weight share within 10 % (relative) of its ideal share,
// the benchmark's settling target.
const SettleTolerance = 0.10

// writeRates is the policy's weight writes per server per minute over the
// whole run after the warm-up, and over the steady periods only (which
// leave out steady_after past every event: when events come often, most
// writes fall outside them).
func writeRates(h []weightChange, n int, warm, end float64, steady [][2]float64) (all, inSteady float64) {
	var na, ns int
	for _, c := range h {
		if !c.policy || c.t < warm || c.t >= end {
			continue
		}
		na++
		if inPeriods(steady, c.t) {
			ns++
		}
	}
	var steadyLen float64
	for _, p := range steady {
		steadyLen += p[1] - p[0]
	}
	all = float64(na) / float64(n) / ((end - warm) / 60)
	inSteady = math.NaN()
	if steadyLen > 0 {
		inSteady = float64(ns) / float64(n) / (steadyLen / 60)
	}
	return all, inSteady
}

// eventSpans returns, per scenario event, the stretch over which the
// convergence after it is judged: from the event to the next event that
// changes capacity at a later time (or the end); NaN for events that
// change no capacity (idealW[i] nil).
func eventSpans(sc *Scenario, idealW [][]int) [][2]float64 {
	end := sc.Duration.Seconds()
	out := make([][2]float64, len(sc.Events))
	for i, e := range sc.Events {
		if idealW[i] == nil {
			out[i] = [2]float64{math.NaN(), math.NaN()}
			continue
		}
		te := e.At.Seconds()
		tEnd := end
		for j := i + 1; j < len(sc.Events); j++ {
			if idealW[j] != nil && sc.Events[j].At.Seconds() > te {
				tEnd = sc.Events[j].At.Seconds()
				break
			}
		}
		out[i] = [2]float64{te, tEnd}
	}
	return out
}

// responseStats summarises the response times of the requests arriving
// at or after warm: how many, how many failed, the mean of those that
// completed, and the nearest-rank percentiles with every failed request
// counted as slower than any completed one (+Inf). Why +Inf and not a
// timeout value: a failed request is one the client did not get served in
// any time, whatever its timeout; so p99 is "99 % of the requests were
// served within", and a policy that fails more than 1 % has no finite p99.
func responseStats(arrive []float64, resp []float32, warm float64) (requests, failed int, mean, p50, p95, p99 float64) {
	var rts []float64
	var sum float64
	for i, t := range arrive {
		if t < warm {
			continue
		}
		requests++
		v := responseTime(resp[i])
		rts = append(rts, v)
		if math.IsInf(v, 1) {
			failed++
			continue
		}
		sum += v
	}
	slices.Sort(rts)
	if done := requests - failed; done > 0 {
		mean = sum / float64(done)
	}
	return requests, failed, mean, percentile(rts, 0.50), percentile(rts, 0.95), percentile(rts, 0.99)
}

// responseTime is a request's response time in seconds for the
// percentiles: +Inf when it failed (negative) or never finished (NaN).
func responseTime(v float32) float64 {
	if !(v >= 0) {
		return math.Inf(1)
	}
	return float64(v)
}

func nanPerEvent(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}

// ReachDwell is how long the weights must stay within SettleTolerance for
// a visit to count as reaching the ideal (Result.Reach): one default
// monitor interval. Shorter visits are passing through — e.g. an operator
// undrains a server at its full weight and the monitor's slow start takes
// it down to the ramp's first step a moment later.
const ReachDwell = 5.0

// settling replays the weights from an event at te to tEnd against the
// ideal weights and returns the seconds until the shares were first within
// tol of the ideal shares for at least ReachDwell, or until tEnd (reach),
// and until they were within it for good (settle); +Inf for either when it
// does not happen before tEnd.
func settling(wr *weightReplay, te, tEnd float64, ideal []int, tol float64) (reach, settle float64) {
	wr.advanceTo(te)
	ok := withinTolerance(wr.w, ideal, tol)
	in := te // when the shares last came within tol
	reach = math.Inf(1)
	for wr.pos < len(wr.h) && wr.h[wr.pos].t < tEnd {
		t := wr.h[wr.pos].t
		wr.advanceTo(t)
		now := withinTolerance(wr.w, ideal, tol)
		switch {
		case now && !ok:
			in = t
		case !now && ok && t-in >= ReachDwell:
			reach = math.Min(reach, in-te)
		}
		ok = now
	}
	if !ok {
		return reach, math.Inf(1)
	}
	return math.Min(reach, in-te), in - te
}

// series builds the plot series: sliding p99 over 30 s of arrivals,
// sampled every 5 s.
func (r *run) series() *series {
	s := &series{dt: r.sampleDt, busy: r.samples, weights: r.shares, ideal: r.ideals}
	const win, step = 30.0, 5.0
	end := r.sc.Duration.Seconds()
	lo := 0
	buf := make([]float64, 0, 1024)
	for t := win; t <= end+1e-9; t += step {
		for lo < len(r.st.Arrive) && r.st.Arrive[lo] < t-win {
			lo++
		}
		buf = buf[:0]
		for i := lo; i < len(r.st.Arrive) && r.st.Arrive[i] < t; i++ {
			buf = append(buf, responseTime(r.resp[i]))
		}
		slices.Sort(buf)
		s.p99 = append(s.p99, percentile(buf, 0.99))
		s.p99t = append(s.p99t, t)
	}
	return s
}

// driftLosses is Result.DriftLoss: for each drift event that slows its
// server (from its speed at the drift's start towards a lower factor),
// the capacity lost, as a share of that starting speed, at the first
// policy write after the drift began that lowered the server's weight.
// The drift is followed until it ends or the server's next event.
func (r *run) driftLosses() []float64 {
	sc := r.sc
	var out []float64
	for i := range sc.Events {
		e := &sc.Events[i]
		if e.Kind != EvDrift || r.driftFrom == nil || !(e.Factor < r.driftFrom[i]) {
			continue
		}
		from, start := r.driftFrom[i], e.At.Seconds()
		until := start + e.Over.Seconds()
		for j := i + 1; j < len(sc.Events); j++ {
			if sc.Events[j].server == e.server && sc.Events[j].At.Seconds() > start {
				until = math.Min(until, sc.Events[j].At.Seconds())
				break
			}
		}
		loss := math.Inf(1)
		prev := sc.Servers[e.server].Weight
		for _, c := range r.history {
			if c.k != e.server || c.t > until {
				continue
			}
			if c.t >= start && c.policy && c.w < prev {
				loss = math.Max(0, 1-driftFactor(e, from, uint64((c.t-start)/DriftStep.Seconds()))/from)
				break
			}
			prev = c.w
		}
		out = append(out, loss)
	}
	return out
}
