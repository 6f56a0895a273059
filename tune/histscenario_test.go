package tune

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/sim"
)

const testService = "192.0.2.10:80/tcp"

// synthHistory is a service of servers with the given per-core speeds
// (2 cores each), whose requests take demand at speed 1 of CPU and
// ioDemand of disk (disks of the given speeds; none when ioDemand is 0),
// balanced evenly (each server gets the same share) at rate connections
// per second, recorded every 5 s for cycles cycles. speedAt and rateAt
// change the speeds and the rate by cycle; busy figures carry 3 % noise.
func synthHistory(cycles int, rate float64, demand, ioDemand float64, speeds, disks []float64,
	speedAt func(server, cycle int) float64, rateAt func(cycle int) float64) []history.Record {
	const interval = 5.0
	rng := rand.New(rand.NewPCG(7, 7))
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var out []history.Record
	n := len(speeds)
	for c := range cycles {
		r := rate * rateAt(c)
		for i := range n {
			rec := history.Record{V: history.SchemaVersion, Time: t0.Add(time.Duration(c) * interval * time.Second),
				Service: testService, Server: "198.51.100." + string(rune('1'+i)) + ":80", State: "managed",
				Configured: 10, DefaultWeight: 10, Ramp: 1}
			if c > 0 {
				newConns := int64(math.Round(r / float64(n) * interval))
				rec.NewConns = &newConns
			}
			perServer := r / float64(n)
			cpu := perServer * demand / (2 * speeds[i] * speedAt(i, c)) * (1 + 0.03*rng.NormFloat64())
			raw := history.AgentRaw{CPUs: 2, CPUBusy: cpu}
			cap := &history.Capacity{CPU: cpu, Busy: cpu, Bottleneck: "cpu"}
			if ioDemand > 0 {
				raw.DiskIOBusy = perServer * ioDemand / disks[i] * (1 + 0.03*rng.NormFloat64())
				if raw.DiskIOBusy > cpu {
					cap.Busy, cap.Bottleneck = raw.DiskIOBusy, "disk"
				}
			}
			rec.Agent = &history.Agent{Source: "host", CPU: cpu, CPUUsed: cpu, Raw: raw}
			rec.Capacity = cap
			out = append(out, rec)
		}
	}
	return out
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// Three servers of capacities 1:2:4, the third degraded to half at cycle
// 50, and a rise of the traffic by 60 % over cycles 70 to 84: the builder
// recovers the speeds within 5 %, the mean demand and the utilisation
// within 5 %, the degrade within 2 cycles and the rise as a flash crowd.
func TestScenarioFromHistoryRecoversCapacities(t *testing.T) {
	recs := synthHistory(100, 300, 0.010, 0, []float64{1, 2, 4}, nil,
		func(i, c int) float64 {
			if i == 2 && c >= 50 {
				return 0.5
			}
			return 1
		},
		func(c int) float64 {
			if c >= 70 && c < 85 {
				return 1.6
			}
			return 1
		})
	sc, rep, err := ScenarioFromHistory(recs, testService, HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())

	if len(sc.Servers) != 3 {
		t.Fatalf("%d servers", len(sc.Servers))
	}
	// Relative to the median server (per-core speed 2): 0.5, 1, 2; the
	// mean demand at its speed is then 10 ms ÷ 2.
	for i, want := range []float64{0.5, 1, 2} {
		s := sc.Servers[i]
		if !near(s.Speed, want, 0.05) || s.Cores != 2 || s.Weight != 10 {
			t.Errorf("server %s: speed %v cores %v weight %d, want speed %v ±5 %%, 2 cores, weight 10", s.Name, s.Speed, s.Cores, s.Weight, want)
		}
	}
	if got := sc.Workload.MeanDemand.Seconds(); !near(got, 0.005, 0.05) {
		t.Errorf("mean demand %v, want 5ms ±5 %%", sc.Workload.MeanDemand)
	}
	// 300/s × 5 ms ÷ (2 × (0.5 + 1 + 2)) = 3/14.
	if !near(sc.Workload.Utilisation, 3.0/14, 0.05) || !near(sc.BaseRate(), 300, 0.05) {
		t.Errorf("utilisation %v, base rate %v; want 0.214 and 300/s ±5 %%", sc.Workload.Utilisation, sc.BaseRate())
	}
	if sc.Workload.IOMeanDemand != 0 {
		t.Errorf("I/O demand %v in a CPU-bound history", sc.Workload.IOMeanDemand)
	}
	// The degrade: the figures of cycle 50 cover the interval from cycle
	// 49, at 245 s.
	if len(sc.Events) != 1 {
		t.Fatalf("events %+v, want one", sc.Events)
	}
	e := sc.Events[0]
	if e.Server != sc.Servers[2].Name || e.Kind != sim.EvSpeed || !near(e.Factor, 0.5, 0.05) ||
		(e.At-245*time.Second).Abs() > 10*time.Second {
		t.Errorf("event %+v, want speed ×0.5 ±5 %% on %s at 245s ± 2 cycles", e, sc.Servers[2].Name)
	}
	if len(sc.Workload.Flash) != 1 {
		t.Fatalf("flash crowds %+v, want one", sc.Workload.Flash)
	}
	f := sc.Workload.Flash[0]
	if !near(f.Factor, 1.6, 0.05) || (f.At-345*time.Second).Abs() > 10*time.Second || (f.Length-75*time.Second).Abs() > 10*time.Second {
		t.Errorf("flash %+v, want ×1.6 at 345s for 75s (± 2 cycles)", f)
	}
	if sc.Duration != 500*time.Second || sc.Interval != 5*time.Second {
		t.Errorf("duration %v interval %v, want 500s and 5s", sc.Duration, sc.Interval)
	}
	if !strings.Contains(b.String(), "approximations:") || len(rep.Approximations) < 4 {
		t.Errorf("the report states no approximations:\n%s", b.String())
	}

	// Written and read back, the scenario is the same.
	var toml bytes.Buffer
	if err := sim.EncodeScenario(&toml, sc); err != nil {
		t.Fatal(err)
	}
	back, err := sim.ParseScenario("history.toml", toml.Bytes())
	if err != nil {
		t.Fatalf("the written scenario does not read back: %v\n%s", err, toml.String())
	}
	if back.Servers[2].Speed != sc.Servers[2].Speed || len(back.Events) != 1 || back.Workload.Flash[0] != f {
		t.Errorf("read back differs:\n%s", toml.String())
	}
}

// A disk-bound history: the disks of speeds 1:1:0.5 are found, with an
// I/O demand, and a disk slowed to a third at cycle 40 is a disk_degrade.
func TestScenarioFromHistoryDisk(t *testing.T) {
	recs := synthHistory(80, 100, 0.004, 0.004, []float64{1, 1, 1}, []float64{1, 1, 0.5},
		func(int, int) float64 { return 1 }, func(int) float64 { return 1 })
	for k := range recs {
		r := &recs[k]
		if r.Server == "198.51.100.1:80" && !r.Time.Before(recs[0].Time.Add(40*5*time.Second)) {
			r.Agent.Raw.DiskIOBusy *= 3
			r.Capacity.Busy, r.Capacity.Bottleneck = r.Agent.Raw.DiskIOBusy, "disk"
		}
	}
	sc, rep, err := ScenarioFromHistory(recs, testService, HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	_ = rep.Write(&b)
	t.Log("\n" + b.String())
	for i, want := range []float64{1, 1, 0.5} {
		if s := sc.Servers[i]; !near(s.Disk, want, 0.05) || !near(s.Speed, 1, 0.05) {
			t.Errorf("server %s: disk %v speed %v, want disk %v and speed 1 ±5 %%", s.Name, s.Disk, s.Speed, want)
		}
	}
	if !near(sc.Workload.IOMeanDemand.Seconds(), 0.004, 0.05) {
		t.Errorf("I/O demand %v, want 4ms ±5 %%", sc.Workload.IOMeanDemand)
	}
	if len(sc.Events) != 1 || sc.Events[0].Kind != sim.EvDiskDegrade || !near(sc.Events[0].Factor, 1.0/3, 0.05) ||
		(sc.Events[0].At-195*time.Second).Abs() > 10*time.Second {
		t.Errorf("events %+v, want one disk_degrade ×0.33 at 195s ± 2 cycles", sc.Events)
	}
}

// Bad input is a clear error.
func TestScenarioFromHistoryRefuses(t *testing.T) {
	flat := func(int, int) float64 { return 1 }
	one := func(int) float64 { return 1 }
	good := synthHistory(30, 300, 0.01, 0, []float64{1, 1}, nil, flat, one)
	idle := synthHistory(30, 1, 0.01, 0, []float64{1, 1}, nil, flat, one) // CPU 0.25 %
	noAgent := synthHistory(30, 300, 0.01, 0, []float64{1, 1}, nil, flat, one)
	for k := range noAgent {
		noAgent[k].Agent = nil
	}
	for _, tt := range []struct {
		name    string
		recs    []history.Record
		service string
		want    string
	}{
		{"no records", nil, testService, "no records of service"},
		{"another service", good, "192.0.2.99:80/tcp", "no records of service"},
		{"too few cycles", good[:2*10], testService, "10 cycles, need at least 20"},
		{"never measured: idle", idle, testService, "no server was ever measured"},
		{"never measured: no agent", noAgent, testService, "no server was ever measured"},
	} {
		_, _, err := ScenarioFromHistory(tt.recs, tt.service, HistoryOptions{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// segments finds a step and ignores a lone outlier.
func TestSegments(t *testing.T) {
	nan := math.NaN()
	xs := []float64{10, 10, nan, 11, 30, 9, 10, 10, 5, 5.2, nan, 4.9, 5}
	got := segments(xs, 3, 0.25)
	if len(got) != 2 || got[0].start != 0 || got[0].end != 8 || got[0].level != 10 || got[1].start != 8 || got[1].end != len(xs) || got[1].level != 5 {
		t.Errorf("segments %+v", got)
	}
	if segments([]float64{nan, nan}, 3, 0.25) != nil {
		t.Error("segments of nothing measured")
	}
}

// The records are read one at a time and kept as cells in the order they
// come: a history whose cycles come newest first (files concatenated out
// of order), with a drain and a down stretch and the disk the bottleneck,
// builds the same scenario and report as the same records in time order.
func TestScenarioFromHistoryOrder(t *testing.T) {
	recs := synthHistory(60, 300, 0.004, 0.006, []float64{1, 2, 4}, []float64{1, 1, 2},
		func(int, int) float64 { return 1 }, func(int) float64 { return 1 })
	for c := 20; c < 30; c++ {
		recs[3*c].State = "drained"
		recs[3*c+1].State = "down"
	}
	var reversed []history.Record
	for c := 59; c >= 0; c-- {
		reversed = append(reversed, recs[3*c:3*c+3]...)
	}
	build := func(recs []history.Record) string {
		sc, rep, err := ScenarioFromHistory(recs, testService, HistoryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := rep.Write(&b); err != nil {
			t.Fatal(err)
		}
		if err := sim.EncodeScenario(&b, sc); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	inOrder, backwards := build(recs), build(reversed)
	if inOrder != backwards {
		t.Errorf("in time order:\n%s\nnewest first:\n%s", inOrder, backwards)
	}
	for _, want := range []string{"drain at 1m35s", "undrain at 2m25s", "fail at 1m35s", "recover at 2m25s", "I/O"} {
		if !strings.Contains(inOrder, want) {
			t.Errorf("the report lacks %q:\n%s", want, inOrder)
		}
	}
}

// TestScenarioFromHistoryMaxCycles: past MaxCycles only the latest cycles
// build the scenario — the same scenario as from those cycles' records
// alone, whichever order the records come in — and the report says so.
func TestScenarioFromHistoryMaxCycles(t *testing.T) {
	const cycles, max = 200, 40
	recs := synthHistory(cycles, 300, 0.004, 0, []float64{1, 2, 4}, nil,
		func(i, c int) float64 {
			if i == 2 && c >= 175 {
				return 0.5
			}
			return 1
		}, func(int) float64 { return 1 })
	var reversed []history.Record
	for c := cycles - 1; c >= 0; c-- {
		reversed = append(reversed, recs[3*c:3*c+3]...)
	}
	build := func(recs []history.Record, max int) (string, HistoryReport) {
		sc, rep, err := ScenarioFromHistory(recs, testService, HistoryOptions{MaxCycles: max})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := sim.EncodeScenario(&b, sc); err != nil {
			t.Fatal(err)
		}
		return b.String(), rep
	}
	latest, latestRep := build(recs[3*(cycles-max):], 0)
	inOrder, rep := build(recs, max)
	backwards, repBack := build(reversed, max)
	if inOrder != latest || backwards != latest {
		t.Errorf("from the latest %d cycles alone:\n%s\nfrom all, in order:\n%s\nfrom all, newest first:\n%s", max, latest, inOrder, backwards)
	}
	for _, r := range []HistoryReport{rep, repBack} {
		if r.Cycles != max || !r.Truncated {
			t.Errorf("report: %d cycles, truncated %v; want %d, true", r.Cycles, r.Truncated, max)
		}
		if !slices.ContainsFunc(r.Approximations, func(s string) bool { return strings.Contains(s, "latest 40 cycles, from 2026-12-01T12:13:20Z on") }) {
			t.Errorf("no approximation names the cut: %q", r.Approximations)
		}
	}
	if latestRep.Truncated {
		t.Error("40 cycles with the default MaxCycles: reported truncated")
	}
	if !strings.Contains(latest, "speed") {
		t.Errorf("the third server's halving at cycle 175 is not in the scenario:\n%s", latest)
	}
}

// TestRunningMedian: the running median equals median's at every length,
// odd and even, with repeated values, on values added in any order.
func TestRunningMedian(t *testing.T) {
	var m runningMedian
	if !math.IsNaN(m.median()) {
		t.Fatalf("empty: %v, want NaN", m.median())
	}
	for i, step := range []struct{ add, want float64 }{
		{5, 5}, {1, 3}, {9, 5}, {9, 7}, {2, 5}, {2, 3.5}, {-4, 2}, {7, 3.5},
	} {
		m.add(step.add)
		if got := m.median(); got != step.want {
			t.Errorf("after %d values: %v, want %v", i+1, got, step.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	var all []float64
	m = runningMedian{}
	for n := 1; n <= 500; n++ {
		x := math.Round(rng.NormFloat64()*100) / 10
		all = append(all, x)
		m.add(x)
		if got, want := m.median(), median(all); got != want {
			t.Fatalf("after %d values: %v, want %v", n, got, want)
		}
	}
}

// BenchmarkSegmentsOscillating: a series whose moves are each undone
// before they count, so that every segment merges into the one before —
// the case a median recomputed over the whole stretch made quadratic.
func BenchmarkSegmentsOscillating(b *testing.B) {
	for _, n := range []int{10000, 40000} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = []float64{1.15, 1.06, 1.0, 1.06}[i/3%4]
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				segments(xs, 3, 0.1)
			}
		})
	}
}

// A rise of the traffic that lasts to the history's last cycle is a
// flash crowd up to the scenario's end (the builder indexed one cycle
// past the last here, and panicked).
func TestScenarioFromHistoryFlashToTheEnd(t *testing.T) {
	recs := synthHistory(100, 300, 0.010, 0, []float64{1, 1, 1}, nil,
		func(int, int) float64 { return 1 },
		func(c int) float64 {
			if c >= 80 {
				return 2
			}
			return 1
		})
	sc, rep, err := ScenarioFromHistory(recs, testService, HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The figures of cycle 80 cover the interval from cycle 79, at 395 s;
	// the scenario ends at 100 cycles of 5 s.
	if len(rep.Load) != 1 || len(sc.Workload.Flash) != 1 {
		t.Fatalf("load steps %+v, want one", rep.Load)
	}
	f := sc.Workload.Flash[0]
	if f.At != 395*time.Second || f.At+f.Length != 500*time.Second || !near(f.Factor, 2, 0.05) {
		t.Errorf("flash %+v, want ×2 from 395s to the end at 500s", f)
	}
}
