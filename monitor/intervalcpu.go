package monitor

import "lvs-feedback/agent"

// intervalCPU is the CPU busy fraction a cycle uses for a server: the mean
// over the time since the previous poll, from the agent's running totals
// (agent.BusyBetween), when they cover at most maxSpan seconds; otherwise
// (no earlier totals, an agent restart or an old agent without totals, the
// same sample twice, a gap after failed polls) the agent's last window,
// last. span is the seconds the mean covers, 0 for last.
//
// The connection counts of INPUT and of the capacity estimate are counted
// over the same interval, so the mean lines the two up; the agent's own
// window is the time since its previous read — a poller's interval when
// the agent samples on poll (its default), 1 s when it samples every
// second — and may be another poller's.
func intervalCPU(prev, cur *agent.CPUTime, last, maxSpan float64) (cpu, span float64) {
	busy, ok := agent.BusyBetween(prev, cur)
	if !ok {
		return last, 0
	}
	span = cur.SampledSeconds - prev.SampledSeconds
	if span > maxSpan {
		return last, 0
	}
	return busy, span
}
