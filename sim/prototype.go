package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
)

// Prototype controllers for issue 7 §4. They are experiments, not the
// product: they exist to measure, on the same request streams as the real
// monitor, whether an idea from §4 is worth implementing in monitor/. They
// observe exactly what lvs-monitor observes — the simulated table (weights,
// estimator-refreshed connection counters), the simulated agents' reports
// and the probes — and keep the monitor's ownership rules in their simplest
// form (an operator's 0 is left alone; a failed probe writes 0 and the
// weight comes back when the server answers).
//
// The capacity controller: every interval, each server's effective
// capacity is estimated as the connections it received per unit of CPU
// busy fraction (throughput ÷ utilisation); the estimates are smoothed
// with the bias-corrected geometric decay of algorithm.md §3
//
//	U_{i+1} = ((1 − α)·O_i + (α − α^{i+1})·U_i) / (1 − α^{i+1})
//
// and the weights are set proportional to them (the largest at `res`, 100
// unless set), but written only when a weight moves by more than a
// dead-band (relative): fewer, larger steps. With `sat`, a server whose CPU
// is at least that busy is saturated, its throughput is its capacity, and a
// lower estimate is taken at once (only good news is smoothed).
//
// The in-flight variant adds a fast path from the director's own gauge
// (Prequal's signal, field.md): a server whose active connections per unit
// of weight exceed `inflight` times the median is running behind its
// weight; its estimate is cut at once by that ratio, instead of waiting for
// the smoothed estimate.
var prototypes = map[string]string{
	"proto-capacity":          "alpha=0.5 band=0.10",
	"proto-capacity-raw":      "alpha=0 band=0",    // no smoothing, no dead-band
	"proto-capacity-nosmooth": "alpha=0 band=0.10", // dead-band only
	"proto-capacity-noband":   "alpha=0.5 band=0",  // smoothing only
	// Coarse weights (largest 20), slower smoothing, 20 % dead-band.
	"proto-capacity-q20": "alpha=0.7 band=0.2 res=20",
	// The same, and a saturated server's lower estimate is taken at once.
	"proto-capacity-sat": "alpha=0.8 band=0.2 res=20 sat=0.9",
	"proto-inflight":     "alpha=0.7 band=0.15 inflight=2",
	// The LVS formula with steps proportional to the default weight.
	"proto-relative": "relative: # defaults\n",
}

type protoCapacity struct {
	name     string
	alpha    float64 // geometric decay of the smoothing; 0 = last observation only
	band     float64 // relative dead-band of a write
	inflight float64 // fast-path ratio (0: off)
	res      float64 // weight of the largest server (the weights' resolution)
	sat      float64 // busy fraction from which a lower estimate is taken at once (0: off)
	interval float64
	minBusy  float64 // below this busy fraction a server's capacity is not measurable

	tab *simTable
	ag  *simAgents
	pr  *simProber

	written   []int
	drained   []bool
	down      []bool
	restore   []int
	est       []float64 // smoothed capacity estimate U
	nobs      []int     // observations folded into est
	lastConns []uint32
	haveConns []bool
}

func newPrototype(name, params string, sc *Scenario) (policy, error) {
	if base, ok := strings.CutPrefix(params, "relative: "); ok {
		return newProtoRelative(name, base, sc)
	}
	p := &protoCapacity{name: name, interval: sc.Interval.Seconds(), minBusy: 0.05}
	vals := map[string]*float64{"alpha": &p.alpha, "band": &p.band, "inflight": &p.inflight, "res": &p.res, "sat": &p.sat}
	p.res = 100
	for _, f := range strings.Fields(params) {
		k, v, ok := strings.Cut(f, "=")
		dst := vals[k]
		if !ok || dst == nil {
			return nil, fmt.Errorf("prototype %s: bad parameter %q", name, f)
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("prototype %s: %s: %w", name, k, err)
		}
		*dst = x
	}
	return p, nil
}

func (p *protoCapacity) Name() string                { return p.name }
func (p *protoCapacity) Kernel() bool                { return true }
func (p *protoCapacity) Interval() float64           { return p.interval }
func (p *protoCapacity) AfterEvent(*run, *EventSpec) {}
func (p *protoCapacity) Route(*run, int) int         { return -1 }

func (p *protoCapacity) Start(r *run) error {
	n := len(r.sc.Servers)
	for k, s := range r.sc.Servers {
		r.dests[k].Weight = s.Weight
	}
	p.tab = &simTable{r: r, sched: r.schedN}
	p.ag = &simAgents{r: r}
	p.pr = &simProber{r: r, timeout: 2 * time.Second}
	p.written = nominalWeights(r.sc)
	p.drained = make([]bool, n)
	p.down = make([]bool, n)
	p.restore = make([]int, n)
	p.est = make([]float64, n)
	p.nobs = make([]int, n)
	p.lastConns = make([]uint32, n)
	p.haveConns = make([]bool, n)
	return nil
}

func (p *protoCapacity) write(k, from, to int) {
	if from == to {
		return
	}
	if err := p.tab.SetWeight(simService, serverAddr(k), from, to); err == nil {
		p.written[k] = to
	}
}

func (p *protoCapacity) Tick(r *run) {
	p.pr.measure()
	dests, err := p.tab.Destinations(simService)
	if err != nil {
		return
	}
	inRotation := make([]bool, len(dests))
	for k, d := range dests {
		delta := d.Connections - p.lastConns[k]
		fresh := p.haveConns[k]
		p.lastConns[k], p.haveConns[k] = d.Connections, true
		if d.Weight != p.written[k] { // someone else wrote it
			p.drained[k] = d.Weight == 0
			p.down[k] = false
			p.written[k] = d.Weight
		}
		if p.drained[k] {
			continue
		}
		if _, perr := p.pr.Probe(context.Background(), serverAddr(k), monitor.ProbeConfig{}); perr != nil {
			if !p.down[k] {
				p.restore[k] = d.Weight
				p.down[k] = true
				p.write(k, d.Weight, 0)
			}
			continue
		}
		if p.down[k] {
			p.down[k] = false
			p.write(k, d.Weight, max(1, p.restore[k]))
			inRotation[k] = true
			continue
		}
		inRotation[k] = true
		rep, aerr := p.ag.Fetch(context.Background(), agentAddr(k))
		if aerr != nil || !fresh || rep.CPU < p.minBusy {
			continue // no measurement this interval: keep the estimate
		}
		obs := float64(delta) / rep.CPU
		p.nobs[k]++
		i := float64(p.nobs[k])
		ai := math.Pow(p.alpha, i)
		switch {
		case p.nobs[k] == 1 || p.alpha == 0:
			p.est[k] = obs
		case p.sat > 0 && rep.CPU >= p.sat && obs < p.est[k]:
			// Saturated: throughput is the capacity, now. Bad news is
			// taken at once; only good news is smoothed.
			p.est[k] = obs
		default:
			p.est[k] = ((1-p.alpha)*obs + (p.alpha-ai)*p.est[k]) / (1 - ai)
		}
	}
	if p.inflight > 0 {
		p.fastPath(dests, inRotation)
	}
	maxEst := 0.0
	for k := range dests {
		if inRotation[k] && p.nobs[k] > 0 {
			maxEst = math.Max(maxEst, p.est[k])
		}
	}
	if maxEst <= 0 {
		return
	}
	for k := range dests {
		if !inRotation[k] || p.nobs[k] == 0 {
			continue
		}
		cur := r.dests[k].Weight // after any restore above
		to := max(1, int(math.Round(p.res*p.est[k]/maxEst)))
		if math.Abs(float64(to-cur)) > p.band*float64(cur) {
			p.write(k, cur, to)
		}
	}
}

// fastPath cuts the estimate of a server whose in-flight connections per
// unit of weight run far above the others'.
func (p *protoCapacity) fastPath(dests []ipvs.Destination, inRotation []bool) {
	var per []float64
	for k, d := range dests {
		if inRotation[k] && d.Weight > 0 && p.nobs[k] > 0 {
			per = append(per, float64(d.ActiveConns+1)/float64(d.Weight))
		}
	}
	if len(per) < 2 {
		return
	}
	slices.Sort(per)
	med := per[len(per)/2]
	if len(per)%2 == 0 {
		med = (per[len(per)/2-1] + per[len(per)/2]) / 2
	}
	for k, d := range dests {
		if !inRotation[k] || d.Weight == 0 || p.nobs[k] == 0 {
			continue
		}
		if r := float64(d.ActiveConns+1) / float64(d.Weight); r > p.inflight*med {
			p.est[k] *= med / r
		}
	}
}

// protoRelative is the LVS formula of the real monitor — the product's own
// monitor.InputLoads, ResponseLoad, AggregateLoad, NextWeight — with one
// change: the step and the threshold scale with each server's default
// weight (gain·default/10, threshold·default/10), so that a server
// configured at 40 moves four times as far per interval as one at 10 and
// every server's weight keeps its proportion while they all rise or fall.
// Today's formula takes the same absolute step for every server, which
// distorts the shares of unequal servers whenever weights move together.
// The configuration is monitor.DefaultConfig with the overrides in base.
type protoRelative struct {
	name string
	cfg  monitor.Config

	tab *simTable
	ag  *simAgents
	pr  *simProber

	def       []int
	ctrl      []float64
	written   []int
	drained   []bool
	down      []bool
	restore   []int
	lastConns []uint32
	haveConns []bool
}

func newProtoRelative(name, base string, sc *Scenario) (policy, error) {
	cfg, err := MonitorConfig(name, base, sc)
	if err != nil {
		return nil, err
	}
	return &protoRelative{name: name, cfg: cfg}, nil
}

func (p *protoRelative) Name() string                { return p.name }
func (p *protoRelative) Kernel() bool                { return true }
func (p *protoRelative) Interval() float64           { return p.cfg.Interval.Seconds() }
func (p *protoRelative) AfterEvent(*run, *EventSpec) {}
func (p *protoRelative) Route(*run, int) int         { return -1 }

func (p *protoRelative) Start(r *run) error {
	n := len(r.sc.Servers)
	p.def = nominalWeights(r.sc)
	p.ctrl = make([]float64, n)
	for k, w := range p.def {
		r.dests[k].Weight = w
		p.ctrl[k] = float64(w)
	}
	p.tab = &simTable{r: r, sched: r.schedN}
	p.ag = &simAgents{r: r}
	p.pr = &simProber{r: r, timeout: p.cfg.ProbeTimeout}
	p.written = slices.Clone(p.def)
	p.drained = make([]bool, n)
	p.down = make([]bool, n)
	p.restore = make([]int, n)
	p.lastConns = make([]uint32, n)
	p.haveConns = make([]bool, n)
	return nil
}

func (p *protoRelative) write(k, from, to int) {
	if from == to {
		return
	}
	if err := p.tab.SetWeight(simService, serverAddr(k), from, to); err == nil {
		p.written[k] = to
	}
}

func (p *protoRelative) Tick(r *run) {
	p.pr.measure()
	dests, err := p.tab.Destinations(simService)
	if err != nil {
		return
	}
	var rows []int
	var conns []int64
	rtt := make([]time.Duration, len(dests))
	for k, d := range dests {
		delta := int64(d.Connections - p.lastConns[k])
		if !p.haveConns[k] {
			delta = -1
		}
		p.lastConns[k], p.haveConns[k] = d.Connections, true
		if d.Weight != p.written[k] { // the operator's: 0 drains, N is the new default
			p.drained[k] = d.Weight == 0
			p.down[k] = false
			p.written[k] = d.Weight
			if d.Weight > 0 {
				p.def[k] = d.Weight
			}
			p.ctrl[k] = float64(d.Weight)
		}
		if p.drained[k] {
			continue
		}
		t, perr := p.pr.Probe(context.Background(), serverAddr(k), monitor.ProbeConfig{})
		if perr != nil {
			if !p.down[k] {
				p.restore[k] = d.Weight
				p.down[k] = true
				p.write(k, d.Weight, 0)
			}
			continue
		}
		if p.down[k] {
			p.down[k] = false
			to := max(1, p.restore[k])
			p.write(k, d.Weight, to)
			p.ctrl[k] = float64(to)
			continue
		}
		rtt[k] = t
		rows = append(rows, k)
		conns = append(conns, delta)
	}
	inputs := monitor.InputLoads(conns)
	for i, k := range rows {
		rep, aerr := p.ag.Fetch(context.Background(), agentAddr(k))
		if aerr != nil {
			continue // a dead agent is not a dead server: keep the weight
		}
		load := monitor.AggregateLoad(monitor.Inputs{
			Input: inputs[i], CPU: rep.CPU, Memory: rep.Memory, Disk: rep.Disk,
			Response: monitor.ResponseLoad(rtt[k], r.sc.Probe.Reference), Process: rep.Processes,
		}, p.cfg.Coefficients)
		wp := p.cfg.Weight
		f := float64(p.def[k]) / 10
		wp.Gain *= f
		thr := max(0, int(math.Round(float64(wp.Threshold)*f)))
		p.ctrl[k] = monitor.NextWeight(p.ctrl[k], load, p.def[k], wp)
		to := monitor.RoundWeight(p.ctrl[k])
		cur := dests[k].Weight
		if monitor.PassesThreshold(cur, to, thr) {
			p.write(k, cur, to)
		}
	}
}
