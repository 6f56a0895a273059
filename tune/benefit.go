package tune

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/sim"
)

// BenefitOptions set what Benefit replays.
type BenefitOptions struct {
	// From and Until bound the window: the cycles recorded after From and
	// up to Until.
	From, Until time.Time
	// Scheduler is the kernel scheduler both runs use (the history does
	// not record it); default "wrr".
	Scheduler string
	// Seeds are the simulator seeds: each is one draw of the requests,
	// the same for both runs (default 1, 2, 3).
	Seeds []uint64
	// Workers bounds the simulations run at once (default GOMAXPROCS).
	Workers int
	// MaxRequests bounds the requests one run may simulate (default
	// DefaultMaxRequests): each holds about 30 bytes while its seed's
	// runs last, so the window's traffic, not the history's size, is
	// what the memory grows with.
	MaxRequests float64
	// History sets how the scenario is built (MaxCycles is raised to the
	// window's cycles: the whole window is replayed).
	History HistoryOptions
}

// BenefitFigures are one run's figures, the means over the seeds.
type BenefitFigures struct {
	// P99 is the 99th percentile of the response times in seconds
	// (+Inf when more than 1 % of the requests failed, sim.Result.P99).
	P99 float64
	// Overload is the overload seconds (sim.Result.Overload): seconds of
	// the window in which some server's CPU or disk was busy at least
	// sim.OverloadBusy of the second.
	Overload float64
	// Failed is the share of the requests that failed.
	Failed float64
	// Seeds are the per-seed results.
	Seeds []sim.Result
}

// BenefitResult is what Benefit measured on one service.
type BenefitResult struct {
	Service string
	// First and Last are the window's first and last cycles; Span is the
	// time replayed (cycles × interval).
	First, Last time.Time
	Span        time.Duration
	Scheduler   string
	Seeds       []uint64
	// StaticWeights are the servers' default weights, the static run's;
	// Servers name them.
	Servers       []string
	StaticWeights []int
	// Writes is how many recorded weight changes the monitor run replays.
	Writes int
	// Static runs each server's default weight throughout (with the
	// static baseline's health check, sim.PolNominal); Monitor the
	// weights the monitor wrote, at the cycles that wrote them.
	Static, Monitor BenefitFigures
	Report          HistoryReport
}

// P99Ratio is the static p99 ÷ the monitor's: above 1 the monitor's
// weights did better (NaN when either is not finite, or the monitor's is 0).
func (b BenefitResult) P99Ratio() float64 { return ratio(b.Static.P99, b.Monitor.P99) }

// OverloadRatio is the static overload seconds ÷ the monitor's: NaN when
// both are 0, +Inf when only the monitor's is.
func (b BenefitResult) OverloadRatio() float64 { return ratio(b.Static.Overload, b.Monitor.Overload) }

func ratio(static, monitor float64) float64 {
	switch {
	case math.IsInf(static, 1) && math.IsInf(monitor, 1):
		return math.NaN()
	case monitor == 0 && static == 0:
		return math.NaN()
	case monitor == 0:
		return math.Inf(1)
	}
	return static / monitor
}

// DefaultMaxRequests is Benefit's default bound on the requests of one
// run: about 600 MB of memory; an hour at 5,500 connections a second.
const DefaultMaxRequests = 20e6

// ErrTooLarge is Benefit's answer when the window's traffic is more than
// MaxRequests to simulate.
var ErrTooLarge = errors.New("too much traffic to replay")

// ErrNoRecords is Benefit's answer when the window holds no record of
// the service.
var ErrNoRecords = errors.New("nothing to replay")

// weightCell is what Benefit keeps of a record for the replay.
type weightCell struct {
	t      time.Time
	server string
	before int
	after  int
}

// Benefit replays the window of one service's recorded history (the
// records src calls its function with; it calls src once) through the
// simulator twice, on the scenario ScenarioFromHistory builds from the
// window: with each server's default weight throughout, and with the
// weights the monitor wrote, each from the cycle that wrote it. Both
// runs see the same requests (per seed).
func Benefit(src func(fn func(history.Record)) error, service string, opts BenefitOptions) (BenefitResult, error) {
	res := BenefitResult{Service: service, Scheduler: opts.Scheduler, Seeds: opts.Seeds}
	if res.Scheduler == "" {
		res.Scheduler = "wrr"
	}
	if len(res.Seeds) == 0 {
		res.Seeds = []uint64{1, 2, 3}
	}
	if !opts.From.Before(opts.Until) {
		return res, fmt.Errorf("benefit: the window from %s to %s is empty", stamp(opts.From), stamp(opts.Until))
	}
	inWindow := func(r *history.Record) bool {
		return r.Service == service && r.Time.After(opts.From) && !r.Time.After(opts.Until)
	}
	var cells []weightCell
	var earliest, latest time.Time // the service's records, in the window or not
	windowed := func(fn func(history.Record)) error {
		return src(func(r history.Record) {
			if r.Service == service {
				if earliest.IsZero() || r.Time.Before(earliest) {
					earliest = r.Time
				}
				if r.Time.After(latest) {
					latest = r.Time
				}
			}
			if !inWindow(&r) {
				return
			}
			cells = append(cells, weightCell{t: r.Time, server: r.Server, before: r.WeightBefore, after: r.WeightAfter})
			fn(r)
		})
	}
	o := opts.History
	o.MaxCycles = math.MaxInt32 // the window bounds the cycles
	sc, rep, err := ScenarioFromHistorySource(windowed, service, o)
	res.Report = rep
	if len(cells) == 0 && err != nil {
		if latest.IsZero() {
			return res, fmt.Errorf("%w: the history holds no record of %s", ErrNoRecords, service)
		}
		return res, fmt.Errorf("%w: no record of %s after %s up to %s; its records run from %s to %s",
			ErrNoRecords, service, stamp(opts.From), stamp(opts.Until), stamp(earliest), stamp(latest))
	}
	if err != nil {
		return res, err
	}
	if err := checkSize(sc, opts.MaxRequests); err != nil {
		return res, fmt.Errorf("%s: %w", service, err)
	}
	slices.SortStableFunc(cells, func(a, b weightCell) int { return a.t.Compare(b.t) })
	res.First, res.Last = cells[0].t, cells[len(cells)-1].t
	res.Span = sc.Duration

	replay, writes := recordedWeights(sc, cells)
	res.Writes = writes
	for _, s := range sc.Servers {
		res.Servers = append(res.Servers, s.Name)
		res.StaticWeights = append(res.StaticWeights, s.Weight)
	}
	static := sim.PolicySpec{Name: sim.PolNominal}
	monitor := sim.PolicySpec{Name: sim.PolRecorded, Replay: replay}
	b := &sim.Bench{Scenarios: []*sim.Scenario{sc}, Policies: []sim.PolicySpec{static, monitor},
		Schedulers: []string{res.Scheduler}, Seeds: res.Seeds, Workers: opts.Workers}
	results, err := b.Run()
	if err != nil {
		return res, fmt.Errorf("benefit of %s: %w", service, err)
	}
	for _, r := range results {
		switch r.Policy {
		case sim.PolNominal:
			res.Static.Seeds = append(res.Static.Seeds, r)
		case sim.PolRecorded:
			res.Monitor.Seeds = append(res.Monitor.Seeds, r)
		}
	}
	res.Static.summarise()
	res.Monitor.summarise()
	return res, nil
}

// checkSize refuses a scenario whose runs would simulate more than max
// requests (0: DefaultMaxRequests), or draw more than ten times that many
// candidates (the stream thins a Poisson process at the peak rate): a
// history that recorded a burst of millions of connections a second must
// not make the replay allocate without bound.
func checkSize(sc *sim.Scenario, max float64) error {
	if max <= 0 {
		max = DefaultMaxRequests
	}
	base, dur := sc.BaseRate(), sc.Duration.Seconds()
	expected, peak := dur, 1.0
	for _, f := range sc.Workload.Flash {
		expected += (f.Factor - 1) * f.Length.Seconds()
		peak *= math.Max(1, f.Factor)
	}
	expected *= base
	if expected > max || base*peak*dur > 10*max {
		return fmt.Errorf("%w: the window is about %.3g requests to simulate per run (%.0f connections/s over %s, up to ×%.3g), more than %.3g: replay a shorter window",
			ErrTooLarge, expected, base, sc.Duration, peak, max)
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// summarise sets the means over the seeds.
func (f *BenefitFigures) summarise() {
	var req, failed int
	for _, r := range f.Seeds {
		f.P99 += r.P99
		f.Overload += r.Overload
		req += r.Requests
		failed += r.Failed
	}
	if n := float64(len(f.Seeds)); n > 0 {
		f.P99 /= n
		f.Overload /= n
	}
	if req > 0 {
		f.Failed = float64(failed) / float64(req)
	}
}

// recordedWeights is the weight schedule the cells record: each server's
// kernel weight as its first cycle of the window read it, then the weight
// after every cycle that ended with another weight, at that cycle's time
// (simulated time 0 is the window's first cycle, as in the scenario). A
// change made between two cycles (the backlog guard, an operator) shows
// in the next cycle's weight before and is replayed at that cycle. It
// also returns the number of writes.
func recordedWeights(sc *sim.Scenario, cells []weightCell) (*sim.WeightReplay, int) {
	index := map[string]int{}
	for k, s := range sc.Servers {
		index[s.Name] = k
	}
	w := &sim.WeightReplay{Initial: make([]int, len(sc.Servers))}
	cur := make([]int, len(sc.Servers))
	seen := make([]bool, len(sc.Servers))
	t0 := cells[0].t
	for _, c := range cells {
		k, ok := index[c.server]
		if !ok {
			continue
		}
		if !seen[k] {
			// A server first recorded after the window's first cycle has,
			// until then, the weight its first cycle read.
			seen[k] = true
			w.Initial[k], cur[k] = c.before, c.before
		}
		if c.after != cur[k] {
			at := c.t.Sub(t0)
			w.Writes = append(w.Writes, sim.WeightWrite{At: at, Server: k, Weight: c.after})
			cur[k] = c.after
		}
	}
	slices.SortStableFunc(w.Writes, func(a, b sim.WeightWrite) int { return cmp.Compare(a.At, b.At) })
	return w, len(w.Writes)
}
