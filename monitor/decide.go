package monitor

import (
	"math"
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
		}
		r.mem.counter, r.mem.counterSet = r.kernel.Connections, true
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
				r.inputs.CPU = r.report.CPU
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
	}
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
		}, &ctrl, m.cfg.Weight)
		r.mem.ctrl = ctrl
		r.ctrlAfter = ctrl
	}
}
