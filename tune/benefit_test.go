package tune

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/sim"
)

var benefitStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// benefitHistory records a service of servers of cores cores and the
// given per-core speeds, default weight def each, every 5 s for cycles cycles,
// at rate connections per second of demand seconds of CPU at speed 1
// each: every cycle's connections are split by the weights in the
// kernel (weight(server, cycle): the weight after that cycle's write; the
// weight before the first is def), and each server's CPU busy is its
// share of the work over its capacity. No noise: the builder recovers
// the speeds exactly.
func benefitHistory(cycles int, rate, demand, cores float64, def int, speeds []float64, weight func(server, cycle int) int) []history.Record {
	const interval = 5.0
	var out []history.Record
	prev := make([]int, len(speeds))
	for i := range prev {
		prev[i] = def
	}
	for c := range cycles {
		var total float64
		for i := range speeds {
			total += float64(prev[i])
		}
		for i, sp := range speeds {
			share := float64(prev[i]) / total // the weights of the interval the cycle measured
			served := rate * share * interval
			busy := served * demand / (cores * sp * interval)
			rec := history.Record{V: history.SchemaVersion, Time: benefitStart.Add(time.Duration(c) * interval * time.Second),
				Service: testService, Server: "198.51.100." + string(rune('1'+i)) + ":80", State: "managed",
				Configured: def, DefaultWeight: def, Ramp: 1,
				WeightBefore: prev[i], WeightTo: weight(i, c), WeightAfter: weight(i, c)}
			rec.Write = rec.WeightAfter != rec.WeightBefore
			rec.Wrote = rec.Write
			if c > 0 {
				n := int64(math.Round(served))
				rec.NewConns = &n
			}
			rec.Agent = &history.Agent{Source: "host", CPU: busy, CPUUsed: busy, Raw: history.AgentRaw{CPUs: cores, CPUBusy: busy}}
			rec.Capacity = &history.Capacity{CPU: busy, Busy: busy, Bottleneck: "cpu"}
			out = append(out, rec)
		}
		for i := range speeds {
			prev[i] = weight(i, c)
		}
	}
	return out
}

func recordsSource(recs []history.Record) func(fn func(history.Record)) error {
	return func(fn func(history.Record)) error {
		for _, r := range recs {
			fn(r)
		}
		return nil
	}
}

// A server at a quarter of the speed of its two peers (a hog the history
// cannot tell from a slower server), 32 cores each, default weight 20,
// the monitor having cut its weight to 5 at the window's first cycle and
// kept it there: 20:5:20 is exactly the capacities 32:8:32, so each
// server runs at the scenario's utilisation, 0.5 (720/s × 50 ms ÷ 72
// cores). Static 20:20:20 sends it a third: 240/s × 50 ms ÷ 8 = ρ 1.5,
// overloaded, its backlog never empties, so the static overload seconds
// are the whole window but its first seconds. Under the monitor's
// weights a server holds 16 cores' worth of requests on average and
// needs more than 30 all through a second to be overloaded: at most 1 %
// of the window. The monitor's p99 is at least the 99th percentile of
// demand ÷ speed (a request never runs faster than its core), and with
// half the cores idle on average a request rarely shares one: at most
// 1.5 times that. The static p99 is the overloaded server's (a third of
// the requests, sharing its 8 cores' worth with a backlog that grows by
// half its capacity every second): at least 10 times the monitor's bound.
func TestBenefitHoggedServer(t *testing.T) {
	const cycles, rate, demand = 120, 720.0, 0.050
	recs := benefitHistory(cycles, rate, demand, 32, 20, []float64{1, 0.25, 1}, func(i, c int) int {
		if i == 1 {
			return 5
		}
		return 20
	})
	res, err := Benefit(recordsSource(recs), testService, BenefitOptions{
		From: benefitStart.Add(-time.Second), Until: benefitStart.Add(time.Hour), Seeds: []uint64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	span := float64(cycles) * 5
	if res.Span.Seconds() != span || res.Writes != 1 || res.Scheduler != "wrr" {
		t.Errorf("span %v, %d writes, scheduler %s; want %gs, 1 write, wrr", res.Span, res.Writes, res.Scheduler, span)
	}
	if got := res.StaticWeights; len(got) != 3 || got[0] != 20 || got[1] != 20 || got[2] != 20 {
		t.Errorf("static weights %v, want 20 20 20", got)
	}
	t.Logf("static p99 %.4fs overload %.0fs failed %.4f; monitor p99 %.4fs overload %.0fs; ratios %.2f %.2f",
		res.Static.P99, res.Static.Overload, res.Static.Failed, res.Monitor.P99, res.Monitor.Overload, res.P99Ratio(), res.OverloadRatio())

	// 4/9 of the requests at speed 1 (a), 1/9 at 0.25 (b, four times the
	// time), 4/9 at 1 (c).
	lower := mixtureQuantile(demand, 0.99, []float64{4.0 / 9, 1.0 / 9, 4.0 / 9}, []float64{1, 0.25, 1})
	if res.Monitor.P99 < lower || res.Monitor.P99 > 1.5*lower {
		t.Errorf("monitor p99 %.4fs, want %.4fs (the demand's) to 1.5 times it", res.Monitor.P99, lower)
	}
	if res.Static.P99 < 10*1.5*lower {
		t.Errorf("static p99 %.4fs, want at least 10 × %.4fs", res.Static.P99, 1.5*lower)
	}
	if res.Static.Overload < 0.95*span {
		t.Errorf("static overload %v s, want at least 95 %% of %v s", res.Static.Overload, span)
	}
	if res.Monitor.Overload > 0.01*span {
		t.Errorf("monitor overload %v s, want at most 1 %% of %v s", res.Monitor.Overload, span)
	}
	if got, want := res.P99Ratio(), res.Static.P99/res.Monitor.P99; got != want || got < 10 {
		t.Errorf("p99 ratio %v, want static ÷ monitor = %v, above 10", got, want)
	}
}

// mixtureQuantile is the q-quantile of demand ÷ speed when a share of the
// requests runs at each speed.
func mixtureQuantile(mean, q float64, shares, speeds []float64) float64 {
	tail := func(x float64) float64 { // P(demand ÷ speed > x)
		var p float64
		for i, sh := range shares {
			p += sh * paretoTail(mean, x*speeds[i])
		}
		return p
	}
	lo, hi := 0.0, 1000*mean
	for range 100 {
		mid := (lo + hi) / 2
		if tail(mid) > 1-q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

func paretoTail(mean, x float64) float64 {
	const a, ratio = 1.2, 1000.0
	m1 := a / (a - 1) * (1 - math.Pow(ratio, 1-a)) / (1 - math.Pow(ratio, -a))
	lo := mean / m1
	switch {
	case x <= lo:
		return 1
	case x >= lo*ratio:
		return 0
	}
	return (math.Pow(lo/x, a) - math.Pow(ratio, -a)) / (1 - math.Pow(ratio, -a))
}

// Nothing happened: three equal servers, and the monitor left the
// weights at 10 — or wrote them 100 (its scale), the same shares. The
// kernel schedules the same requests the same way under either, so
// both runs are the same run: equal figures to the last digit, ratios 1.
// A monitor that moved one weight between 10 and 11 every few cycles
// (noise it should not have written) changes a share by 3 %: within
// 5 % of the static p99.
func TestBenefitNothingChanged(t *testing.T) {
	const cycles, rate, demand = 120, 300.0, 0.050
	for _, tt := range []struct {
		name   string
		weight func(i, c int) int
		writes int
		tol    float64
	}{
		{"left alone", func(int, int) int { return 10 }, 0, 0},
		{"scaled", func(int, int) int { return 100 }, 3, 0},
		{"wobbling", func(i, c int) int {
			if i == 0 && (c/6)%2 == 1 {
				return 11
			}
			return 10
		}, cycles/6 - 1, 0.05},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recs := benefitHistory(cycles, rate, demand, 8, 10, []float64{1, 1, 1}, tt.weight)
			res, err := Benefit(recordsSource(recs), testService, BenefitOptions{
				From: benefitStart.Add(-time.Second), Until: benefitStart.Add(time.Hour), Seeds: []uint64{1}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("static p99 %.4fs overload %.0fs; monitor p99 %.4fs overload %.0fs", res.Static.P99, res.Static.Overload, res.Monitor.P99, res.Monitor.Overload)
			if res.Writes != tt.writes {
				t.Errorf("%d writes replayed, want %d", res.Writes, tt.writes)
			}
			if r := res.P99Ratio(); math.Abs(r-1) > tt.tol {
				t.Errorf("p99 ratio %v (static %v, monitor %v), want 1 ± %g", r, res.Static.P99, res.Monitor.P99, tt.tol)
			}
			if d := math.Abs(res.Static.Overload - res.Monitor.Overload); d > tt.tol*res.Span.Seconds() {
				t.Errorf("overload static %v s, monitor %v s: want equal within %g of the span", res.Static.Overload, res.Monitor.Overload, tt.tol)
			}
		})
	}
}

// The window: only the cycles after From up to Until are replayed; a
// window without records says where the records are.
func TestBenefitWindow(t *testing.T) {
	recs := benefitHistory(60, 300, 0.05, 8, 10, []float64{1, 0.5, 1}, func(i, c int) int {
		if i == 1 && c >= 30 {
			return 5
		}
		return 10
	})
	// The second half: cycles 30–59, 150 s; the cut at cycle 30 is in it.
	res, err := Benefit(recordsSource(recs), testService, BenefitOptions{
		From: benefitStart.Add(145 * time.Second), Until: benefitStart.Add(295 * time.Second), Seeds: []uint64{1}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.First.Equal(benefitStart.Add(150*time.Second)) || !res.Last.Equal(benefitStart.Add(295*time.Second)) || res.Span != 150*time.Second || res.Writes != 1 {
		t.Errorf("window %s to %s, span %v, %d writes; want 12:02:30 to 12:04:55, 150s, 1 write", res.First, res.Last, res.Span, res.Writes)
	}

	_, err = Benefit(recordsSource(recs), testService, BenefitOptions{
		From: benefitStart.Add(time.Hour), Until: benefitStart.Add(2 * time.Hour)})
	if !errors.Is(err, ErrNoRecords) || !strings.Contains(err.Error(), "its records run from 2026-12-01T12:00:00Z to 2026-12-01T12:04:55Z") {
		t.Errorf("empty window: %v", err)
	}
	_, err = Benefit(recordsSource(recs), "192.0.2.99:80/tcp", BenefitOptions{From: benefitStart, Until: benefitStart.Add(time.Hour)})
	if !errors.Is(err, ErrNoRecords) || !strings.Contains(err.Error(), "no record of 192.0.2.99:80/tcp") {
		t.Errorf("unknown service: %v", err)
	}
	// 150 s at 300/s is 45,000 requests: refused under 40,000.
	_, err = Benefit(recordsSource(recs), testService, BenefitOptions{
		From: benefitStart.Add(145 * time.Second), Until: benefitStart.Add(295 * time.Second), MaxRequests: 40000})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "about 4.5e+04 requests to simulate per run (300 connections/s over 2m30s, up to ×1), more than 4e+04") {
		t.Errorf("45,000 requests against a bound of 40,000: %v", err)
	}
	// A recorded burst of a thousand times the rate for 3 cycles (15 s of
	// 300 s): 300 × (300 + 999 × 15) = 4.59 million requests, under a bound
	// of 5 million, but the stream would draw 300 × 1000 × 300 = 90
	// million candidates, more than ten times it.
	burst := benefitHistory(60, 300, 0.05, 8, 10, []float64{1, 1, 1}, func(int, int) int { return 10 })
	for i := 3 * 50; i < 3*53; i++ { // cycles 50–52
		n := *burst[i].NewConns * 1000
		burst[i].NewConns = &n
	}
	_, err = Benefit(recordsSource(burst), testService, BenefitOptions{
		From: benefitStart.Add(-time.Second), Until: benefitStart.Add(time.Hour), MaxRequests: 5e6})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "about 4.59e+06 requests to simulate per run (300 connections/s over 5m0s, up to ×1e+03), more than 5e+06") {
		t.Errorf("a recorded burst of ×1000: %v", err)
	}
	// Too few cycles for a scenario: the builder's refusal.
	_, err = Benefit(recordsSource(recs), testService, BenefitOptions{From: benefitStart.Add(200 * time.Second), Until: benefitStart.Add(time.Hour)})
	if err == nil || !strings.Contains(err.Error(), "need at least 20") {
		t.Errorf("19 cycles: %v", err)
	}
}

// recordedWeights: the initial weights are those the first cycle read, a
// write at each cycle whose weight after differs, at its offset from the
// first cycle; a change between cycles is replayed at the cycle that
// read it.
func TestRecordedWeights(t *testing.T) {
	sc := &sim.Scenario{Servers: []sim.ServerSpec{{Name: "a"}, {Name: "b"}}}
	at := func(s int) time.Time { return benefitStart.Add(time.Duration(s) * time.Second) }
	cells := []weightCell{
		{at(0), "a", 10, 10}, {at(0), "b", 20, 15},
		{at(5), "a", 10, 10}, {at(5), "b", 15, 15},
		{at(10), "a", 4, 4}, {at(10), "b", 15, 30}, // a cut between the cycles
		{at(15), "a", 4, 10}, {at(15), "b", 30, 30},
	}
	w, n := recordedWeights(sc, cells)
	want := []sim.WeightWrite{
		{At: 0, Server: 1, Weight: 15},
		{At: 10 * time.Second, Server: 0, Weight: 4},
		{At: 10 * time.Second, Server: 1, Weight: 30},
		{At: 15 * time.Second, Server: 0, Weight: 10},
	}
	if n != len(want) || len(w.Writes) != len(want) || w.Initial[0] != 10 || w.Initial[1] != 20 {
		t.Fatalf("initial %v, writes %v; want [10 20], %v", w.Initial, w.Writes, want)
	}
	for i := range want {
		if w.Writes[i] != want[i] {
			t.Errorf("write %d: %+v, want %+v", i, w.Writes[i], want[i])
		}
	}
}
