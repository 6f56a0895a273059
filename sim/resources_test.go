package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// oneServerIO is a one-server scenario with I/O (disk speed 1, one core of
// speed 1) and the given events; the stream is written by hand.
func oneServerIO(t *testing.T, events string) *Scenario {
	t.Helper()
	sc, err := ParseScenario("io.toml", []byte(`
duration = "20s"
schedulers = ["rr"]
[workload]
rate = 1
mean_demand = "500ms"
io_mean_demand = "1s"
[agent]
noise = 0
[[server]]
name = "a"
speed = 1
`+events))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// runStream runs the nominal policy on a hand-written stream.
func runStream(t *testing.T, sc *Scenario, st *Stream) *run {
	t.Helper()
	pol, err := PolicySpec{Name: PolNominal}.build(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRun(sc, st, 1, "rr", pol)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	return r
}

// twoRequests: A at 0 and B at 0.1 s, each with I/O 1 (disk work) and CPU
// 0.5.
func twoRequests() *Stream {
	return &Stream{Arrive: []float64{0, 0.1}, Demand: []float64{0.5, 0.5}, Idle: []float32{0, 0}, IO: []float64{1, 1}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestDiskThenCPUByHand follows two requests through the disk and then the
// CPU, both processor sharing, with the departures worked out by hand.
func TestDiskThenCPUByHand(t *testing.T) {
	cases := []struct {
		name   string
		events string
		// want: response times of A and B; the disk's and the CPU's busy
		// integrals (seconds busy, as io_ticks and the CPU counter count)
		respA, respB, diskBusy, cpuBusy float64
	}{{
		// Disk: A alone 0–0.1 (0.1 done); both at rate ½: A's 0.9 left
		// take 1.8 s, A leaves the disk at 1.9 with B at 0.9; B alone,
		// 0.1 left: 2.0. CPU: A alone 1.9–2.0 (0.1 done), both at ½:
		// A's 0.4 left take 0.8 s, A done at 2.8, B at 0.4; B alone, 0.1
		// left: 2.9. A: 2.8, B: 2.9 − 0.1 = 2.8. Disk busy 0–2.0, CPU
		// busy 1.9–2.9.
		name:  "plain",
		respA: 2.8, respB: 2.8, diskBusy: 2.0, cpuBusy: 1.0,
	}, {
		// The disk at half speed from 0.5: A 0.1 alone; 0.1–0.5 both at ½:
		// A 0.3, B 0.2. Then ¼ each: A's 0.7 left take 2.8 s, A leaves at
		// 3.3 with B at 0.9; B alone at ½, 0.1 left: 3.5. CPU: A alone
		// 3.3–3.5 (0.2), both at ½: A's 0.3 take 0.6 s, done at 4.1, B at
		// 0.3; B alone, 0.2 left: 4.3. A: 4.1, B: 4.2.
		name:   "disk_degrade",
		events: "[[event]]\nat = \"500ms\"\nserver = \"a\"\nkind = \"disk_degrade\"\nfactor = 0.5\n",
		respA:  4.1, respB: 4.2, diskBusy: 3.5, cpuBusy: 1.0,
	}, {
		// A squeeze from 0 with thrash factor ½: disk and CPU at half
		// speed. Disk: A alone 0–0.1 at ½ (0.05); both at ¼: A's 0.95
		// take 3.8 s, A leaves at 3.9 with B at 0.95; B alone at ½, 0.05
		// left: 4.0. CPU at ½: A alone 3.9–4.0 (0.05), both at ¼: A's
		// 0.45 take 1.8 s, done at 5.8, B at 0.45; B alone at ½: 5.9.
		// A: 5.8, B: 5.8. The CPU is occupied 3.9–5.9 but busy only half
		// of it (the rest is stalled on page faults): 1.0.
		name:   "memory",
		events: "[[event]]\nat = \"0s\"\nserver = \"a\"\nkind = \"memory\"\nfactor = 0.5\nfraction = 0.9\n",
		respA:  5.8, respB: 5.8, diskBusy: 4.0, cpuBusy: 1.0,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runStream(t, oneServerIO(t, c.events), twoRequests())
			// resp is float32: compare at its precision.
			if math.Abs(float64(r.resp[0])-c.respA) > 1e-6 || math.Abs(float64(r.resp[1])-c.respB) > 1e-6 {
				t.Errorf("responses %v, %v; want %v, %v", r.resp[0], r.resp[1], c.respA, c.respB)
			}
			s := r.srv[0]
			if !near(s.disk.busyInt, c.diskBusy) {
				t.Errorf("disk busy %v s, want %v", s.disk.busyInt, c.diskBusy)
			}
			if !near(s.busyInt, c.cpuBusy) {
				t.Errorf("CPU busy %v s, want %v", s.busyInt, c.cpuBusy)
			}
			if r.dests[0].Active != 0 {
				t.Errorf("%d connections still active", r.dests[0].Active)
			}
		})
	}
}

// TestAgentSeesDiskAndMemory: during the squeeze above, the last agent
// sample before 3.5 s covers a second in which the disk queue was never
// empty and the CPU never busy: the agent reports DISK 1 (io_ticks), CPU 0,
// PROCESSES 0 and the squeeze's memory, as lvs-agent would, and the
// monitor's agent client returns that report.
func TestAgentSeesDiskAndMemory(t *testing.T) {
	sc := oneServerIO(t, "[[event]]\nat = \"0s\"\nserver = \"a\"\nkind = \"memory\"\nfactor = 0.5\nfraction = 0.9\n")
	sc.Duration = 3500 * time.Millisecond
	r := runStream(t, sc, twoRequests())
	rep, err := (&simAgents{r: r}).Fetch(t.Context(), agentAddr(0), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Time.Before(simEpoch.Add(2500 * time.Millisecond)) {
		t.Fatalf("last sample at %v, want after 2.5 s", rep.Time.Sub(simEpoch))
	}
	if rep.Disk != 1 || rep.Raw.DiskIOBusy != 1 || rep.CPU != 0 || rep.Processes != 0 || rep.Memory != 0.9 {
		t.Errorf("report disk %v (io busy %v), cpu %v, processes %v, memory %v; want 1, 1, 0, 0, 0.9",
			rep.Disk, rep.Raw.DiskIOBusy, rep.CPU, rep.Processes, rep.Memory)
	}
	if got := 1 - float64(rep.Raw.MemAvailableBytes)/float64(rep.Raw.MemTotalBytes); math.Abs(got-0.9) > 1e-6 {
		t.Errorf("raw memory used %v, want 0.9", got)
	}
	if rep.Raw.PSIMemorySome10 == nil || *rep.Raw.PSIMemorySome10 != 50 || rep.Raw.PSIIOSome10 == nil || *rep.Raw.PSIIOSome10 != 100 {
		t.Errorf("PSI memory %v, io %v; want 50, 100", rep.Raw.PSIMemorySome10, rep.Raw.PSIIOSome10)
	}
}

// TestMM1Disk: Poisson arrivals at 60/s with exponential I/O of mean 10 ms
// on a disk of speed 1 (ρ = 0.6) and a fixed 1 ms of CPU on 64 cores, so
// the CPU never queues: each response is its M/M/1-PS disk sojourn plus
// 1 ms. The mean sojourn is E[S]/(1 − ρ) (with the sample's own E[S] and
// ρ), and the disk's busy integral is exactly the I/O work done — the disk
// is busy whenever its queue is non-empty, as io_ticks counts.
func TestMM1Disk(t *testing.T) {
	sc, err := ParseScenario("mm1disk.toml", []byte(`
duration = "1500s"
warmup = "50s"
schedulers = ["rr"]
[workload]
rate = 60
demand = "fixed"
mean_demand = "1ms"
io_mean_demand = "10ms"
[[server]]
name = "a"
speed = 1
cores = 64
`))
	if err != nil {
		t.Fatal(err)
	}
	r := runInternal(t, sc, 7, "rr", PolicySpec{Name: PolNominal})
	var sumT, sumS, work float64
	n := 0
	for i, a := range r.st.Arrive {
		work += r.st.IO[i]
		if a < sc.Warmup.Seconds() {
			continue
		}
		sumT += float64(r.resp[i]) - 0.001
		sumS += r.st.IO[i]
		n++
	}
	if math.Abs(r.srv[0].disk.busyInt-work) > 1e-6*work {
		t.Errorf("disk busy %.6f s, I/O work %.6f s", r.srv[0].disk.busyInt, work)
	}
	rho := work / sc.Duration.Seconds()
	want := sumS / float64(n) / (1 - rho)
	got := sumT / float64(n)
	t.Logf("%d requests, ρ %.3f: mean disk sojourn %.3f ms, theory %.3f ms", n, rho, got*1e3, want*1e3)
	if math.Abs(got/want-1) > 0.04 {
		t.Errorf("mean disk sojourn %.3f ms, M/M/1-PS says %.3f ms", got*1e3, want*1e3)
	}
}

// TestIdealKnowsTheBottleneck: the ideal weights follow the resource that
// limits each server. Two servers of 4 cores (400 requests/s of 10 ms
// CPU); a's disk of speed 1 passes 200 requests/s of 5 ms I/O, b's of
// speed 0.25 passes 50: 4 : 1. b's disk degraded ×4 lets 200 through:
// 1 : 1. Then a memory squeeze on a, thrash ½: CPU 200/s, disk 100/s:
// 1 : 2.
func TestIdealKnowsTheBottleneck(t *testing.T) {
	sc, err := ParseScenario("bottleneck.toml", []byte(`
duration = "30s"
schedulers = ["rr"]
[workload]
rate = 10
mean_demand = "10ms"
io_mean_demand = "5ms"
[[server]]
name = "a"
speed = 1
cores = 4
[[server]]
name = "b"
speed = 1
cores = 4
disk = 0.25
[[event]]
at = "10s"
server = "b"
kind = "disk_degrade"
factor = 4
[[event]]
at = "20s"
server = "a"
kind = "memory"
factor = 0.5
`))
	if err != nil {
		t.Fatal(err)
	}
	r := runInternal(t, sc, 1, "rr", PolicySpec{Name: PolIdeal})
	if got := r.initW; !slices.Equal(got, []int{4, 1}) {
		t.Errorf("initial ideal weights %v, want [4 1]", got)
	}
	for i, want := range [][]int{{1, 1}, {1, 2}} {
		if !slices.Equal(r.idealW[i], want) {
			t.Errorf("ideal weights after %s: %v, want %v", sc.EventLabel(i), r.idealW[i], want)
		}
	}
	if got := sc.Events[1].Fraction; got != DefaultSqueezeMemory {
		t.Errorf("memory event's default fraction %v, want %v", got, DefaultSqueezeMemory)
	}
}

// TestResourceScenarioErrors: the new keys are checked.
func TestResourceScenarioErrors(t *testing.T) {
	base := "duration = \"10s\"\n[workload]\nrate = 1\nmean_demand = \"10ms\"\n"
	cases := []struct{ name, text, want string }{
		{"disk without io", base + "[[server]]\nspeed = 1\ndisk = 2\n", "needs workload.io_mean_demand"},
		{"negative disk", base + "io_mean_demand = \"1ms\"\n[[server]]\nspeed = 1\ndisk = -1\n", "disk speed must be positive"},
		{"io distribution", base + "io_mean_demand = \"1ms\"\nio_demand = \"weibull\"\n[[server]]\nspeed = 1\n", "io_demand"},
		{"degrade without io", base + "[[server]]\nname = \"a\"\nspeed = 1\n[[event]]\nat = \"1s\"\nserver = \"a\"\nkind = \"disk_degrade\"\nfactor = 0.5\n", "disk_degrade needs"},
		{"degrade factor", base + "io_mean_demand = \"1ms\"\n[[server]]\nname = \"a\"\nspeed = 1\n[[event]]\nat = \"1s\"\nserver = \"a\"\nkind = \"disk_degrade\"\n", "factor must be positive"},
		{"memory factor", base + "[[server]]\nname = \"a\"\nspeed = 1\n[[event]]\nat = \"1s\"\nserver = \"a\"\nkind = \"memory\"\nfactor = 1.5\n", "in (0, 1]"},
		{"memory fraction", base + "[[server]]\nname = \"a\"\nspeed = 1\n[[event]]\nat = \"1s\"\nserver = \"a\"\nkind = \"memory\"\nfactor = 0.5\nfraction = 2\n", "in [0, 1]"},
	}
	for _, c := range cases {
		_, err := ParseScenario(c.name, []byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestNoIONoDisks: a workload without I/O builds no disks and draws no I/O
// demands, so the shipped scenarios run exactly as before disks existed.
func TestNoIONoDisks(t *testing.T) {
	sc := shorten(loadShipped(t, "background"), 60*time.Second, 10*time.Second)
	st := NewStream(sc, 1)
	if st.IO != nil {
		t.Error("I/O demands drawn for a workload without I/O")
	}
	r := runInternal(t, sc, 1, "wrr", PolicySpec{Name: PolNominal})
	for k, s := range r.srv {
		if s.disk != nil {
			t.Errorf("server %d has a disk", k)
		}
	}
}
