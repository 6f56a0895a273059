package tune

import (
	"cmp"
	"container/heap"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/policy"
	"lvs-feedback/sim"
)

// HistoryOptions set how ScenarioFromHistory reads a history; a zero
// field takes its default.
type HistoryOptions struct {
	// MinCycles is the fewest cycles of the service the builder accepts
	// (default 20).
	MinCycles int
	// MinBusy is the busy fraction below which a cycle says nothing of a
	// server's capacity (default 0.05). Lower than the controller's
	// weight.light (policy.DefaultLight): the controller must act on a few cycles,
	// the builder takes a median over all of them.
	MinBusy float64
	// Change is the relative move of a level (a server's capacity, the
	// arrival rate) that counts as a change (default 0.25).
	Change float64
	// Hold is how many measured cycles a move must last, the median of
	// them beyond Change, before it counts (default 3).
	Hold int
	// MaxCycles is the most cycles the scenario is built from: the
	// latest ones (default DefaultMaxCycles). It bounds the builder's
	// memory whatever the history's length.
	MaxCycles int
}

// DefaultMaxCycles is a day of cycles at the default 5 s interval.
const DefaultMaxCycles = 17280

func (o HistoryOptions) withDefaults() HistoryOptions {
	if o.MinCycles <= 0 {
		o.MinCycles = 20
	}
	if o.MinBusy <= 0 {
		o.MinBusy = 0.05
	}
	if o.Change <= 0 {
		o.Change = 0.25
	}
	if o.Hold <= 0 {
		o.Hold = 3
	}
	if o.MaxCycles <= 0 {
		o.MaxCycles = DefaultMaxCycles
	}
	return o
}

// HistoryServer is one server of a scenario built from the history, as
// measured.
type HistoryServer struct {
	Name  string  // RIP:PORT
	Cores float64 // the agent's raw cpus, median
	// Speed is the per-core speed (1 = the median server's per-core
	// speed) at the start of the history.
	Speed float64
	// Disk is the disk's speed (1 = the median server's), 0 when the
	// scenario has no I/O.
	Disk   float64
	Weight int
	// Measured and DiskMeasured count the cycles that measured the CPU
	// and the disk capacity; a server never measured gets the median.
	Measured, DiskMeasured int
}

// LoadStep is a stretch of time whose arrival rate moved by more than
// the Change from the base rate: a flash crowd of the scenario.
type LoadStep struct {
	At, Length time.Duration
	Rate       float64 // connections per second
	Factor     float64 // Rate ÷ the base rate
}

// HistoryReport says what ScenarioFromHistory measured and how it
// approximated it; Write prints it.
type HistoryReport struct {
	Service string
	Cycles  int
	// Truncated: earlier cycles than MaxCycles were left out.
	Truncated bool
	Interval  time.Duration
	Servers   []HistoryServer
	// BaseRate is the median arrival rate (connections per second, the
	// service's new connections per interval), Utilisation the
	// scenario's workload utilisation that gives it.
	BaseRate, Utilisation    float64
	MeanDemand, IOMeanDemand time.Duration
	Load                     []LoadStep
	Events                   []sim.EventSpec
	// Approximations are the ways the scenario differs from the
	// history, one sentence each.
	Approximations []string
}

// ScenarioFromHistory builds a simulator scenario from the recorded
// history of one service (records of other services are ignored), the
// capacities and the load pattern as measured:
//
//   - a server per recorded server; its cores are the agent's raw cpus;
//     its capacity is the connections it served (policy.ServedConnections)
//     per unit of its CPU busy fraction — the estimate the capacity
//     controller makes — median over the cycles where it was busy at
//     least MinBusy. By the utilisation law, busy = rate × demand ÷
//     (cores × speed), so the mean demand at speed 1 is busy × cores ÷
//     rate; the scenario's mean demand is the median server's, and each
//     server's per-core speed is relative to it;
//   - a disk per server, when the controller found the disk the
//     bottleneck of some server in some cycle: its speed from the
//     connections served per unit of disk I/O busy, the same way, and
//     an I/O demand per request;
//   - the load: the base rate is the median of the service's new
//     connections per second; a stretch of Hold cycles or more whose
//     rate moves by more than Change from it is a flash crowd of that
//     factor (the simulator has no rate that follows a recorded curve);
//   - capacity changes: a server whose capacity moves by more than
//     Change for Hold measured cycles gets a speed event (disk_degrade
//     for the disk) at that time, of the factor of its new level;
//   - ownership: down and drained stretches become fail/recover and
//     drain/undrain events.
//
// It refuses a history without the service's records, with fewer than
// MinCycles cycles, or in which no server was ever measured.
func ScenarioFromHistory(records []history.Record, service string, opts HistoryOptions) (*sim.Scenario, HistoryReport, error) {
	return ScenarioFromHistorySource(func(fn func(history.Record)) error {
		for _, r := range records {
			fn(r)
		}
		return nil
	}, service, opts)
}

// ScenarioFromHistorySource is ScenarioFromHistory on the records src
// calls its function with (it calls src once). It keeps no record: each
// record of the service becomes one cell of its server's columns — a
// few numbers, what the builder reads of it — and the other services'
// records are passed over.
func ScenarioFromHistorySource(src func(fn func(history.Record)) error, service string, opts HistoryOptions) (*sim.Scenario, HistoryReport, error) {
	o := opts.withDefaults()
	rep := HistoryReport{Service: service}

	// Cycles are the distinct record times, servers the distinct names,
	// each in order of first appearance; a server's cells are kept in
	// that order of cycles, and put in time order once all are read.
	var times []time.Time
	var names []string
	var cols []*serverColumns
	server := map[string]int{}
	cycleOf := map[int64]int{} // a long history has thousands of cycles
	diskBound := false
	// Past 2 × MaxCycles cycles only the latest MaxCycles are kept, and
	// records before them are passed over: memory stays bounded.
	var cutoff time.Time
	keepLatest := func(n int) {
		order := timeOrder(times)
		if len(order) <= n {
			return
		}
		drop := len(order) - n
		keep := order[drop:]
		cutoff = times[keep[0]]
		rep.Truncated = true
		kept := make([]time.Time, len(keep))
		clear(cycleOf)
		for k, c := range keep {
			kept[k] = times[c]
			cycleOf[kept[k].UnixNano()] = k
		}
		for _, col := range cols {
			col.grow(len(times))
			col.reorder(keep)
		}
		times = kept
	}
	err := src(func(r history.Record) {
		if r.Service != service || r.Time.Before(cutoff) {
			return
		}
		c, ok := cycleOf[r.Time.UnixNano()]
		if !ok {
			if len(times) >= 2*o.MaxCycles {
				keepLatest(o.MaxCycles)
				if r.Time.Before(cutoff) {
					return
				}
			}
			c = len(times)
			cycleOf[r.Time.UnixNano()] = c
			times = append(times, r.Time)
		}
		i, ok := server[r.Server]
		if !ok {
			i = len(names)
			server[r.Server] = i
			names = append(names, r.Server)
			cols = append(cols, &serverColumns{})
		}
		if r.Capacity != nil && r.Capacity.Bottleneck == "disk" {
			diskBound = true
		}
		cols[i].set(c, &r, o.MinBusy) // a later record of the same cycle replaces the cell
	})
	if err != nil {
		return nil, rep, err
	}
	if len(times) == 0 {
		return nil, rep, fmt.Errorf("history: no records of service %q", service)
	}
	keepLatest(o.MaxCycles)
	order := timeOrder(times)
	sorted := make([]time.Time, len(times))
	for k, c := range order {
		sorted[k] = times[c]
	}
	for _, col := range cols {
		col.grow(len(times))
		col.reorder(order)
	}
	times = sorted
	if len(times) < o.MinCycles {
		return nil, rep, fmt.Errorf("history of %s: %d cycles, need at least %d", service, len(times), o.MinCycles)
	}
	rep.Cycles = len(times)
	var gaps []float64
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]).Seconds())
	}
	interval := median(gaps)
	if !(interval > 0) {
		return nil, rep, fmt.Errorf("history of %s: cycles %v apart: not a history", service, interval)
	}
	rep.Interval = time.Duration(interval * float64(time.Second)).Round(time.Millisecond)

	// Observations: served per unit of CPU and of disk busy, per cycle
	// (NaN where not measured); rate: the service's new connections per
	// second.
	nan := math.NaN()
	cpuObs := make([][]float64, len(names))
	diskObs := make([][]float64, len(names))
	rate := make([]float64, len(times))
	counted := make([]bool, len(times))
	cores := make([]float64, len(names))
	for i, col := range cols {
		cpuObs[i], diskObs[i] = col.cpuObs, col.diskObs
		if !diskBound {
			for c := range diskObs[i] {
				diskObs[i][c] = nan
			}
		}
		var cs []float64
		for c := range times {
			if n := col.newConns[c]; !math.IsNaN(n) {
				rate[c] += n
				counted[c] = true
			}
			if col.cpus[c] > 0 {
				cs = append(cs, col.cpus[c])
			}
		}
		cores[i] = median(cs)
		if !(cores[i] > 0) {
			cores[i] = 1
			rep.Approximations = append(rep.Approximations, fmt.Sprintf("%s: the agent never reported its cpus: 1 core", names[i]))
		}
	}
	for c := range rate {
		if counted[c] {
			rate[c] /= interval
		} else {
			rate[c] = nan
		}
	}

	// Capacity levels: connections per second at full busy, at the start
	// of the history, and the changes after.
	cpuSegs := make([][]segment, len(names))
	diskSegs := make([][]segment, len(names))
	var demands, ioDemands []float64 // per server: demand at speed 1
	for i := range names {
		cpuSegs[i] = segments(cpuObs[i], o.Hold, o.Change)
		if len(cpuSegs[i]) > 0 {
			demands = append(demands, cores[i]*interval/cpuSegs[i][0].level)
		}
		if diskBound {
			diskSegs[i] = segments(diskObs[i], o.Hold, o.Change)
			if len(diskSegs[i]) > 0 {
				ioDemands = append(ioDemands, interval/diskSegs[i][0].level)
			}
		}
	}
	if len(demands) == 0 {
		return nil, rep, fmt.Errorf("history of %s: no server was ever measured (served connections with a CPU busy of at least %g and an agent reply)", service, o.MinBusy)
	}
	demand := median(demands)
	ioDemand := 0.0
	if len(ioDemands) > 0 {
		ioDemand = median(ioDemands)
	} else if diskBound {
		diskBound = false
		rep.Approximations = append(rep.Approximations, "the disk was a bottleneck but no disk I/O busy was ever measured: no I/O in the scenario")
	}
	rep.MeanDemand = time.Duration(demand * float64(time.Second))
	rep.IOMeanDemand = time.Duration(ioDemand * float64(time.Second))

	sc := &sim.Scenario{
		Name:        "history",
		Description: fmt.Sprintf("built by lvs-tune from the history of %s: %d cycles from %s", service, len(times), times[0].UTC().Format(time.RFC3339)),
		Duration:    time.Duration(float64(len(times)) * interval * float64(time.Second)).Round(time.Millisecond),
		Interval:    rep.Interval,
		Workload:    sim.Workload{MeanDemand: rep.MeanDemand, IOMeanDemand: rep.IOMeanDemand},
	}
	at := func(c int) time.Duration {
		// The figures of cycle c cover the interval before it.
		return max(0, times[c].Sub(times[0])-rep.Interval).Round(time.Millisecond)
	}
	for i, name := range names {
		hs := HistoryServer{Name: name, Cores: cores[i], Speed: 1, Weight: serverWeight(cols[i])}
		if segs := cpuSegs[i]; len(segs) > 0 {
			hs.Speed = demand * segs[0].level / (cores[i] * interval)
			hs.Measured = countMeasured(cpuObs[i])
			for _, s := range segs[1:] {
				rep.Events = append(rep.Events, sim.EventSpec{At: at(s.start), Server: name, Kind: sim.EvSpeed, Factor: round3(s.level / segs[0].level)})
			}
		} else {
			rep.Approximations = append(rep.Approximations, fmt.Sprintf("%s: never measured (CPU busy below %g, or no agent): given the median server's per-core speed", name, o.MinBusy))
		}
		if diskBound {
			hs.Disk = 1
			if segs := diskSegs[i]; len(segs) > 0 {
				hs.Disk = ioDemand * segs[0].level / interval
				hs.DiskMeasured = countMeasured(diskObs[i])
				for _, s := range segs[1:] {
					rep.Events = append(rep.Events, sim.EventSpec{At: at(s.start), Server: name, Kind: sim.EvDiskDegrade, Factor: round3(s.level / segs[0].level)})
				}
			} else {
				rep.Approximations = append(rep.Approximations, fmt.Sprintf("%s: disk never measured: given the median server's disk", name))
			}
		}
		hs.Speed, hs.Disk = round3(hs.Speed), round3(hs.Disk)
		rep.Events = append(rep.Events, ownershipEvents(cols[i], name, at)...)
		rep.Servers = append(rep.Servers, hs)
		sc.Servers = append(sc.Servers, sim.ServerSpec{Name: name, Speed: hs.Speed, Cores: hs.Cores, Weight: hs.Weight, Disk: hs.Disk})
	}

	// The load: a base rate and flash crowds where it moved.
	rep.BaseRate = median(slices.DeleteFunc(slices.Clone(rate), math.IsNaN))
	if !(rep.BaseRate > 0) {
		return nil, rep, fmt.Errorf("history of %s: no new connections recorded", service)
	}
	var nominal float64
	for _, s := range sc.Servers {
		nominal += s.Cores * s.Speed
	}
	rep.Utilisation = round3(rep.BaseRate * demand / nominal)
	sc.Workload.Utilisation = rep.Utilisation
	for _, s := range segments(rate, o.Hold, o.Change) {
		if f := s.level / rep.BaseRate; math.Abs(f-1) > o.Change {
			step := LoadStep{At: at(s.start), Rate: s.level, Factor: round3(f)}
			if s.end == len(times) { // to the end: there is no cycle s.end
				step.Length = sc.Duration - step.At
			} else {
				step.Length = at(s.end) - step.At
			}
			rep.Load = append(rep.Load, step)
			sc.Workload.Flash = append(sc.Workload.Flash, sim.FlashCrowd{At: step.At, Length: step.Length, Factor: step.Factor})
		}
	}
	slices.SortStableFunc(rep.Events, func(a, b sim.EventSpec) int { return cmp.Compare(a.At, b.At) })
	sc.Events = slices.Clone(rep.Events)

	if rep.Truncated {
		rep.Approximations = append(rep.Approximations,
			fmt.Sprintf("the scenario is built from the latest %d cycles, from %s on; the history's earlier cycles are left out (-max-cycles)", len(times), times[0].UTC().Format(time.RFC3339)))
	}
	rep.Approximations = append(rep.Approximations,
		fmt.Sprintf("the load is a base rate of %.1f/s and %d flash crowds where the rate moved by more than %.0f %% for %d cycles or more; smaller and shorter moves are left out", rep.BaseRate, len(rep.Load), 100*o.Change, o.Hold),
		fmt.Sprintf("a capacity change is a move of more than %.0f %% lasting %d measured cycles, taken as a speed (or disk_degrade) step at its first cycle; slower drifts and shorter dips are left out", 100*o.Change, o.Hold),
		"a lower capacity from CPU taken by another process (a background job) is modelled as a slower server, not as a background event: the history cannot tell them apart",
		"the demand distribution is the simulator's default (bounded Pareto); the history records no per-request demands",
		"memory pressure is not modelled (no memory events)",
		"the kernel scheduler is not recorded: the scenario runs under the simulator's default schedulers unless -sched says otherwise",
	)
	if err := sc.Check(); err != nil {
		return nil, rep, fmt.Errorf("history of %s: the scenario built is not valid: %w", service, err)
	}
	return sc, rep, nil
}

// timeOrder returns the places in times of the cycles in time order.
func timeOrder(times []time.Time) []int {
	order := make([]int, len(times))
	for c := range order {
		order[c] = c
	}
	slices.SortFunc(order, func(a, b int) int { return times[a].Compare(times[b]) })
	return order
}

// Cell states of serverColumns: the ones the builder tells apart.
const (
	noRecord uint8 = iota
	stateManaged
	stateDown
	stateDrained
	stateOther
)

// serverColumns are a server's figures, one cell per cycle.
type serverColumns struct {
	state           []uint8   // noRecord, or the record's state
	newConns        []float64 // NaN: unknown
	cpuObs, diskObs []float64 // connections served per unit of CPU and of disk I/O busy; NaN: not measured
	cpus            []float64 // the agent's cpus; 0: no figure
	weight          []uint16  // the default weight that stands, within 1…6553
}

// set fills cycle c's cell from r.
func (s *serverColumns) set(c int, r *history.Record, minBusy float64) {
	nan := math.NaN()
	s.grow(c + 1)
	switch r.State {
	case "managed":
		s.state[c] = stateManaged
	case "down":
		s.state[c] = stateDown
	case "drained":
		s.state[c] = stateDrained
	default:
		s.state[c] = stateOther
	}
	w := r.DefaultWeight
	if w == 0 {
		w = r.Configured
	}
	s.weight[c] = uint16(min(max(w, 1), 6553))
	s.newConns[c], s.cpuObs[c], s.diskObs[c], s.cpus[c] = nan, nan, nan, 0
	if r.NewConns != nil {
		s.newConns[c] = float64(*r.NewConns)
	}
	a := r.Agent
	if a == nil {
		return
	}
	if a.Raw.CPUs > 0 {
		s.cpus[c] = a.Raw.CPUs
	}
	if r.State != "managed" || r.NewConns == nil {
		return
	}
	served := policy.ServedConnections(*r.NewConns, r.ActiveDelta)
	if b := a.CPUUsed; b >= minBusy {
		s.cpuObs[c] = served / b
	}
	if b := a.Raw.DiskIOBusy; b >= minBusy {
		s.diskObs[c] = served / b
	}
}

// grow adds empty cells up to n.
func (s *serverColumns) grow(n int) {
	nan := math.NaN()
	for len(s.state) < n {
		s.state = append(s.state, noRecord)
		s.newConns = append(s.newConns, nan)
		s.cpuObs = append(s.cpuObs, nan)
		s.diskObs = append(s.diskObs, nan)
		s.cpus = append(s.cpus, 0)
		s.weight = append(s.weight, 0)
	}
}

// reorder puts the cells in the order of order (order[k]: the cell that
// goes to k), growing the columns to its length with empty cells; cells
// order does not name are dropped (the caller grows the columns to every
// cell order names).
func (s *serverColumns) reorder(order []int) {
	s.grow(len(order))
	s.state = permute(s.state, order)
	s.newConns = permute(s.newConns, order)
	s.cpuObs = permute(s.cpuObs, order)
	s.diskObs = permute(s.diskObs, order)
	s.cpus = permute(s.cpus, order)
	s.weight = permute(s.weight, order)
}

func permute[T any](xs []T, order []int) []T {
	out := make([]T, len(order))
	for k, c := range order {
		out[k] = xs[c]
	}
	return out
}

// serverWeight is the server's default weight as last recorded (the
// operator's, else the configured one), at least 1.
func serverWeight(col *serverColumns) int {
	w := 1
	for c, st := range col.state {
		if st != noRecord {
			w = int(col.weight[c])
		}
	}
	return w
}

// ownershipEvents turns the server's down and drained stretches into
// fail/recover and drain/undrain events.
func ownershipEvents(col *serverColumns, name string, at func(int) time.Duration) []sim.EventSpec {
	var out []sim.EventSpec
	prev := stateManaged
	for c, st := range col.state {
		if st == noRecord || st == prev {
			continue
		}
		ev := func(kind string) { out = append(out, sim.EventSpec{At: at(c), Server: name, Kind: kind}) }
		switch prev {
		case stateDown:
			ev(sim.EvRecover)
		case stateDrained:
			ev(sim.EvUndrain)
		}
		switch st {
		case stateDown:
			ev(sim.EvFail)
		case stateDrained:
			ev(sim.EvDrain)
		}
		prev = st
	}
	return out
}

// segment is a stretch of cycles [start, end) of one level.
type segment struct {
	start, end int
	level      float64
}

// segments splits a series (NaN: not measured) into stretches of one
// level: a new one starts at a measured point beyond change of the
// current level whose next hold measured points have a median beyond it
// in the same direction. Each level is then the median of its points,
// and neighbours whose levels are not change apart are merged. A move
// is measured against the larger of the current level and the first: at
// a level far below the first (a server left a sliver of its capacity)
// the relative noise is large, and its wanderings are not changes. No
// measured point: no segment.
func segments(xs []float64, hold int, change float64) []segment {
	var idx []int
	for i, x := range xs {
		if !math.IsNaN(x) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	values := func(from, to int) []float64 { // measured points from..to-1 of idx
		var v []float64
		for _, k := range idx[from:to] {
			v = append(v, xs[k])
		}
		return v
	}
	level := median(values(0, min(hold, len(idx))))
	first := level
	move := func(x, level float64) int {
		d := change * max(level, first)
		switch {
		case x > level+d:
			return 1
		case x < level-d:
			return -1
		}
		return 0
	}
	starts := []int{0}
	for p := 1; p+hold <= len(idx); p++ {
		d := move(xs[idx[p]], level)
		if d == 0 {
			continue
		}
		if m := median(values(p, p+hold)); move(m, level) == d {
			starts = append(starts, p)
			level = m
		}
	}
	var out []segment
	var last runningMedian // the values of out's last segment
	for k, p := range starts {
		end, q := len(xs), len(idx)
		if k+1 < len(starts) {
			q = starts[k+1]
			end = idx[q]
		}
		start := 0
		if k > 0 {
			start = idx[p]
		}
		vs := values(p, q)
		seg := segment{start: start, end: end, level: median(vs)}
		if k > 0 && move(seg.level, out[len(out)-1].level) == 0 {
			// Not a change after all: one stretch, whose level is the
			// median of all its values (kept as they come, so that a long
			// run of such merges stays linear).
			prev := &out[len(out)-1]
			prev.end = end
			for _, v := range vs {
				last.add(v)
			}
			prev.level = last.median()
			continue
		}
		last = runningMedian{}
		for _, v := range vs {
			last.add(v)
		}
		out = append(out, seg)
	}
	return out
}

// runningMedian is the median of values that only ever grow in number, as
// median computes it: the lower half in a max-heap, the upper half in a
// min-heap, the lower holding the middle value of an odd count.
type runningMedian struct{ lo, hi floatHeap }

func (m *runningMedian) add(x float64) {
	if m.lo.Len() == 0 || x <= -m.lo[0] {
		heap.Push(&m.lo, -x) // negated: a min-heap of -x is a max-heap of x
	} else {
		heap.Push(&m.hi, x)
	}
	switch {
	case m.lo.Len() > m.hi.Len()+1:
		heap.Push(&m.hi, -heap.Pop(&m.lo).(float64))
	case m.hi.Len() > m.lo.Len():
		heap.Push(&m.lo, -heap.Pop(&m.hi).(float64))
	}
}

func (m *runningMedian) median() float64 {
	switch {
	case m.lo.Len() == 0:
		return math.NaN()
	case m.lo.Len() > m.hi.Len():
		return -m.lo[0]
	}
	return (-m.lo[0] + m.hi[0]) / 2
}

// floatHeap is a min-heap of float64 (container/heap).
type floatHeap []float64

func (h floatHeap) Len() int           { return len(h) }
func (h floatHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h floatHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floatHeap) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *floatHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func countMeasured(xs []float64) int {
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}

// median of xs (NaN when empty); xs is not changed.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// Write prints the report: the servers, the load, the events and the
// approximations.
func (r HistoryReport) Write(w io.Writer) error {
	p := &errWriter{w: w}
	p.printf("scenario from the history of %s: %d cycles of %s\n", r.Service, r.Cycles, r.Interval)
	p.printf("servers (per-core speed and disk relative to the median server's, from connections served per unit of busy, median over the measured cycles):\n")
	p.printf("  %-22s %6s %7s %6s %7s %9s %14s\n", "SERVER", "CORES", "SPEED", "DISK", "WEIGHT", "MEASURED", "DISK MEASURED")
	for _, s := range r.Servers {
		p.printf("  %-22s %6g %7.3f %6.3f %7d %9d %14d\n", s.Name, s.Cores, s.Speed, s.Disk, s.Weight, s.Measured, s.DiskMeasured)
	}
	p.printf("load: base %.1f connections/s = utilisation %.3f; mean demand %s at speed 1", r.BaseRate, r.Utilisation, r.MeanDemand.Round(time.Microsecond))
	if r.IOMeanDemand > 0 {
		p.printf(", I/O %s at disk speed 1", r.IOMeanDemand.Round(time.Microsecond))
	}
	p.printf("\n")
	for _, l := range r.Load {
		p.printf("  flash at %s for %s: %.1f/s, ×%g\n", l.At, l.Length, l.Rate, l.Factor)
	}
	p.printf("events:\n")
	if len(r.Events) == 0 {
		p.printf("  none\n")
	}
	for _, e := range r.Events {
		arg := ""
		if e.Factor != 0 {
			arg = fmt.Sprintf(" ×%g", e.Factor)
		}
		p.printf("  %s %s%s at %s\n", e.Server, e.Kind, arg, e.At)
	}
	p.printf("approximations:\n")
	for _, a := range r.Approximations {
		p.printf("  - %s\n", a)
	}
	return p.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, a...)
	}
}
