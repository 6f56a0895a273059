package policy

import (
	"fmt"
	"math"
)

// Verdict says in words what d decided for a server observed as o, and
// why: the sentence `lvsctl explain` prints, read from the record (p: the
// parameters it was decided with). A write's verdict is its reason; the
// monitor adds how the write went.
func (d *Decision) Verdict(p Params, o *Observed) string {
	tr := d.Trace
	var g GuardTrace
	if tr.Guard != nil {
		g = *tr.Guard
	}
	switch {
	case d.Write:
		return d.Reason
	case o.Record.State == DrainedByOperator:
		return "drained by the operator: not touched"
	case o.Record.State == Down && o.Record.SetBy == ByHealthChecker:
		return "taken out of rotation by the health checker: weight 0 until it puts the server back"
	case tr.Frozen:
		return "service frozen (fail static): too many servers unreachable at once; weight left as it was"
	case o.Probed && o.ProbeErr != nil && o.Record.State == Managed:
		return fmt.Sprintf("probe timed out (%v), %d in a row of the %d that mark the server down: weight kept",
			o.ProbeErr, tr.Fails, max(p.Availability.Fall, 1))
	case o.Probed && o.ProbeErr != nil:
		return fmt.Sprintf("unreachable (%v): weight 0 until the server answers %d probes in a row", o.ProbeErr, max(p.Availability.Rise, 1))
	case o.Record.State == Down:
		return fmt.Sprintf("down, answering again: %d of the %d probes in a row that restore its weight", tr.Passes, max(p.Availability.Rise, 1))
	case g.Held > 0 && g.Raised:
		return fmt.Sprintf("backlog guard: weight held at %d (raised from %d: far below its share of active connections while the service's backlog grew) until its active connections per unit of its weight %d are back to at least 1/%.1f of the service's median; the controller's weight is not written below it",
			g.Held, g.From, g.From, p.Guard.Release)
	case g.Held > 0:
		return fmt.Sprintf("backlog guard: weight held at %d (cut from %d) until the server's active connections per unit of its weight %d are back within %.1f× the service's median; the controller's weight is not written above it",
			g.Held, g.From, g.From, p.Guard.Release)
	case d.Kind == KindGuard:
		return "backlog guard: nothing to do"
	case math.IsNaN(tr.Load) && o.Polled && o.AgentErr != nil:
		return fmt.Sprintf("agent failed (%v), service answering: weight kept", o.AgentErr)
	case math.IsNaN(tr.Load):
		return "no load computed: weight kept"
	case tr.Compare == nil && tr.Capacity != nil && tr.Capacity.UpperBoundKept:
		return fmt.Sprintf("capacity controller: %.2f× the service's median is only an upper bound (another server is lightly loaded, so that median is a lower bound): it may cut this server's weight but not raise it back towards its default; weight kept until the server is measured against busy peers or is idle itself",
			tr.Capacity.Factor)
	case tr.Compare == nil && tr.Capacity != nil && tr.Capacity.Rule == RuleLight:
		return fmt.Sprintf("capacity controller: %s (weight.light; here %s): every server has capacity to spare, nothing is decided: weight kept",
			lightText(p.Weight), tr.Capacity.busyText())
	case tr.Compare == nil && tr.Capacity != nil:
		return fmt.Sprintf("capacity controller: no capacity decision this cycle (a server is measured when its busiest resource is ≥ %.0f%% busy with a connection count; below it has capacity to spare, and under %.0f%% it returns to its default weight; busiest here: %s): weight kept",
			p.Weight.light()*100, p.Weight.light()*50, tr.Capacity.busyText())
	case tr.Compare == nil:
		return "no new weight computed: weight kept"
	}
	c := tr.Compare
	diff := abs(c.Next - c.Kernel)
	if tr.Capacity != nil && p.Weight.Anchor > 0 {
		def := o.Record.DefaultWeight(o.Configured)
		what := fmt.Sprintf("capacity per unit of default weight %.2f× the service's median", tr.Capacity.Factor) + tr.Capacity.bottleneckNote()
		switch {
		case c.Next == def && tr.Capacity.Rule == RuleLight:
			what += fmt.Sprintf(" (%s: the default weight %d)", tr.Capacity.spareText(p.Weight), c.Next)
		case c.Next == def:
			what += fmt.Sprintf(" (%s: the default weight %d)", tr.Capacity.anchorText(p.Weight), c.Next)
		}
		if tr.Capacity.NothingServed {
			what += " (estimate kept: busy, no connection arrived or ended this interval — a long request held it)"
		}
		if diff == 0 {
			return fmt.Sprintf("not written: %s; the kernel has %d already", what, c.Next)
		}
		return fmt.Sprintf("not written: %s; weight %d differs from the kernel's %d by %d, not more than %.0f%% of it",
			what, c.Next, c.Kernel, diff, p.Weight.Band*100)
	}
	if tr.Capacity != nil {
		return fmt.Sprintf("not written: capacity weight %d differs from the kernel's %d by %d, not more than %.0f%% of it",
			c.Next, c.Kernel, diff, p.Weight.Band*100)
	}
	return fmt.Sprintf("not written: new weight %d differs from the kernel's %d by %d, not more than the threshold %d",
		c.Next, c.Kernel, diff, p.Weight.Threshold)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
