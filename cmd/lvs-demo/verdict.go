package main

import (
	"fmt"
	"strings"
	"time"
)

// verdict judges a run: did the hogged server's weight fall during the hog
// and come back after it?
type verdict struct {
	Server int // 1-based, the hogged server
	// Before is its weight in the last cycle before the hog, Min the lowest
	// from the hog's start to settle after its end, End its weight in the
	// last cycle.
	Before, Min, End int
	// NeedFall is how far the weight had to fall; NeedBack how much of the
	// fall it had to win back.
	NeedFall, NeedBack int
	Fell, Recovered    bool
	Pass               bool
	// Others are the other servers' weights before the hog and at their
	// lowest during it (1-based server numbers).
	Others []otherServer
	// Problem says why the run could not be judged (then Pass is false).
	Problem string
}

type otherServer struct {
	Server, Before, Min int
}

// settle is how long after the hog's end its effect may still show: the
// agent reports CPU over its last sampling interval and the monitor polls
// once an interval.
func settle(interval time.Duration) time.Duration { return 2 * interval }

// judge computes the verdict from the cycles. The hog ran from hogStart to
// hogEnd (from the monitor's start).
//
// The weight fell if it lost at least a third of its weight before the hog
// (and at least 3). It recovered if, by the last cycle, it won back at
// least half of what it lost. Both margins are wide on purpose: on a busy
// machine the numbers vary from run to run, the direction does not.
func judge(cycles []cycleRecord, hogStart, hogEnd, interval time.Duration) verdict {
	v := verdict{Server: hogServer}
	h := hogServer - 1
	before := -1
	var beforeRec cycleRecord
	for _, c := range cycles {
		if c.At < hogStart && c.Weights[h] >= 0 {
			before, beforeRec = c.Weights[h], c
		}
	}
	if before < 0 {
		v.Problem = "no cycle ran before the hog started"
		return v
	}
	v.Before = before
	windowEnd := hogEnd + settle(interval)
	v.Min = -1
	mins := beforeRec.Weights
	for _, c := range cycles {
		if c.At < hogStart || c.At > windowEnd {
			continue
		}
		for i, w := range c.Weights {
			if w >= 0 && w < mins[i] {
				mins[i] = w
			}
		}
		if w := c.Weights[h]; w >= 0 && (v.Min < 0 || w < v.Min) {
			v.Min = w
		}
	}
	for i := range numServers {
		if i != h {
			v.Others = append(v.Others, otherServer{Server: i + 1, Before: beforeRec.Weights[i], Min: mins[i]})
		}
	}
	if v.Min < 0 {
		v.Problem = "no cycle ran during the hog"
		return v
	}
	last := cycles[len(cycles)-1]
	if last.At <= windowEnd || last.Weights[h] < 0 {
		v.Problem = "no cycle ran after the hog: nothing shows a recovery"
		return v
	}
	v.End = last.Weights[h]
	v.NeedFall = max(3, (v.Before+2)/3)
	drop := v.Before - v.Min
	v.Fell = drop >= v.NeedFall
	v.NeedBack = (drop + 1) / 2
	v.Recovered = v.Fell && v.End-v.Min >= v.NeedBack
	v.Pass = v.Fell && v.Recovered
	return v
}

// verdict prints the verdict.
func (p *printer) verdict(v verdict) {
	var b strings.Builder
	b.WriteString("\nverdict: ")
	if v.Problem != "" {
		fmt.Fprintf(&b, "FAIL — %s\n", v.Problem)
		fmt.Fprint(p.w, b.String())
		return
	}
	fmt.Fprintf(&b, "server %d's weight was %d before the hog, %d at its lowest during it, %d at the end.\n",
		v.Server, v.Before, v.Min, v.End)
	fmt.Fprintf(&b, "  fell by %d (at least %d needed): %s\n", v.Before-v.Min, v.NeedFall, yesNo(v.Fell))
	if v.Fell {
		fmt.Fprintf(&b, "  won back %d of it after the hog (at least %d needed): %s\n", v.End-v.Min, v.NeedBack, yesNo(v.Recovered))
	}
	var others []string
	for _, o := range v.Others {
		others = append(others, fmt.Sprintf("s%d %d → lowest %d", o.Server, o.Before, o.Min))
	}
	fmt.Fprintf(&b, "  the other servers during the hog: %s\n", strings.Join(others, ", "))
	if v.Pass {
		b.WriteString("PASS: the hogged server's weight fell while it was busy and recovered once it was idle again.\n")
	} else {
		b.WriteString("FAIL: the fall and recovery did not both happen (a very busy machine can blur the signal; see docs/demo.md).\n")
	}
	fmt.Fprint(p.w, b.String())
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
