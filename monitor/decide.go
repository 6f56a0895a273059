package monitor

import (
	"math"
	"slices"
	"time"

	"lvs-feedback/ipvs"
)

// computeLoads turns gathered inputs into each managed row's aggregate
// load. INPUT is computed per service over the rows in rotation (managed,
// reachable, weight above 0).
func (m *Monitor) computeLoads(rows []*destRow) {
	bySvc := map[*ServiceConfig][]*destRow{}
	for _, r := range rows {
		if r.mem.counterSet {
			r.newConns = int64(ipvs.ConnectionDelta(r.mem.counter, r.kernel.Connections))
			r.activeDelta = r.kernel.ActiveConns - r.mem.active
		}
		r.mem.active = r.kernel.ActiveConns
		r.mem.counter, r.mem.counterSet = r.kernel.Connections, true
		if r.polled && r.agentErr == nil {
			r.cpu, r.cpuSpan = IntervalCPU(r.mem.cpuTime, r.report.CPUTime, r.report.CPU, 2*m.Interval().Seconds())
			r.mem.cpuTime = r.report.CPUTime
		}
		if r.rec.State == Managed && r.probed && r.probeErr == nil && r.kernel.Weight > 0 {
			bySvc[r.svc] = append(bySvc[r.svc], r)
		}
	}
	for svc, inRotation := range bySvc {
		conns := make([]int64, len(inRotation))
		for i, r := range inRotation {
			conns[i] = r.newConns
		}
		inputs := InputLoads(conns)
		for i, r := range inRotation {
			r.inputs = Inputs{Input: inputs[i], Response: ResponseLoad(r.rtt, svc.Probe.Reference)}
			switch {
			case r.polled && r.agentErr == nil:
				r.inputs.CPU = r.cpu
				r.inputs.Memory = r.report.Memory
				r.inputs.Disk = r.report.Disk
				r.inputs.Process = r.report.Processes
				r.load = AggregateLoad(r.inputs, m.cfg.Coefficients)
			case r.stale:
				if load, ok := DirectorOnlyLoad(r.inputs, m.cfg.Coefficients); ok {
					r.load = load
				}
			}
		}
		switch {
		case m.cfg.Weight.Controller != "capacity":
		case m.follower:
			followCapacity(inRotation)
		default:
			m.estimateCapacity(inRotation)
		}
	}
}

// estimateCapacity is the capacity controller's measurement: each server's
// capacity is the connections it served per unit of CPU busy fraction
// (throughput ÷ utilisation), smoothed over intervals. Anchored (the
// default), a server keeps its configured weight until its capacity per
// unit of that weight strays from the service's median (AnchoredWeight);
// with anchor 0 weights are in proportion to the most capable server's
// (CapacityWeight). A server with no good measurement this interval keeps
// its estimate.
func (m *Monitor) estimateCapacity(rows []*destRow) {
	p := m.cfg.Weight
	var cpus []float64
	for _, r := range rows {
		if r.polled && r.agentErr == nil {
			cpus = append(cpus, r.cpu)
		}
	}
	medianCPU := median(cpus)
	maxEst := 0.0
	peers := make([]CapacityPeer, len(rows))
	for i, r := range rows {
		def := float64(r.rec.DefaultWeight(r.server.Weight))
		measured := r.polled && r.agentErr == nil && r.newConns >= 0
		served := ServedConnections(r.newConns, r.activeDelta)
		switch {
		case measured && r.cpu >= MinCapacityBusy:
			r.mem.nlb = 0
			r.mem.nobs++
			r.mem.est = UpdateCapacity(r.mem.est, r.mem.nobs, served/r.cpu, r.cpu, medianCPU, p)
			r.saturatedAlone = SaturatedAlone(r.cpu, medianCPU, p.Saturation)
		case measured:
			// Lightly loaded: capacity to spare, at least served ÷
			// MinCapacityBusy — smoothed like an estimate, since with
			// light traffic an interval often has no connection at all.
			// Clearly idle (Spare): back to the default weight.
			peers[i].Idle = true
			peers[i].Spare = r.cpu < MinCapacityBusy/2
			r.mem.nlb++
			r.mem.lowerBound = SmoothCapacity(r.mem.lowerBound, r.mem.nlb, served/MinCapacityBusy, p.Smoothing)
			peers[i].PerWeight = r.mem.lowerBound / def
			peers[i].Known = true
		}
		if r.mem.nobs > 0 {
			maxEst = math.Max(maxEst, r.mem.est)
			if !peers[i].Idle {
				peers[i].PerWeight = r.mem.est / def
				peers[i].Known = true
			}
		}
	}
	if p.Anchor > 0 {
		for i, f := range AnchorFactors(peers) {
			r := rows[i]
			r.capFactor = f
			def := r.rec.DefaultWeight(r.server.Weight)
			if !r.mem.anchorSet { // a start, a takeover
				r.anchorFromTable()
			}
			if !math.IsNaN(f) {
				r.capacity, r.mem.anchor = AnchoredWeight(def, f, r.saturatedAlone, r.mem.anchor, p)
			}
		}
		return
	}
	for _, r := range rows {
		if r.mem.nobs > 0 {
			r.capacity = CapacityWeight(r.mem.est, maxEst, p.Resolution, p.Min)
		}
	}
}

// followCapacity is the capacity controller on a follower director: it does
// not measure — its own IPVS counters do not see the service's traffic, so
// every server would look saturated with nothing served — and leaves the
// anchor state to be taken from the table by the takeover's first cycle
// (not earlier: the writer's latest weights may arrive just before it):
// estimates start afresh, and a server the writer had moved off its default
// weight stays there until the new writer's own measurements say otherwise.
func followCapacity(rows []*destRow) {
	for _, r := range rows {
		r.mem.est, r.mem.nobs, r.mem.lowerBound, r.mem.nlb = 0, 0, 0, 0
		r.mem.anchorSet = false
		r.mem.guard = guardState{} // the new writer's guard starts afresh
	}
}

// anchorFromTable sets r's anchor state from the table: a server the
// kernel holds off its default weight is taken as moved there (after a
// start or a takeover, its weight stays until measurements say otherwise).
func (r *destRow) anchorFromTable() {
	r.mem.anchor = AnchorState{Deviating: r.kernel.Weight != r.rec.DefaultWeight(r.server.Weight)}
	r.mem.anchorSet = true
}

// median returns the median of v (0 for none); v is reordered.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// decide runs the availability rules and the weight formula for each row.
// A service with too many unreachable servers is frozen: none of its
// weights change this cycle (fail static).
func (m *Monitor) decide(rows []*destRow) {
	eligible := map[ipvs.ServiceKey]int{}
	unreachable := map[ipvs.ServiceKey]int{}
	for _, r := range rows {
		if r.rec.State == DrainedByOperator {
			continue
		}
		eligible[r.key.Service]++
		if r.probed && r.probeErr != nil {
			unreachable[r.key.Service]++
		}
	}
	frozen := map[ipvs.ServiceKey]bool{}
	for svc, n := range eligible {
		f := ShouldFreeze(unreachable[svc], n, m.cfg.Availability.FreezeShare)
		frozen[svc] = f
		switch {
		case f && !m.frozen[svc]:
			m.log.Warn("service frozen: too many servers unreachable at once, the director is probably cut off; weights left as they are",
				"service", svc, "unreachable", unreachable[svc], "servers", n, "freeze_share", m.cfg.Availability.FreezeShare)
		case !f && m.frozen[svc]:
			m.log.Info("service unfrozen: enough servers reachable again", "service", svc, "unreachable", unreachable[svc], "servers", n)
		}
		if f {
			m.frozen[svc] = true
		} else {
			delete(m.frozen, svc)
		}
	}
	now := m.deps.Now()
	for _, r := range rows {
		r.ramp = 1
		if t := r.mem.rampStart; !t.IsZero() {
			r.ramp = SlowStartFactor(now.Sub(t), m.cfg.Availability.SlowStart, m.cfg.Availability.SlowStartFloor)
			if r.ramp >= 1 {
				r.mem.rampStart = time.Time{}
			}
		}
		if frozen[r.key.Service] || r.rec.State == DrainedByOperator {
			r.frozen = frozen[r.key.Service]
			r.action = Action{Record: r.rec}
			continue
		}
		if r.rec.State == Down {
			// Coming back: the ramp starts now.
			r.ramp = SlowStartFactor(0, m.cfg.Availability.SlowStart, m.cfg.Availability.SlowStartFloor)
		}
		obs := Observation{
			ProbeOK:  r.probed && r.probeErr == nil,
			ProbeErr: r.probeErr,
			LoadOK:   !math.IsNaN(r.load) && !math.IsInf(r.load, 0),
			AgentErr: r.agentErr,
			Load:     r.load,
		}
		ctrl := r.mem.ctrl
		r.ctrlBefore = ctrl
		r.action = Decide(DecideInput{
			Record:            r.rec,
			KernelWeight:      r.kernel.Weight,
			ConfiguredDefault: r.server.Weight,
			Obs:               obs,
			Ramp:              r.ramp,
			Capacity:          r.capacity,
			CapacityFactor:    r.capFactor,
		}, &ctrl, m.cfg.Weight)
		r.mem.ctrl = ctrl
		r.ctrlAfter = ctrl
	}
}
