package main

import (
	"fmt"
	"io"
	"math"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"lvs-feedback/monitor"
	"lvs-feedback/policy"
)

// cycleRecord is what the verdict needs from one cycle.
type cycleRecord struct {
	At      time.Duration   // the cycle's start, from the monitor's start
	Weights [numServers]int // after the cycle's writes; -1 when not reported
}

// printer writes the live table: one row per cycle.
type printer struct {
	w       io.Writer
	servers []*server
	o       options

	// lvs: the "lvs" controller decides, so the column of what drives
	// the weight is the aggregate load; otherwise it is the capacity
	// controller's factor. Set by preamble.
	lvs bool

	rows        int
	prevStart   time.Time
	prevFailed  map[netip.AddrPort]int64
	shownStart  bool
	shownEnd    bool
	shownHogErr bool
}

func newPrinter(w io.Writer, servers []*server, o options) *printer {
	return &printer{w: w, servers: servers, o: o, prevFailed: map[netip.AddrPort]int64{}}
}

// preamble describes the set-up before the first row.
func (p *printer) preamble(cfg monitor.Config) {
	table := "in-memory IPVS table (ipvs.Mem; the client counts each connection in it, as the kernel would)"
	if p.o.Table == "kernel" {
		table = "this host's kernel IPVS table (the demo's traffic goes to the servers directly, so INPUT stays neutral)"
	}
	c, wp := cfg.Coefficients, cfg.Weight
	svc := cfg.Services[0]
	p.lvs = wp.Controller == policy.ControllerLVS
	fmt.Fprintf(p.w, "lvs-demo: the dynamic-feedback loop on one machine\n")
	fmt.Fprintf(p.w, "  table    %s\n", table)
	fmt.Fprintf(p.w, "           virtual service %s (a label only), scheduler wrr, default weight %d\n", demoService, defaultWeight)
	for i, s := range p.servers {
		lead := "  servers "
		if i > 0 {
			lead = "          "
		}
		fmt.Fprintf(p.w, "%s s%d %-21s backend pid %-7d lvs-agent %s -source process:%d\n", lead, s.n, s.addr, s.pid(), s.agentAddr, s.pid())
	}
	fmt.Fprintf(p.w, "  client   %d requests/s, weighted round-robin over the table's current weights, a new TCP connection each\n", p.o.Rate)
	if wp.Controller == policy.ControllerLVS {
		fmt.Fprintf(p.w, "  monitor  every %v: load = %s\n", cfg.Interval, formula(c))
		fmt.Fprintf(p.w, "           RESPONSE = HTTP GET / time ÷ %v;  w ← w + %g·∛(%g − load), from %d to %g × %d = %g,\n",
			svc.Probe.Reference, wp.Gain, wp.Target, wp.Min, wp.Scale, defaultWeight, wp.Scale*defaultWeight)
		fmt.Fprintf(p.w, "           written when it moves by more than %d\n", wp.Threshold)
	} else {
		fmt.Fprintf(p.w, "  monitor  every %v, capacity controller: capacity = connections served ÷ CPU busy over the interval;\n", cfg.Interval)
		fmt.Fprintf(p.w, "           a server keeps weight %d unless its capacity per unit of weight is more than %.0f%% off the\n", defaultWeight, wp.Anchor*100)
		fmt.Fprintf(p.w, "           others' (TH2 close; then %d × that ratio, at least %d); under %.0f%% CPU it has capacity to spare\n", defaultWeight, wp.Min, wp.Light*100)
		fmt.Fprintf(p.w, "           (TH1 light: while every server is, nothing is decided)\n")
	}
	fmt.Fprintf(p.w, "  plan     at %v server %d burns all %d CPUs for %v (POST /hog); the run ends at %v\n",
		p.o.HogAt, hogServer, runtime.NumCPU(), p.o.HogFor, p.o.Duration)
	fmt.Fprintf(p.w, "  columns  w = weight in the table (* while hogged), ")
	if p.lvs {
		fmt.Fprintf(p.w, "load = aggregate load (what the formula steers),\n")
	} else {
		fmt.Fprintf(p.w, "cap = what the controller weighs: the server's capacity per\n")
		fmt.Fprintf(p.w, "           unit of weight ÷ the service's median (1.00 under %.0f%% CPU: capacity to spare; - = no decision,\n", wp.Light*50)
		fmt.Fprintf(p.w, "           weight kept), ")
	}
	fmt.Fprintf(p.w, "cpu = the agent's CPU for that server's process (share of all CPUs), rtt = the\n")
	fmt.Fprintf(p.w, "           monitor's HTTP probe, conn/s = new connections per second, share = of the service's new connections\n\n")
}

// formula spells out the aggregate load with the non-zero coefficients.
func formula(c policy.Coefficients) string {
	var parts []string
	for _, t := range []struct {
		r    float64
		name string
	}{{c.Input, "INPUT"}, {c.CPU, "CPU"}, {c.Memory, "MEMORY"}, {c.Disk, "DISK"}, {c.Response, "RESPONSE"}, {c.Process, "PROCESS"}} {
		if t.r != 0 {
			parts = append(parts, fmt.Sprintf("%g·%s", t.r, t.name))
		}
	}
	return strings.Join(parts, " + ")
}

// blockFormat lays out one server's columns: weight and hog mark, what
// drives the weight (cap or load), cpu, rtt, conn/s, share. blockWidth is
// its width.
const (
	blockFormat = " %4s%1s %5s %4s %5s %6s %5s"
	blockWidth  = 36
)

func (p *printer) header() {
	var top, sub strings.Builder
	top.WriteString("        ")
	sub.WriteString("   time ")
	for _, s := range p.servers {
		fmt.Fprintf(&top, "|%-*s", blockWidth, center(fmt.Sprintf("s%d %s", s.n, s.addr), blockWidth))
		fmt.Fprintf(&sub, "|"+blockFormat, "w", "", p.driverName(), "cpu", "rtt", "conn/s", "share")
	}
	top.WriteString("|\n")
	sub.WriteString("| events\n")
	io.WriteString(p.w, top.String()+sub.String())
}

func center(s string, w int) string {
	if len(s) >= w {
		return s
	}
	return strings.Repeat(" ", (w-len(s))/2) + s
}

// row prints one cycle and returns its record.
func (p *printer) row(rep monitor.CycleReport, cycleErr error, t0 time.Time, hog *hogEvent, cl *client) cycleRecord {
	if p.rows%25 == 0 {
		if p.rows > 0 {
			io.WriteString(p.w, "\n")
		}
		p.header()
	}
	p.rows++
	rec := cycleRecord{At: rep.Start.Sub(t0)}
	byAddr := map[netip.AddrPort]*monitor.DestStatus{}
	var total int64
	for i := range rep.Dests {
		d := &rep.Dests[i]
		byAddr[d.Key.Dest] = d
		if d.NewConns > 0 {
			total += d.NewConns
		}
	}
	var elapsed time.Duration
	if !p.prevStart.IsZero() {
		elapsed = rep.Start.Sub(p.prevStart)
	}
	p.prevStart = rep.Start

	sent, running, hs, he, hogErr := hog.state(rep.Start)
	var events []string
	if sent && !p.shownStart {
		p.shownStart = true
		events = append(events, fmt.Sprintf(">>> hog on s%d started at %.1fs", hogServer, hs.Sub(t0).Seconds()))
	}
	if sent && !p.shownEnd && !rep.Start.Before(he) {
		p.shownEnd = true
		events = append(events, fmt.Sprintf("<<< hog on s%d over at %.1fs", hogServer, he.Sub(t0).Seconds()))
	}
	if hogErr != nil && !p.shownHogErr {
		p.shownHogErr = true
		events = append(events, "hog failed: "+hogErr.Error())
	}

	var line strings.Builder
	fmt.Fprintf(&line, "%6.1fs ", rec.At.Seconds())
	for i, s := range p.servers {
		d := byAddr[s.addr]
		rec.Weights[i] = -1
		if d == nil {
			fmt.Fprintf(&line, "|%-*s", blockWidth, "    (not in this cycle)")
			continue
		}
		rec.Weights[i] = d.KernelWeight
		line.WriteString("|" + p.block(d, s.n == hogServer && running, elapsed, total))
		events = append(events, p.destEvents(s, d)...)
		st := cl.statsFor(s.addr)
		failed := st.failed.Load()
		if n := failed - p.prevFailed[s.addr]; n > 0 {
			msg, _ := st.lastErr.Load().(string)
			events = append(events, fmt.Sprintf("s%d: %d requests failed (%s)", s.n, n, msg))
		}
		p.prevFailed[s.addr] = failed
	}
	if cycleErr != nil {
		events = append(events, "cycle error: "+cycleErr.Error())
	}
	line.WriteString("| " + strings.Join(events, "; ") + "\n")
	io.WriteString(p.w, line.String())
	return rec
}

// block formats one server's columns.
func (p *printer) block(d *monitor.DestStatus, hogged bool, elapsed time.Duration, total int64) string {
	mark := ""
	if hogged {
		mark = "*"
	}
	driver := p.driver(d.Decision.Trace)
	cpu := "-"
	if d.AgentErr == nil && !d.Report.Time.IsZero() {
		cpu = fmt.Sprintf("%.2f", d.Report.CPU)
	}
	rtt := "down"
	if d.ProbeErr == nil {
		rtt = fmtRTT(d.ProbeRTT)
	}
	rate, share := "-", "-"
	if d.NewConns >= 0 && elapsed > 0 {
		rate = fmt.Sprintf("%.0f", float64(d.NewConns)/elapsed.Seconds())
		if total > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(d.NewConns)/float64(total))
		}
	}
	return fmt.Sprintf(blockFormat, fmt.Sprint(d.KernelWeight), mark, driver, cpu, rtt, rate, share)
}

// driverName is the heading of the column of what drives the weight.
func (p *printer) driverName() string {
	if p.lvs {
		return "load"
	}
	return "cap"
}

// driver is what drove this cycle's weight, as the decision recorded it:
// under the "lvs" formula the aggregate load; under the capacity
// controller its factor (capacity per unit of default weight ÷ the
// service's median: 1 within the anchor keeps the configured weight, 0.10
// gives a tenth of it). "-" when the decision has none: no estimate yet,
// or lightly loaded without being clearly idle (the weight is kept).
func (p *printer) driver(tr policy.Trace) string {
	v := math.NaN()
	switch {
	case p.lvs:
		v = tr.Load
	case tr.Capacity != nil:
		v = tr.Capacity.Factor
	}
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtRTT prints a probe time in at most 5 characters: milliseconds, to
// 0.1 ms below 10 ms, and seconds from 1 s.
func fmtRTT(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 9.95:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 999.5:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// destEvents lists what happened to one server in a cycle: a weight
// written (and why, when the reason is not the load), an agent not
// answering, a probe failing.
func (p *printer) destEvents(s *server, d *monitor.DestStatus) []string {
	var ev []string
	if d.Outcome.Wrote {
		e := fmt.Sprintf("s%d %d→%d", s.n, d.Decision.Before, d.KernelWeight)
		if !strings.HasPrefix(d.Reason, "load ") {
			e += " (" + d.Reason + ")"
		}
		ev = append(ev, e)
	}
	if d.AgentErr != nil {
		ev = append(ev, fmt.Sprintf("s%d agent: %v", s.n, d.AgentErr))
	}
	if d.ProbeErr != nil {
		ev = append(ev, fmt.Sprintf("s%d probe: %v", s.n, d.ProbeErr))
	}
	return ev
}

// summary prints what the client sent.
func (p *printer) summary(cl *client) {
	fmt.Fprintf(p.w, "\nclient: ")
	var parts []string
	for _, s := range p.servers {
		st := cl.statsFor(s.addr)
		parts = append(parts, fmt.Sprintf("s%d %d requests (%d failed)", s.n, st.sent.Load(), st.failed.Load()))
	}
	fmt.Fprint(p.w, strings.Join(parts, ", "))
	if n := cl.skip.Load(); n > 0 {
		fmt.Fprintf(p.w, "; %d ticks skipped with %d requests in flight", n, cl.maxInFlight)
	}
	fmt.Fprintln(p.w)
}
