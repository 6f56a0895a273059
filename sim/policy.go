package sim

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// policy decides the weights (kernel policies, scheduled by the kernel
// scheduler under test) or places each connection itself (the absolute
// references).
type policy interface {
	Name() string
	// Kernel reports whether connections go through the kernel scheduler
	// and the table's weights; otherwise Route places them.
	Kernel() bool
	// Interval is the period of Tick in seconds (0: no ticks).
	Interval() float64
	// Start installs the initial state (weights in r.dests).
	Start(r *run) error
	Tick(r *run)
	// AfterEvent runs after the simulator applied a scenario event.
	AfterEvent(r *run, e *EventSpec)
	// Route places request req (non-kernel policies only): a server index,
	// or -1.
	Route(r *run, req int) int
}

// cyclePhaser is a policy whose ticks are finer than its cycles (the
// monitor: guard checks between cycles). phase places its first cycle at
// fraction u of its cycle interval and returns its first tick.
type cyclePhaser interface {
	phase(u float64) float64
}

// Policy names of the baselines and references.
const (
	PolEqual   = "equal"
	PolNominal = "nominal"
	PolLVS     = "lvs"
	PolDefault = "default"
	PolIdeal   = "ideal"
	PolOracle  = "oracle"
	PolPooled  = "pooled"
	// PolIdealPoll is the ideal weights as they stand at each of the
	// policy's ticks (every interval): what a controller that polls at the
	// interval and knew exactly what it saw could reach.
	PolIdealPoll = "ideal-poll"
	// PolUnchecked is the configured weights with no health check at
	// all: a dead server keeps its weight, as on a director where nothing
	// takes it out (what the kernel measurements of a dying server ran).
	PolUnchecked = "nominal-unchecked"
)

// DefaultPolicies is the policy set of a bench run, in table order.
var DefaultPolicies = []string{PolEqual, PolNominal, PolLVS, PolDefault, PolIdeal, PolOracle, PolPooled}

// PolicySpec names a policy and, for monitor policies, the monitor
// configuration (TOML without [[service]]: the simulator adds the service
// and its servers).
type PolicySpec struct {
	Name string
	// Monitor is the monitor TOML for a monitor policy; empty for the
	// built-in baselines. "default" and "lvs" have theirs built in.
	Monitor string
	// IdealLag, for an "ideal-lag:DURATION" policy, delays the
	// ideal-weights counterfactual's writes by DURATION.
	IdealLag time.Duration
	// IdealPoll, for an "ideal-poll:DURATION" policy, is its period
	// ("ideal-poll" alone: the scenario's interval).
	IdealPoll time.Duration
	// Replay, for a PolRecorded policy, is the recorded weight schedule
	// it writes.
	Replay *WeightReplay
}

// LVSConfigTOML is the LVS dynamic-feedback formula exactly as documented:
// the web-cluster example coefficients, A = 5, target 0.95, scale 10,
// threshold 1, at the interval the LVS document recommends at its short end;
// without the project's later additions (slow start, fail-static freeze,
// fall/rise counts: the document marks a server down at the first missed
// answer), which the LVS document does not have.
const LVSConfigTOML = `interval = "5s"
[availability]
slow_start = "0s"
freeze_share = 1
fall = 1
rise = 1
[coefficients]
input = 0.1
cpu = 0.3
memory = 0.1
disk = 0.1
response = 0.3
process = 0.1
[weight]
controller = "lvs"
gain = 5.0
target = 0.95
scale = 10
min = 1
threshold = 1
[backlog_guard]
check = "0s"
`

// BuiltinPolicy returns the spec of a built-in policy name.
func BuiltinPolicy(name string) (PolicySpec, error) {
	switch name {
	case PolEqual, PolNominal, PolIdeal, PolOracle, PolPooled, PolIdealPoll, PolUnchecked:
		return PolicySpec{Name: name}, nil
	case PolLVS:
		return PolicySpec{Name: name, Monitor: LVSConfigTOML}, nil
	case PolDefault:
		// The project's default controller: monitor.DefaultConfig, i.e.
		// a configuration that sets nothing but the service.
		return PolicySpec{Name: name, Monitor: "# monitor defaults\n"}, nil
	}
	// ideal-poll:DURATION — the ideal weights as they stand every
	// DURATION: the limit of a controller that looks that often.
	if rest, ok := strings.CutPrefix(name, PolIdealPoll+":"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return PolicySpec{}, fmt.Errorf("policy %q: period must be a positive duration such as 1s", name)
		}
		return PolicySpec{Name: name, IdealPoll: d}, nil
	}
	// ideal-lag:DURATION — the ideal weights, written DURATION after each
	// capacity event: the limit of a controller that learns of an event
	// that much later.
	if rest, ok := strings.CutPrefix(name, "ideal-lag:"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return PolicySpec{}, fmt.Errorf("policy %q: lag must be a positive duration such as 5s", name)
		}
		return PolicySpec{Name: name, IdealLag: d}, nil
	}
	return PolicySpec{}, fmt.Errorf("unknown policy %q (built in: %s, %s, ideal-poll[:DURATION], ideal-lag:DURATION; or NAME=monitor.toml)",
		name, strings.Join(DefaultPolicies, ", "), PolUnchecked)
}

// IsReference reports whether a policy ignores the kernel scheduler (it is
// then run once per seed and shown under every scheduler).
func (p PolicySpec) IsReference() bool { return p.Name == PolOracle || p.Name == PolPooled }

func (p PolicySpec) build(sc *Scenario) (policy, error) {
	iv := sc.Interval.Seconds()
	switch {
	case p.Monitor != "":
		return newMonitorPolicy(p.Name, p.Monitor, sc)
	case p.Replay != nil:
		if err := p.Replay.check(sc); err != nil {
			return nil, err
		}
		return &replayPolicy{name: p.Name, w: p.Replay}, nil
	case p.IdealLag > 0:
		return &idealPolicy{name: p.Name, lag: p.IdealLag.Seconds()}, nil
	case p.IdealPoll > 0:
		return &idealPolicy{name: p.Name, poll: p.IdealPoll.Seconds()}, nil
	}
	switch p.Name {
	case PolEqual:
		return &staticPolicy{name: p.Name, interval: iv, weights: func(sc *Scenario) []int {
			w := make([]int, len(sc.Servers))
			for i := range w {
				w[i] = 10
			}
			return w
		}}, nil
	case PolNominal:
		return &staticPolicy{name: p.Name, interval: iv, weights: nominalWeights}, nil
	case PolUnchecked:
		return &staticPolicy{name: p.Name, weights: nominalWeights}, nil // interval 0: never ticks
	case PolIdeal:
		return &idealPolicy{name: PolIdeal}, nil
	case PolIdealPoll:
		return &idealPolicy{name: PolIdealPoll, poll: iv}, nil
	case PolOracle:
		return &oraclePolicy{}, nil
	case PolPooled:
		return &pooledPolicy{}, nil
	}
	return nil, fmt.Errorf("unknown policy %q", p.Name)
}

func nominalWeights(sc *Scenario) []int {
	w := make([]int, len(sc.Servers))
	for i, s := range sc.Servers {
		w[i] = s.Weight
	}
	return w
}

// staticPolicy keeps fixed weights, with a health check at the interval
// (as keepalived would): a server that stops answering gets weight 0, and
// its weight back when it answers again. It never sees capacity changes.
type staticPolicy struct {
	name     string
	interval float64
	weights  func(*Scenario) []int
	restore  []int // weight to restore, per server taken out by the check
}

func (p *staticPolicy) Name() string      { return p.name }
func (p *staticPolicy) Kernel() bool      { return true }
func (p *staticPolicy) Interval() float64 { return p.interval }
func (p *staticPolicy) Start(r *run) error {
	for k, w := range p.weights(r.sc) {
		r.dests[k].Weight = w
	}
	p.restore = make([]int, len(r.dests))
	return nil
}
func (p *staticPolicy) Tick(r *run) {
	for k, s := range r.srv[:len(r.dests)] {
		switch {
		case s.down && r.dests[k].Weight > 0:
			p.restore[k] = r.dests[k].Weight
			r.setWeight(k, 0, true)
		case !s.down && p.restore[k] > 0:
			if r.dests[k].Weight == 0 && !r.drained[k] {
				r.setWeight(k, p.restore[k], true)
			}
			p.restore[k] = 0
		}
	}
}
func (p *staticPolicy) AfterEvent(*run, *EventSpec) {}
func (p *staticPolicy) Route(*run, int) int         { return -1 }

// idealPolicy is the ideal-weights counterfactual: weights proportional to
// every server's true current capacity, rewritten the instant anything
// changes (0 for a failed or drained server). With a lag it writes them
// that long after each event instead: the best a controller can do that
// learns of every change exactly, but lag seconds late. With a poll period
// it writes them only at its ticks, as they stand then: the best a
// controller can do that looks once a period — a change waits for the
// next look, between 0 and one period.
type idealPolicy struct {
	name    string
	lag     float64
	poll    float64
	pending []pendingWeights // lagged writes, in time order
}

type pendingWeights struct {
	at      float64
	weights []int
}

// idealLagStep is the tick of a lagged ideal policy, the resolution of its
// delay.
const idealLagStep = 0.05

func (p *idealPolicy) Name() string { return p.name }
func (*idealPolicy) Kernel() bool   { return true }
func (p *idealPolicy) Interval() float64 {
	switch {
	case p.poll > 0:
		return p.poll
	case p.lag > 0:
		return idealLagStep
	}
	return 0
}
func (*idealPolicy) Start(r *run) error {
	for k, w := range r.idealWeights() {
		r.dests[k].Weight = w
	}
	return nil
}
func (p *idealPolicy) Tick(r *run) {
	if p.poll > 0 {
		p.write(r, r.idealWeights())
		return
	}
	for len(p.pending) > 0 && p.pending[0].at <= r.now {
		p.write(r, p.pending[0].weights)
		p.pending = p.pending[1:]
	}
}
func (p *idealPolicy) AfterEvent(r *run, _ *EventSpec) {
	switch {
	case p.poll > 0:
		return // written at the next tick
	case p.lag > 0:
		p.pending = append(p.pending, pendingWeights{at: r.now + p.lag, weights: r.idealWeights()})
		return
	}
	p.write(r, r.idealWeights())
}
func (*idealPolicy) write(r *run, weights []int) {
	for k, w := range weights {
		if r.drained[k] {
			w = 0 // an operator's drain since the event stands
		}
		r.setWeight(k, w, true)
	}
}
func (*idealPolicy) Route(*run, int) int { return -1 }

// oraclePolicy is the PS-greedy oracle: it knows every server's true
// capacity and every request's demand and remaining work, and sends each
// connection where it adds the least to the sum of response times of the
// requests present (assuming no further arrivals). Ties go to the lower
// index.
type oraclePolicy struct{}

func (*oraclePolicy) Name() string                { return PolOracle }
func (*oraclePolicy) Kernel() bool                { return false }
func (*oraclePolicy) Interval() float64           { return 0 }
func (*oraclePolicy) Start(*run) error            { return nil }
func (*oraclePolicy) Tick(*run)                   {}
func (*oraclePolicy) AfterEvent(*run, *EventSpec) {}
func (*oraclePolicy) Route(r *run, req int) int {
	best, bestCost := -1, math.Inf(1)
	d := r.st.Demand[req]
	for k, s := range r.srv {
		if s.down || r.drained[k] || s.capacity <= 0 {
			continue
		}
		s.advance(r.now)
		if c := s.addedDelay(d); c < bestCost {
			best, bestCost = k, c
		}
	}
	return best
}

// pooledPolicy sends everything to one processor-sharing server with the
// cluster's whole current capacity (servers up and not drained).
type pooledPolicy struct{}

func (*pooledPolicy) Name() string                { return PolPooled }
func (*pooledPolicy) Kernel() bool                { return false }
func (*pooledPolicy) Interval() float64           { return 0 }
func (*pooledPolicy) Tick(*run)                   {}
func (*pooledPolicy) AfterEvent(*run, *EventSpec) {}
func (*pooledPolicy) Start(r *run) error {
	r.pool = newServer(ServerSpec{Name: "pool", Speed: 1, Cores: 1})
	r.srv = append(r.srv, r.pool)
	r.updatePool()
	return nil
}
func (*pooledPolicy) Route(r *run, _ int) int { return len(r.srv) - 1 }
