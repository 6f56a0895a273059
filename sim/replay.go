package sim

import (
	"fmt"
	"slices"
	"time"
)

// PolRecorded is the policy that replays recorded weights
// (PolicySpec.Replay): what a director's monitor actually wrote, at the
// times it wrote them, against the same traffic as any other policy.
const PolRecorded = "recorded"

// WeightReplay is a recorded weight schedule: every server's weight at
// the start and the writes after it.
type WeightReplay struct {
	// Initial is the weight of each scenario server at time 0, in the
	// scenario's order.
	Initial []int
	// Writes are the weights written after the start, in time order.
	Writes []WeightWrite
}

// WeightWrite is one recorded weight: Server (an index into the
// scenario's servers) has Weight from At on.
type WeightWrite struct {
	At     time.Duration
	Server int
	Weight int
}

// replayStep is the recorded policy's tick: a recorded write takes
// effect within this long after its time.
const replayStep = 0.05

// check validates the schedule against the scenario.
func (w *WeightReplay) check(sc *Scenario) error {
	if len(w.Initial) != len(sc.Servers) {
		return fmt.Errorf("recorded weights: %d initial weights for %d servers", len(w.Initial), len(sc.Servers))
	}
	for k, x := range w.Initial {
		if x < 0 || x > 65535 {
			return fmt.Errorf("recorded weights: server %s: initial weight %d outside 0…65535", sc.Servers[k].Name, x)
		}
	}
	if !slices.IsSortedFunc(w.Writes, func(a, b WeightWrite) int { return int(a.At - b.At) }) {
		return fmt.Errorf("recorded weights: writes not in time order")
	}
	for _, x := range w.Writes {
		if x.Server < 0 || x.Server >= len(sc.Servers) || x.Weight < 0 || x.Weight > 65535 || x.At < 0 {
			return fmt.Errorf("recorded weights: write %+v: server or weight out of range", x)
		}
	}
	return nil
}

// replayPolicy writes the recorded weights at their times, and nothing
// else: no health check of its own (the monitor's own weight 0 for a
// server down is among the recorded writes).
type replayPolicy struct {
	name string
	w    *WeightReplay
	next int // the first write not yet made
}

func (p *replayPolicy) Name() string    { return p.name }
func (*replayPolicy) Kernel() bool      { return true }
func (*replayPolicy) Interval() float64 { return replayStep }
func (p *replayPolicy) Start(r *run) error {
	for k, x := range p.w.Initial {
		r.dests[k].Weight = x
	}
	p.next = 0
	return nil
}
func (p *replayPolicy) Tick(r *run) {
	for p.next < len(p.w.Writes) && p.w.Writes[p.next].At.Seconds() <= r.now {
		x := p.w.Writes[p.next]
		r.setWeight(x.Server, x.Weight, true)
		p.next++
	}
}

// phase starts the ticks at 0, whatever the seed's phase: a write
// recorded at 0 is made at once, later ones within replayStep.
func (*replayPolicy) phase(float64) float64       { return 0 }
func (*replayPolicy) AfterEvent(*run, *EventSpec) {}
func (*replayPolicy) Route(*run, int) int         { return -1 }

// OverloadBusy is the busy fraction at or above which a server counts as
// overloaded over a one-second sample (Result.Overload): the threshold of
// the hot windows (Result.Hot).
const OverloadBusy = 0.95

// overloadSeconds counts the one-second samples after the warm-up and
// before the end of the arrivals in which some server's CPU, or its
// disk, was busy at least OverloadBusy of the second.
func (r *run) overloadSeconds() float64 {
	warm := r.sc.Warmup.Seconds()
	end := r.sc.Duration.Seconds()
	n := len(r.sc.Servers)
	count := 0
	for i := range r.samples[0] {
		// Sample i covers (i·dt, (i+1)·dt].
		t0 := float64(i) * r.sampleDt
		if t0 < warm || t0+r.sampleDt > end+1e-9 {
			continue
		}
		for k := 0; k < n; k++ {
			if float64(r.samples[k][i]) >= OverloadBusy || (r.diskSamples != nil && float64(r.diskSamples[k][i]) >= OverloadBusy) {
				count++
				break
			}
		}
	}
	return float64(count) * r.sampleDt
}
