package policy

import (
	"fmt"
	"math"
	"time"
)

// Kind says where a decision came from.
type Kind uint8

// The kinds of decision.
const (
	// KindCycle: the monitor's cycle (availability rules and the
	// controller, then the backlog guard's holds).
	KindCycle Kind = iota
	// KindGuard: a backlog check between cycles.
	KindGuard
	// KindOperator: lvsctl drain or undrain.
	KindOperator
	// KindMirror: a follower director takes the writer's weight.
	KindMirror
	// KindReplay: the writer replays an operator's edit made on a follower.
	KindReplay
)

// Decision is the record of one server's weight at one moment: what the
// kernel held, what is to be written and why, and the full computation.
// It is made once; the monitor applies it, and its logs, metrics, status
// and explain read it.
type Decision struct {
	Kind Kind
	// Before is the kernel's weight as read for this decision; the write
	// is a compare-and-set from it.
	Before int
	// To is the weight to write (Before when Write is false).
	To    int
	Write bool
	// Reason says why the weight or the ownership changes; empty when
	// nothing changes.
	Reason string
	// Record is the ownership record once the write succeeded (or, with
	// no write, as it stands); RecordChanged says it differs from the one
	// the decision started from.
	Record        DestRecord
	RecordChanged bool
	// OnWrite is what a successful write changes in the server's state.
	OnWrite Commit
	Trace   Trace
}

// NewDecision is a decision of kind that writes nothing: the kernel holds
// before, and rec stands.
func NewDecision(kind Kind, before int, rec DestRecord) Decision {
	return Decision{Kind: kind, Before: before, To: before, Record: rec, Trace: Trace{Load: math.NaN(), Ramp: 1}}
}

// Write returns a decision of kind to write to over before, for a reason,
// that leaves the ownership record rec as it is: a follower taking its
// writer's weight (the writer's record comes with it) or a writer
// replaying an operator's edit (the next cycle's reconcile classifies it).
func Write(kind Kind, before, to int, rec DestRecord, reason string) Decision {
	d := NewDecision(kind, before, rec)
	d.Write, d.To, d.Reason = before != to, to, reason
	return d
}

// Commit is a change to a server's state that takes effect only when its
// decision's write succeeds.
type Commit struct {
	SetCtrl   bool    // the controller goes on from Ctrl
	Ctrl      float64 // (SetCtrl)
	StartRamp bool    // slow start begins (back from down, undrained)
}

// Trace is every figure behind a decision.
type Trace struct {
	Inputs Inputs
	// Load is the aggregate load; NaN when it was not computed.
	Load float64
	// DirectorOnly: the agent is stale and Load comes from INPUT and
	// RESPONSE alone (DirectorOnlyLoad).
	DirectorOnly bool
	// Ramp is the slow-start factor, 1 when not ramping.
	Ramp float64
	// RampEnded: the slow start ended this cycle (Ramp reached 1), so
	// its last step — to the controller's weight — is still to be taken
	// even when the controller decides nothing this cycle.
	RampEnded bool
	// Frozen: the service is frozen (fail static) this cycle.
	Frozen bool
	// CtrlBefore and CtrlAfter are the controller's fractional weight
	// before and after this cycle.
	CtrlBefore, CtrlAfter float64
	// Formula is the LVS formula's step, when it ran.
	Formula *FormulaStep
	// Capacity is the capacity controller's figures, when it decided.
	Capacity *CapacityStep
	// Compare is the write rule's comparison of the candidate weight with
	// the kernel's, when a controller produced a candidate.
	Compare *Comparison
	// Guard is the backlog guard's part, when it holds the weight or did
	// something at this decision; nil otherwise.
	Guard *GuardTrace
	// Fails and Passes are the server's failed and answered probes in a
	// row, this one included.
	Fails, Passes int
}

// Comparison is the write rule's test of a candidate weight.
type Comparison struct {
	Kernel int // the kernel's weight as read
	Next   int // the candidate
	// Rule is the test in words ("threshold 1", "band 20%").
	Rule   string
	Passes bool
	// Overrule says why the candidate is written although it does not
	// pass ("a slow-start step"); empty when the test decided.
	Overrule string
}

// ServerState is what policy remembers about one server between cycles.
// The director-pair replication carries the parts a new writer needs
// (Ctrl, the slow-start ramp); the rest starts afresh on a new writer.
type ServerState struct {
	Ctrl    float64 // the controller's fractional weight
	CtrlSet bool
	// RampStart is when slow start began; zero when not ramping.
	RampStart time.Time
	// Relapses counts the times in a row the server went down during its
	// slow start; each halves its next slow start's floor (slowStart). A
	// ramp that completes ends the count.
	Relapses int
	// Fails and Passes count the failed and the answered probes in a row
	// (Availability.Fall and Rise).
	Fails, Passes int
	Capacity      CapacityState
	Guard         GuardState
}

// Carried is the part of a server's state a new writer takes over from the
// one before it; the director-pair replication sends it as it is. The rest
// of ServerState starts afresh on a new writer, from its own measurements.
type Carried struct {
	// Ctrl is the controller's fractional weight, meaningful when CtrlSet.
	Ctrl    float64
	CtrlSet bool
	// Ramping says the server is in slow start, RampElapsed into it.
	Ramping     bool
	RampElapsed time.Duration
}

// Carry returns what a new writer takes over of s at now.
func (s *ServerState) Carry(now time.Time) Carried {
	c := Carried{Ctrl: s.Ctrl, CtrlSet: s.CtrlSet}
	if !s.RampStart.IsZero() {
		c.Ramping, c.RampElapsed = true, now.Sub(s.RampStart)
	}
	return c
}

// Resume takes over c at now.
func (s *ServerState) Resume(c Carried, now time.Time) {
	s.Ctrl, s.CtrlSet = c.Ctrl, c.CtrlSet
	s.RampStart = time.Time{}
	if c.Ramping {
		s.RampStart = now.Add(-c.RampElapsed)
	}
}

// ServiceState is what policy remembers about one service between cycles.
type ServiceState struct {
	Frozen bool // fail static at the last cycle
	// BacklogMedian is the median active connections per unit of weight
	// at the last backlog check (BacklogSeen: there was one).
	BacklogMedian float64
	BacklogSeen   bool
	// MedianLevel is the service's usual median per unit of weight at
	// cycles (Building).
	MedianLevel Level
}

// Observed is one configured server as the monitor observed it in a cycle.
type Observed struct {
	Record      DestRecord // ownership, after ReconcileServer
	Configured  int        // the configured default weight
	Kernel      int        // the kernel's weight as read
	Counter     uint32     // the kernel's connection counter as read
	ActiveConns int        // active connections
	// InactiveConns: connections the table still holds that are not
	// established (closing, or failed and lingering).
	InactiveConns int
	// NewConns is the connections scheduled to the server in the interval,
	// -1 when unknown (no earlier reading); ActiveDelta the growth of its
	// active connections over the same interval.
	NewConns    int64
	ActiveDelta int

	Probed   bool
	ProbeErr error
	ProbeRTT time.Duration
	// ProbeTimedOut: the probe failed by timing out, which a busy
	// director can cause as well as the server (a refused or reset
	// connection is the server's answer).
	ProbeTimedOut bool

	Polled     bool // the agent was polled
	AgentErr   error
	AgentStale bool // silent longer than agent_expiry
	// CPU, Memory, Disk and Process are the agent's figures (with
	// Polled and no AgentErr).
	CPU, Memory, Disk, Process float64
	// IOBusy is the agent's busiest block device's busy fraction and
	// MemoryPressure its PSI memory "some" share (avg10 ÷ 100), 0 when
	// it has none: the capacity controller's resources besides the CPU
	// (ResourceFigures).
	IOBusy, MemoryPressure float64
}

func (o *Observed) agentOK() bool   { return o.Polled && o.AgentErr == nil }
func (o *Observed) reachable() bool { return o.Probed && o.ProbeErr == nil }

// Service is what a service's decisions need besides its servers.
type Service struct {
	// Reference is the probe time that counts as fully loaded (RESPONSE).
	Reference time.Duration
	// Hashing: the service's scheduler places connections by hashing
	// (HashingScheduler); the backlog guard leaves it alone.
	Hashing bool
	// Counting: the service's scheduler weighs each server's active
	// connections itself (CountingScheduler); the backlog guard acts on a
	// backlog that is there, not on one it predicts.
	Counting bool
}

// Events are what happened to a service in a cycle, for the log.
type Events struct {
	FrozeNow, UnfrozeNow  bool
	Unreachable, Eligible int
	GuardOffForHashing    bool
}

// Engine makes the decisions. Build it with NewEngine when a configuration
// is loaded; it holds no state of its own, only scratch storage: one call
// at a time.
type Engine struct {
	p    Params
	ctrl Controller

	// Scratch reused by every call (an engine decides one service at a
	// time): the servers in rotation, their new connections and input
	// loads, and the guard's figures per unit of weight.
	rotation  []Server
	conns     []int64
	inputs    []float64
	perWeight []float64
}

// NewEngine returns an engine for p, with the controller p names.
func NewEngine(p Params) (*Engine, error) {
	c, err := NewController(p.Weight, p.Coefficients)
	if err != nil {
		return nil, err
	}
	return &Engine{p: p, ctrl: c}, nil
}

// Params returns the engine's parameters.
func (e *Engine) Params() Params { return e.p }

// Server is one server's place in a decision: what was observed, what
// policy remembers of it, and the decision policy fills in.
type Server struct {
	Obs   *Observed
	State *ServerState
	Out   *Decision
	// Step, if not nil, is where the capacity controller puts its step
	// (Out.Trace.Capacity points there); nil: new storage.
	Step *CapacityStep
}

// Cycle decides one service's weights for one cycle: inputs and loads,
// the controller's measurement, then — unless follower (another director
// writes) — the availability rules, the controller's weights and the
// backlog guard's holds. It fills in each server's Out and updates the
// servers' states and svc in place.
func (e *Engine) Cycle(s Service, st *ServiceState, servers []Server, follower bool, now time.Time) Events {
	for _, sv := range servers {
		*sv.Out = NewDecision(KindCycle, sv.Obs.Kernel, sv.Obs.Record)
		sv.Out.Trace.CtrlBefore, sv.Out.Trace.CtrlAfter = sv.State.Ctrl, sv.State.Ctrl
	}
	e.assess(s, servers, follower)
	if follower {
		return Events{}
	}
	frozen, ev := e.freeze(st, servers)
	for _, sv := range servers {
		e.decide(sv.Obs, sv.State, sv.Out, frozen, now)
	}
	ev.GuardOffForHashing = e.guard(s, st, servers, true)
	return ev
}

// assess computes the inputs and loads of the servers in rotation
// (managed, reachable, weight above 0), and the controller's measurement.
func (e *Engine) assess(s Service, servers []Server, follower bool) {
	rotation, conns := e.rotation[:0], e.conns[:0]
	for _, sv := range servers {
		if o := sv.Obs; o.Record.State == Managed && o.reachable() && o.Kernel > 0 {
			rotation = append(rotation, sv)
			conns = append(conns, o.NewConns)
		}
	}
	e.rotation, e.conns = rotation, conns
	if len(rotation) == 0 {
		return
	}
	inputs := inputLoadsInto(grown(&e.inputs, len(conns)), conns)
	c := e.p.Coefficients
	for k, sv := range rotation {
		o, tr := sv.Obs, &sv.Out.Trace
		tr.Inputs = Inputs{Input: inputs[k], Response: ResponseLoad(o.ProbeRTT, s.Reference)}
		switch {
		case o.agentOK():
			tr.Inputs.CPU, tr.Inputs.Memory, tr.Inputs.Disk, tr.Inputs.Process = o.CPU, o.Memory, o.Disk, o.Process
			tr.Load = AggregateLoad(tr.Inputs, c)
		case o.AgentStale:
			if load, ok := DirectorOnlyLoad(tr.Inputs, c); ok {
				tr.Load, tr.DirectorOnly = load, true
			}
		}
	}
	e.ctrl.Measure(e.p.Weight, rotation, follower)
}

// freeze applies fail static: a service with more than freeze_share of its
// servers (those not drained) unreachable at once is frozen this cycle.
// A service with every server drained has nothing to decide and keeps its
// state.
func (e *Engine) freeze(st *ServiceState, servers []Server) (bool, Events) {
	var ev Events
	for _, sv := range servers {
		o := sv.Obs
		if o.Record.State == DrainedByOperator {
			continue
		}
		ev.Eligible++
		if o.Probed && o.ProbeErr != nil {
			ev.Unreachable++
		}
	}
	if ev.Eligible == 0 {
		return false, ev
	}
	f := ShouldFreeze(ev.Unreachable, ev.Eligible, e.p.Availability.FreezeShare)
	ev.FrozeNow, ev.UnfrozeNow = f && !st.Frozen, !f && st.Frozen
	st.Frozen = f
	return f, ev
}

// decide is one server's cycle decision: drained and frozen servers are
// left alone; then the availability rules; then the controller, unless
// the load is unknown (an agent that failed, not yet stale: a dead agent
// is not a dead server, and its weight is kept).
func (e *Engine) decide(o *Observed, st *ServerState, d *Decision, frozen bool, now time.Time) {
	av := e.p.Availability
	tr := &d.Trace
	tr.Ramp = 1
	if t := st.RampStart; !t.IsZero() {
		tr.Ramp = st.slowStartFactor(now.Sub(t), av)
		if tr.Ramp >= 1 {
			st.RampStart, st.Relapses = time.Time{}, 0
			tr.RampEnded = true
		}
	}
	if keepDrain(o, d) {
		return
	}
	if frozen || o.Record.State == DrainedByOperator {
		tr.Frozen = frozen
		return
	}
	if o.Record.State == Down {
		tr.Ramp = st.slowStartFactor(0, av) // coming back: the ramp starts now
	}
	e.step(o, st, d, tr.Ramp)
}

// keepDrain writes 0 back for a drained destination the table holds at
// another weight: Reconcile found it created anew at its creator's weight,
// and the drain stands (frozen service or not, in a cycle or a backlog
// check). It reports whether it did.
func keepDrain(o *Observed, d *Decision) bool {
	if o.Record.State != DrainedByOperator || o.Kernel == 0 {
		return false
	}
	d.Write, d.To = true, 0
	d.Reason = fmt.Sprintf("drained by the operator, created anew at weight %d: back to 0", o.Kernel)
	return true
}

// step is decide for a server that is neither drained nor frozen, at
// slow-start factor ramp: the availability rules, then the controller.
func (e *Engine) step(o *Observed, st *ServerState, d *Decision, ramp float64) {
	if !(ramp > 0 && ramp <= 1) {
		ramp = 1
	}
	if availability(o, ramp, st, e.p, d) {
		d.Trace.CtrlAfter = st.Ctrl
		return
	}
	if load := d.Trace.Load; math.IsNaN(load) || math.IsInf(load, 0) {
		return
	}
	e.ctrl.Step(e.p.Weight, o, st, ramp, d)
	d.Trace.CtrlAfter = st.Ctrl
}

// propose turns a controller's candidate weight into the decision: a write
// to to, the record updated, the reason with the slow-start share.
func propose(d *Decision, to int, reason string, ramp float64) {
	d.Write, d.To = true, to
	d.Record.Written, d.Record.SetBy = to, ByMonitor
	d.RecordChanged = true
	if ramp < 1 {
		reason += fmt.Sprintf(", slow start %.0f%%", ramp*100)
	}
	d.Reason = reason
}

// maxRelapseHalvings bounds the relapses' effect on slow start: at most an
// eighth of its floor.
const maxRelapseHalvings = 3

// slowStart is the slow start of a server that went down s.Relapses times
// in a row during its slow start: for each, the floor halves (the window
// stays). A server that fails again while it ramps is flapping: it comes
// back the lower each time, so that it holds less of the traffic when it
// fails next soon after its return (under wlc and sed a dead server with a
// weight is a black hole), until it completes a ramp. A longer window was
// tried too: it kept a flapping 32-core server low for minutes, and at
// 93 % load the others' p99 doubled (docs/results/notebook.md).
func (s *ServerState) slowStart(av Availability) (window time.Duration, floor float64) {
	n := min(max(s.Relapses, 0), maxRelapseHalvings)
	return av.SlowStart, av.SlowStartFloor / float64(int(1)<<n)
}

// slowStartFactor is SlowStartFactor for this server (slowStart).
func (s *ServerState) slowStartFactor(elapsed time.Duration, av Availability) float64 {
	w, f := s.slowStart(av)
	return SlowStartFactor(elapsed, w, f)
}

// rampWeight is the integer weight written for controller weight w at
// slow-start factor ramp, never below min.
func rampWeight(w, ramp float64, min int) int {
	return max(min, RoundWeight(w*ramp))
}
