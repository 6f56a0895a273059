package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"lvs-feedback/agent"
)

// Event kinds of the discrete-event loop.
const (
	evArrival uint8 = iota
	evDepart
	evInactive
	evTick
	evAgent
	evEstimator
	evScenario
	evSample
	evDiskDepart // a request's I/O is done: on to the CPU (disk.go)
	evDrift      // one step of a drift event: k is the event, ver the step
	evIdleEnd    // a keep-alive connection's idle time ends (kernel accounting): ver 1 closes it, 0 lets it expire
	evGiveUp     // a client gives up on a connection its hung server holds (kernel accounting)
	evTimeline   // the end of a timeline window (timeline.go)
)

// event is one entry of the event queue, keyed by (time, seq): simultaneous
// events run in the order they were scheduled, so a run is a pure function
// of its inputs.
type event struct {
	kind uint8
	k    int32
	ver  uint64
}

// weightChange is one entry of a destination's weight history.
type weightChange struct {
	t      float64
	k      int
	w      int
	policy bool // written by the policy (false: by the operator)
}

// agentState is a simulated lvs-agent's latest published sample.
type agentState struct {
	have     bool
	started  bool
	report   agent.Report
	lastBusy float64
	lastT    float64
	// the disk's busy integral at the last sample (disk.go)
	lastDiskBusy float64
	// the agent's running CPU totals (agent.CPUTime) since it started
	totals agent.CPUTime
}

// run is one simulation: one scenario, seed, scheduler and policy.
type run struct {
	sc     *Scenario
	st     *Stream
	seed   uint64
	pol    policy
	sched  Scheduler
	schedN string

	now     float64
	end     float64 // arrivals stop here
	ev      minHeap[event]
	seq     uint64
	srv     []*server // the real servers; with the pooled policy, one more: the pool
	pool    *server
	dests   []Dest   // the kernel's view (weights, connection gauges)
	conns   []uint32 // cumulative connections scheduled (live)
	pub     []uint32 // as last published by the rate estimator
	drained []bool   // by the operator
	tab     *table   // the kernel accounting's state queues (nil: the linger model)
	tl      *timelineRec
	agents  []agentState
	agentR  []*rand.Rand
	probeR  []*rand.Rand

	resp     []float32 // per request: response time; -1 failed; NaN never finished
	served   []int32   // per request: server index
	writes   []int     // policy weight writes per server
	history  []weightChange
	initW    []int       // weights at the start
	idealCur []int       // the ideal weights now (updateIdeal)
	idealW   [][]int     // ideal weights after each scenario event (nil: not a capacity event)
	samples  [][]float32 // per server: busy fraction in each sample period
	// diskSamples are the disks' busy fractions, as samples (nil
	// without I/O); lastDisk their busy integrals at the last sample.
	diskSamples [][]float32
	lastDisk    []float64
	sampleDt    float64
	lastBusy    []float64
	shares      [][]float32 // per sample: per server weight
	ideals      [][]float32 // per sample: per server ideal weight
	tickErrs    int
	firstErr    error

	driftFrom []float64   // per scenario event: a drift's starting speed factor
	driftOf   map[int]int // per server: the drift event moving its speed now
}

// newRun prepares a run; nothing is simulated until loop.
func newRun(sc *Scenario, st *Stream, seed uint64, schedName string, pol policy) (*run, error) {
	n := len(sc.Servers)
	r := &run{
		sc: sc, st: st, seed: seed, pol: pol, schedN: schedName,
		end:      sc.Duration.Seconds(),
		dests:    make([]Dest, n),
		conns:    make([]uint32, n),
		pub:      make([]uint32, n),
		drained:  make([]bool, n),
		agents:   make([]agentState, n),
		writes:   make([]int, n),
		resp:     make([]float32, st.Len()),
		served:   make([]int32, st.Len()),
		idealW:   make([][]int, len(sc.Events)),
		sampleDt: 1,
	}
	if sc.Director.Accounting != AccountingLinger {
		r.tab = newTable(sc, n)
	}
	for i := range r.resp {
		r.resp[i] = float32(math.NaN())
		r.served[i] = -1
	}
	for i, s := range sc.Servers {
		r.srv = append(r.srv, newServer(s))
		r.srv[i].disk = newDisk(sc, s)
		r.agentR = append(r.agentR, newRand(seed, streamAgent+uint64(i)))
		r.probeR = append(r.probeR, newRand(seed, streamProbe+uint64(i)))
	}
	r.updateIdeal()
	if err := pol.Start(r); err != nil {
		return nil, err
	}
	if pol.Kernel() {
		r.initW = make([]int, n)
		for k := range r.dests {
			r.initW[k] = r.dests[k].Weight
		}
		s, err := NewScheduler(schedName, r.dests)
		if err != nil {
			return nil, err
		}
		r.sched = s
	}
	r.samples = make([][]float32, len(r.srv))
	r.lastBusy = make([]float64, len(r.srv))
	if sc.Workload.hasIO() {
		r.diskSamples = make([][]float32, n)
		r.lastDisk = make([]float64, n)
	}
	return r, nil
}

func (r *run) schedule(t float64, kind uint8, k int, ver uint64) {
	r.seq++
	r.ev.push(t, r.seq, event{kind: kind, k: int32(k), ver: ver})
}

// setWeight changes destination k's weight in the kernel table: the
// scheduler's upd_dest runs, and the change is recorded.
func (r *run) setWeight(k, w int, byPolicy bool) {
	if r.dests[k].Weight == w {
		return
	}
	r.dests[k].Weight = w
	if r.sched != nil {
		r.sched.DestChanged(r.dests)
	}
	if byPolicy {
		r.writes[k]++
	}
	r.history = append(r.history, weightChange{t: r.now, k: k, w: w, policy: byPolicy})
}

// updateIdeal recomputes the ideal weights — proportional to every
// server's true current capacity, 0 when it is down or drained, the
// smallest integers within IdealShareTolerance (idealIntegerWeights) —
// after anything that changes a capacity: the search runs once per change,
// not per sample.
func (r *run) updateIdeal() {
	caps := make([]float64, len(r.sc.Servers))
	for k := range caps {
		if s := r.srv[k]; !s.down && !r.drained[k] {
			caps[k] = r.trueCapacity(k) // the CPU's, or the disk's when it is the bottleneck
		}
	}
	r.idealCur = idealIntegerWeights(caps)
}

// idealWeights returns a copy of the current ideal weights.
func (r *run) idealWeights() []int { return slices.Clone(r.idealCur) }

// reschedule plans server k's next departure.
func (r *run) reschedule(k int) {
	s := r.srv[k]
	s.ver++
	if t := s.nextDeparture(); !math.IsInf(t, 1) {
		r.schedule(t, evDepart, k, s.ver)
	}
}

// addInactive counts a connection as inactive on k for d seconds.
func (r *run) addInactive(k int, d float64) {
	if d <= 0 || k >= len(r.dests) {
		return
	}
	r.dests[k].Inactive++
	r.schedule(r.now+d, evInactive, k, 0)
}

// closed accounts for a served connection on destination k whose response
// has gone out, followed by idle seconds of keep-alive.
func (r *run) closed(k int, idle float64) {
	if r.tab == nil {
		r.dests[k].Active--
		r.addInactive(k, idle+r.sc.Director.Linger.Seconds())
		return
	}
	if idle <= 0 {
		r.dests[k].Active--
		r.enter(qTimeWait, k)
		return
	}
	// Idle but ESTABLISHED: still active until it closes, or until the
	// ESTABLISHED timeout drops it from the table first.
	if est := r.sc.Director.TCP.Seconds(); idle >= est {
		r.schedule(r.now+est, evIdleEnd, k, 0)
	} else {
		r.schedule(r.now+idle, evIdleEnd, k, 1)
	}
}

// lose fails request req, in flight on server k as k crashes or hangs
// (s.hung already set).
func (r *run) lose(k int, req int32) {
	r.resp[req] = -1
	if k >= len(r.dests) {
		return
	}
	r.tl.add(k, true)
	switch {
	case r.tab == nil:
		r.dests[k].Active--
		r.addInactive(k, r.sc.Director.Linger.Seconds())
	case r.srv[k].hung:
		// ESTABLISHED until the client gives up and closes its side.
		r.schedule(r.now+r.sc.Client.Timeout.Seconds(), evGiveUp, k, 0)
	default:
		// The host resets it.
		r.dests[k].Active--
		r.enter(qClose, k)
	}
}

// arrive dispatches request i.
func (r *run) arrive(i int) {
	var k int
	if r.pol.Kernel() {
		k = r.sched.Schedule(r.dests)
	} else {
		k = r.pol.Route(r, i)
	}
	if k < 0 {
		r.resp[i] = -1 // no destination available
		return
	}
	r.served[i] = int32(k)
	if k < len(r.conns) {
		r.conns[k]++
		r.tl.add(k, false)
	}
	s := r.srv[k]
	if s.down {
		r.resp[i] = -1
		if k >= len(r.dests) {
			return
		}
		r.tl.add(k, true)
		switch {
		case r.tab == nil:
			// The linger model: inactive for the linger, crash or hang.
			r.addInactive(k, r.sc.Director.Linger.Seconds())
		case s.hung:
			r.enter(qSynRecv, k)
		default:
			r.enter(qClose, k)
		}
		return
	}
	if k < len(r.dests) {
		r.dests[k].Active++
	}
	if r.startIO(k, i) {
		return // on the disk first (disk.go)
	}
	s.advance(r.now)
	s.push(r.st.Demand[i], i)
	r.reschedule(k)
}

// depart completes every request of server k whose tag is reached.
func (r *run) depart(k int) {
	s := r.srv[k]
	s.advance(r.now)
	for s.done() {
		req := s.pop()
		r.resp[req] = float32(r.now - r.st.Arrive[req])
		if k < len(r.dests) {
			r.closed(k, float64(r.st.Idle[req]))
		}
	}
	r.reschedule(k)
}

// applyEvent applies scenario event i.
func (r *run) applyEvent(i int) {
	e := &r.sc.Events[i]
	k := e.server
	s := r.srv[k]
	s.advance(r.now)
	switch e.Kind {
	case EvBackground:
		s.background = e.Fraction
	case EvSpeed:
		s.speedFactor = e.Factor
		delete(r.driftOf, k) // a speed step stops a drift in progress
	case EvCrash, EvHang:
		s.hung = e.Kind == EvHang && r.tab != nil
		if !s.down {
			for _, j := range s.jobs {
				r.lose(k, j.val)
			}
			s.jobs = s.jobs[:0]
			r.failDisk(k)
			s.down = true
		}
	case EvRecover:
		s.down, s.hung = false, false
	case EvDrain:
		r.drained[k] = true
		if r.pol.Kernel() {
			r.setWeight(k, 0, false) // ipvsadm -e … -w 0
		}
	case EvUndrain:
		r.drained[k] = false
		if r.pol.Kernel() {
			r.setWeight(k, e.Weight, false)
		}
	case EvAgentDown:
		s.agentDown = true
	case EvAgentUp:
		s.agentDown = false
	case EvDiskDegrade, EvMemory:
		applyResourceEvent(s, e)
	case EvDrift:
		r.startDrift(i)
		return
	}
	r.serverChanged(k, e)
	if changesCapacity(e.Kind) {
		r.idealW[i] = r.idealWeights()
	}
}

// serverChanged brings the rates, the departure plan, the pooled reference
// and the policy up to date with server k's new condition after event e.
func (r *run) serverChanged(k int, e *EventSpec) {
	s := r.srv[k]
	s.recompute()
	r.reschedule(k)
	r.syncDisk(k)
	if r.pool != nil {
		r.updatePool()
	}
	r.updateIdeal()
	r.pol.AfterEvent(r, e)
}

// startDrift begins drift event i: the speed factor starts moving from its
// present value. Its ideal weights, against which settling is judged, are
// those at the drift's end (other servers as they are now).
func (r *run) startDrift(i int) {
	e := &r.sc.Events[i]
	s := r.srv[e.server]
	if r.driftFrom == nil {
		r.driftFrom = make([]float64, len(r.sc.Events))
		r.driftOf = map[int]int{}
	}
	r.driftOf[e.server] = i // a newer drift replaces one in progress
	r.driftFrom[i] = s.speedFactor
	from := s.speedFactor
	s.speedFactor = e.Factor
	s.recompute()
	r.updateIdeal()
	r.idealW[i] = r.idealWeights()
	s.speedFactor = from
	s.recompute()
	r.updateIdeal()
	r.schedule(r.now+DriftStep.Seconds(), evDrift, i, 1)
}

// driftFactor is a drift's speed factor after step of its steps: linear
// from from to the event's factor, reached at Over.
func driftFactor(e *EventSpec, from float64, step uint64) float64 {
	frac := math.Min(1, float64(step)*DriftStep.Seconds()/e.Over.Seconds())
	return from + (e.Factor-from)*frac
}

// driftStep applies step of drift event i and plans the next one, unless
// a later speed or drift event on the server has taken over.
func (r *run) driftStep(i int, step uint64) {
	e := &r.sc.Events[i]
	if j, ok := r.driftOf[e.server]; !ok || j != i {
		return
	}
	s := r.srv[e.server]
	s.advance(r.now)
	s.speedFactor = driftFactor(e, r.driftFrom[i], step)
	r.serverChanged(e.server, e)
	if float64(step)*DriftStep.Seconds() < e.Over.Seconds() {
		r.schedule(r.now+DriftStep.Seconds(), evDrift, i, step+1)
	} else {
		delete(r.driftOf, e.server)
	}
}

// agentSample is server k's agent taking its periodic sample.
func (r *run) agentSample(k int) {
	s := r.srv[k]
	a := &r.agents[k]
	rng := r.agentR[k]
	// Always draw the same noise, so every policy sees the same sequence.
	nz := [4]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	sigma := r.sc.Agent.Noise
	if s.down {
		a.have, a.started = false, false // the machine is off: the agent restarts with it
		return
	}
	s.advance(r.now)
	if a.started && r.now > a.lastT {
		cpu := (s.busyInt - a.lastBusy) / (r.now - a.lastT)
		n := float64(len(s.jobs))
		conns := float64(r.serverConns(k))
		procs := (n + s.background*s.spec.Cores) / s.spec.Cores
		mem, disk, ioBusy := r.resourceLoads(k, a, conns)
		a.report = agent.Report{
			Schema:    agent.SchemaVersion,
			Time:      r.simTime(),
			Source:    "sim",
			CPU:       clampLoad(cpu+sigma*nz[0], 1),
			Memory:    clampLoad(mem+sigma*nz[1], 1),
			Disk:      clampLoad(disk+sigma*nz[2], 1),
			Processes: clampLoad(procs+sigma*nz[3], agent.MaxLoad),
		}
		a.report.Raw.CPUBusy = a.report.CPU
		a.report.Raw.CPUs = s.spec.Cores
		a.report.Raw.WindowSeconds = r.now - a.lastT
		fillResourceRaw(&a.report.Raw, s, mem, ioBusy)
		a.totals.Add(a.report.CPU, a.report.Raw.WindowSeconds)
		t := a.totals
		if !r.sc.Agent.NoCPUTime {
			a.report.CPUTime = &t
		}
		a.have = true
	}
	if !a.started {
		a.totals = agent.CPUTime{Since: r.simTime()}
	}
	a.started = true
	a.lastBusy, a.lastT = s.busyInt, r.now
	a.lastDiskBusy = r.diskBusyInt(k)
}

func clampLoad(v, hi float64) float64 { return math.Max(0, math.Min(hi, v)) }

// simEpoch is the wall-clock time the simulated clock starts at.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (r *run) simTime() time.Time {
	return simEpoch.Add(time.Duration(r.now * float64(time.Second)))
}

// sample records the per-second series (utilisation, weights).
func (r *run) sample() {
	n := len(r.sc.Servers)
	w := make([]float32, n)
	iw := make([]float32, n)
	for k, s := range r.srv {
		s.advance(r.now)
		r.samples[k] = append(r.samples[k], float32((s.busyInt-r.lastBusy[k])/r.sampleDt))
		r.lastBusy[k] = s.busyInt
	}
	for k := range r.diskSamples {
		b := r.diskBusyInt(k)
		r.diskSamples[k] = append(r.diskSamples[k], float32((b-r.lastDisk[k])/r.sampleDt))
		r.lastDisk[k] = b
	}
	for k := 0; k < n; k++ {
		w[k] = float32(r.dests[k].Weight)
		iw[k] = float32(r.idealCur[k])
	}
	r.shares = append(r.shares, w)
	r.ideals = append(r.ideals, iw)
}

// loop runs the simulation to the end and until every admitted request has
// left (arrivals and periodic work stop at the scenario's duration).
func (r *run) loop() error {
	if r.st.Len() > 0 {
		r.schedule(r.st.Arrive[0], evArrival, 0, 0)
	}
	for i := range r.sc.Events {
		r.schedule(r.sc.Events[i].At.Seconds(), evScenario, i, 0)
	}
	if iv := r.pol.Interval(); iv > 0 {
		// The controller started at some moment unrelated to the
		// scenario's events: its first cycle falls at a seeded random
		// phase of its interval — the same fraction of it for every
		// policy, so that policies of one interval look at the same
		// moments and none is luckier with an event than another.
		u := newRand(r.seed, streamTick).Float64()
		first := u * iv
		if c, ok := r.pol.(cyclePhaser); ok {
			first = c.phase(u)
		}
		r.schedule(first, evTick, 0, 0)
	}
	ph := newRand(r.seed, streamPhase)
	win := r.sc.Agent.Window.Seconds()
	for k := range r.sc.Servers {
		r.schedule(ph.Float64()*win, evAgent, k, 0)
	}
	r.schedule(r.sc.Director.Estimator.Seconds(), evEstimator, 0, 0)
	r.schedule(r.sampleDt, evSample, 0, 0)
	if r.tl != nil {
		r.schedule(r.tl.dt, evTimeline, 0, 0)
	}

	for len(r.ev) > 0 {
		t, e := r.ev.pop()
		periodic := e.kind == evTick || e.kind == evAgent || e.kind == evEstimator || e.kind == evSample || e.kind == evScenario || e.kind == evDrift || e.kind == evTimeline
		if t > r.end && periodic {
			continue // after the end only departures and expiries remain
		}
		r.expire(t)
		r.now = t
		switch e.kind {
		case evArrival:
			i := int(e.k)
			r.arrive(i)
			if i+1 < r.st.Len() {
				r.schedule(r.st.Arrive[i+1], evArrival, i+1, 0)
			}
		case evDepart:
			if e.ver == r.srv[e.k].ver {
				r.depart(int(e.k))
			}
		case evInactive:
			r.dests[e.k].Inactive--
		case evIdleEnd:
			r.dests[e.k].Active--
			if e.ver == 1 {
				r.enter(qTimeWait, int(e.k))
			}
		case evGiveUp:
			r.dests[e.k].Active--
			r.enter(qCloseWait, int(e.k))
		case evTimeline:
			r.tl.window(r)
			r.schedule(r.now+r.tl.dt, evTimeline, 0, 0)
		case evTick:
			r.pol.Tick(r)
			r.schedule(r.now+r.pol.Interval(), evTick, 0, 0)
		case evAgent:
			r.agentSample(int(e.k))
			r.schedule(r.now+win, evAgent, int(e.k), 0)
		case evEstimator:
			copy(r.pub, r.conns)
			r.schedule(r.now+r.sc.Director.Estimator.Seconds(), evEstimator, 0, 0)
		case evScenario:
			r.applyEvent(int(e.k))
		case evDrift:
			r.driftStep(int(e.k), e.ver)
		case evSample:
			r.sample()
			r.schedule(r.now+r.sampleDt, evSample, 0, 0)
		case evDiskDepart:
			if d := r.srv[e.k].disk; d != nil && e.ver == d.ver {
				r.diskDepart(int(e.k))
			}
		}
	}
	if r.firstErr != nil {
		return fmt.Errorf("%d policy ticks failed, first: %w", r.tickErrs, r.firstErr)
	}
	return nil
}

// updatePool sets the pooled server to the cluster's current total:
// the capacity of every server that is up and not drained, each request
// at most as fast as the fastest such server's core.
func (r *run) updatePool() {
	p := r.pool
	p.advance(r.now)
	var capSum, fullSum, bg, pj float64
	for k, s := range r.srv[:len(r.sc.Servers)] {
		if s.down || r.drained[k] {
			continue
		}
		capSum += s.capacity
		fullSum += s.full
		bg += s.bgBusy * s.full
		pj = math.Max(pj, s.perJob)
	}
	p.perJob, p.capacity, p.full = pj, capSum, fullSum
	p.bgBusy = 0
	if fullSum > 0 {
		p.bgBusy = bg / fullSum
	}
	p.down = capSum <= 0
	r.reschedule(len(r.srv) - 1)
}
