package policy

import (
	"math"
	"strings"
	"testing"
	"time"
)

// defaultCoefficients are lvs-monitor's defaults (monitor.DefaultConfig).
var defaultCoefficients = Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.3, Process: 0.1}

func TestBusy(t *testing.T) {
	for _, tt := range []struct {
		name     string
		f        ResourceFigures
		c        Coefficients
		wantBusy float64
		wantName string
	}{
		{"CPU-bound: the CPU, whatever else is below it", ResourceFigures{CPU: 0.6, IOBusy: 0.3, MemoryPressure: 0.05}, defaultCoefficients, 0.6, "cpu"},
		{"slow disk: the disk, although its coefficient is a third of the CPU's", ResourceFigures{CPU: 0.1, IOBusy: 0.95}, defaultCoefficients, 0.95, "disk"},
		{"thrashing: memory pressure", ResourceFigures{CPU: 0.4, IOBusy: 0.2, MemoryPressure: 0.6}, defaultCoefficients, 0.6, "memory"},
		{"disk 0: the disk does not count", ResourceFigures{CPU: 0.1, IOBusy: 0.95}, Coefficients{Input: 0.1, CPU: 0.4, Memory: 0.1, Response: 0.3, Process: 0.1}, 0.1, "cpu"},
		{"memory 0: memory pressure does not count", ResourceFigures{CPU: 0.4, IOBusy: 0.2, MemoryPressure: 0.6}, Coefficients{CPU: 0.5, Disk: 0.5}, 0.4, "cpu"},
		{"cpu 0: the disk alone, even when the CPU is busier", ResourceFigures{CPU: 0.9, IOBusy: 0.3}, Coefficients{Disk: 0.5, Response: 0.5}, 0.3, "disk"},
		{"a tie names the CPU", ResourceFigures{CPU: 0.5, IOBusy: 0.5}, defaultCoefficients, 0.5, "cpu"},
		{"input, response and process alone: the CPU, as before the coefficients counted", ResourceFigures{CPU: 0.5, IOBusy: 0.9}, Coefficients{Input: 0.3, Response: 0.3, Process: 0.4}, 0.5, "cpu"},
		{"an idle server", ResourceFigures{}, defaultCoefficients, 0, "cpu"},
	} {
		busy, name := Busy(tt.f, tt.c)
		if busy != tt.wantBusy || name != tt.wantName {
			t.Errorf("%s: Busy(%+v) = %v %q, want %v %q", tt.name, tt.f, busy, name, tt.wantBusy, tt.wantName)
		}
	}
}

func TestNoResource(t *testing.T) {
	if !NoResource(Coefficients{Input: 0.5, Response: 0.4, Process: 0.1}) {
		t.Error("no cpu, disk or memory coefficient: NoResource false")
	}
	for _, c := range []Coefficients{defaultCoefficients, {Disk: 1}, {Memory: 0.2, Response: 0.8}} {
		if NoResource(c) {
			t.Errorf("%+v: NoResource true", c)
		}
	}
}

// capacityParams are lvs-monitor's default capacity controller settings
// with coefficients c, availability fall and rise 1, no backlog guard.
func capacityParams(c Coefficients) Params {
	return Params{
		Coefficients: c,
		Weight: WeightParams{Controller: ControllerCapacity, Min: 1, Smoothing: 0.7, Band: 0.2,
			Resolution: 20, Saturation: 0.9, Anchor: 0.15, Confirm: 3},
		Availability: Availability{FreezeShare: 0.5, Fall: 1, Rise: 1},
	}
}

// capacityEngine is an engine with capacityParams(c).
func capacityEngine(t *testing.T, c Coefficients) *Engine {
	t.Helper()
	e, err := NewEngine(capacityParams(c))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// bottleneckCycle runs one engine cycle with coefficients c over three
// CPU-bound peers (CPU 0.6, disk 0.3 busy, 600 connections served: 1000 per
// unit of busy) and one server with figures odd that served 200
// connections. Every server is at its default weight 10 with an anchor
// state from an earlier cycle and an estimate of 1000 per unit of busy
// (two observations), as on a service that ran evenly until now. It
// returns the odd server's decision.
func bottleneckCycle(t *testing.T, c Coefficients, odd ResourceFigures) Decision {
	t.Helper()
	e := capacityEngine(t, c)
	mk := func(f ResourceFigures, served int64) Server {
		return Server{
			Obs: &Observed{Record: DestRecord{State: Managed, Written: 10}, Configured: 10, Kernel: 10, NewConns: served,
				Probed: true, Polled: true, CPU: f.CPU, IOBusy: f.IOBusy, MemoryPressure: f.MemoryPressure},
			State: &ServerState{Ctrl: 10, CtrlSet: true, Capacity: CapacityState{Est: 1000, NObs: 2, AnchorSet: true}},
			Out:   &Decision{},
		}
	}
	peer := ResourceFigures{CPU: 0.6, IOBusy: 0.3}
	servers := []Server{mk(peer, 600), mk(peer, 600), mk(odd, 200), mk(peer, 600)}
	e.Cycle(Service{Reference: 100 * time.Millisecond}, &ServiceState{}, servers, false, time.Unix(1000, 0))
	return *servers[2].Out
}

// TestCoefficientsDriveCapacityWeights: the same observations give the
// capacity controller different weights when a coefficient changes. A
// server whose disk is 95 % busy while its CPU is 20 % busy, serving a
// third of what its peers serve, is a disk-bound server. With the default
// coefficients its capacity is 200 ÷ 0.95 = 210.5 per unit of busy against
// its peers' 600 ÷ 0.6 = 1000: 0.21× the median, and saturated (0.95 ≥ 0.9)
// while the median busy (0.6) is not, so the cut is taken at once:
// 10 × 0.21 → weight 2. With disk = 0 the disk does not count: 200 ÷ 0.2 =
// 1000 per unit of CPU busy, as its peers: weight kept at 10. With disk
// raised to 0.3 (sensitivity 3) the disk reads 0.6·(0.95/0.6)³ = 2.3815:
// 200 ÷ 2.3815 = 83.98, 0.084× the median: weight 1.
func TestCoefficientsDriveCapacityWeights(t *testing.T) {
	diskBound := ResourceFigures{CPU: 0.2, IOBusy: 0.95}
	d := bottleneckCycle(t, defaultCoefficients, diskBound)
	c := d.Trace.Capacity
	if !d.Write || d.To != 2 || c.Bottleneck != ResourceDisk || c.Busy != 0.95 || !c.SaturatedAlone || c.Reading != 0.95 || c.Driver != "" {
		t.Errorf("default coefficients: write %v to %d (%s), capacity step %+v; want weight 2, bottleneck disk at 0.95, saturated alone",
			d.Write, d.To, d.Reason, c)
	}
	// ((1 − 0.7)·210.5 + (0.7 − 0.7³)·1000) ÷ (1 − 0.7³) is not taken:
	// saturated alone, the lower observation is taken at once.
	if want := 200 / 0.95; math.Abs(c.Estimate-want) > 1e-9 {
		t.Errorf("default coefficients: estimate %v, want %v", c.Estimate, want)
	}
	noDisk := defaultCoefficients
	noDisk.Disk, noDisk.Memory = 0, 0.2 // memory's sensitivity does not matter: no memory pressure
	d = bottleneckCycle(t, noDisk, diskBound)
	c = d.Trace.Capacity
	if d.Write || c.Weight != 10 || c.Bottleneck != ResourceCPU || c.Busy != 0.2 || math.Abs(c.Factor-1) > 1e-9 {
		t.Errorf("disk = 0: write %v to %d (%s), capacity step %+v; want weight kept at 10, bottleneck cpu at 0.2, factor 1",
			d.Write, d.To, d.Reason, c)
	}
	diskHeavy := defaultCoefficients
	diskHeavy.Disk, diskHeavy.Response = 0.3, 0.1
	d = bottleneckCycle(t, diskHeavy, diskBound)
	c = d.Trace.Capacity
	reading := 0.6 * math.Pow(0.95/0.6, 3)
	if !d.Write || d.To != 1 || c.Bottleneck != ResourceDisk || c.Driver != ResourceDisk || !near(c.Reading, reading) ||
		!near(c.Estimate, 200/reading) || !near(c.Factor, 200/reading/1000) {
		t.Errorf("disk = 0.3: write %v to %d (%s), capacity step %+v; want weight 1, disk read %v, factor %v",
			d.Write, d.To, d.Reason, c, reading, 200/reading/1000)
	}
	if want := "; bottleneck disk 95% busy (CPU 20%); read 2.51× its busy fraction, most from disk"; !strings.HasSuffix(d.Reason, want) {
		t.Errorf("disk = 0.3: reason %q, want it to end %q", d.Reason, want)
	}
}

// TestMemoryPressureDrivesCapacityWeights: the same with a server whose
// tasks stall on memory 95 % of the time (PSI memory some) at 20 % CPU and
// an idle disk: cut to weight 2 with the default coefficients (memory
// 0.1), kept at 10 with memory = 0.
func TestMemoryPressureDrivesCapacityWeights(t *testing.T) {
	thrashing := ResourceFigures{CPU: 0.2, MemoryPressure: 0.95}
	d := bottleneckCycle(t, defaultCoefficients, thrashing)
	if c := d.Trace.Capacity; !d.Write || d.To != 2 || c.Bottleneck != ResourceMemory {
		t.Errorf("default coefficients: write %v to %d (%s), capacity step %+v; want weight 2, bottleneck memory", d.Write, d.To, d.Reason, c)
	}
	noMemory := defaultCoefficients
	noMemory.CPU, noMemory.Memory = 0.4, 0
	d = bottleneckCycle(t, noMemory, thrashing)
	if c := d.Trace.Capacity; d.Write || c.Weight != 10 || c.Bottleneck != ResourceCPU {
		t.Errorf("memory = 0: write %v to %d (%s), capacity step %+v; want weight kept at 10, bottleneck cpu", d.Write, d.To, d.Reason, c)
	}
}

// TestCPUBoundUnchanged: on servers whose CPU is their busiest resource
// the default coefficients measure exactly what the CPU-only controller
// measured: every figure of the step is the same with cpu at its shipped
// 0.3 and disk out (its share given to memory, which reads no pressure
// worth a bottleneck).
func TestCPUBoundUnchanged(t *testing.T) {
	slowCPU := ResourceFigures{CPU: 0.9, IOBusy: 0.3, MemoryPressure: 0.01}
	a := bottleneckCycle(t, defaultCoefficients, slowCPU)
	b := bottleneckCycle(t, Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.2, Response: 0.3, Process: 0.1}, slowCPU)
	ca, cb := *a.Trace.Capacity, *b.Trace.Capacity
	if ca != cb || a.To != b.To || a.Reason != b.Reason {
		t.Errorf("default coefficients: %+v to %d (%s); cpu only: %+v to %d (%s)", ca, a.To, a.Reason, cb, b.To, b.Reason)
	}
	// 200 ÷ 0.9 = 222 per unit of CPU: 0.22×, saturated alone: weight 2.
	if a.To != 2 || ca.Bottleneck != ResourceCPU || ca.Reading != 0.9 {
		t.Errorf("slow CPU: to %d, step %+v; want 2, bottleneck cpu", a.To, ca)
	}
}

// TestDefaultCoefficients: the tests' defaults are the shipped ones.
func TestDefaultCoefficients(t *testing.T) {
	if DefaultCoefficients() != defaultCoefficients {
		t.Errorf("DefaultCoefficients() = %+v, want %+v", DefaultCoefficients(), defaultCoefficients)
	}
}

// TestReadingSensitivities: each of the six coefficients, raised, makes
// the capacity controller's reading react more to its input, and 0 takes
// the input out; at the shipped coefficients the reading is the
// bottleneck's busy fraction. Every set sums to 1 (what is raised is
// taken from response, or response's share given elsewhere). The
// service's median busy fraction is 0.5 throughout.
//
// Resources (sensitivity c ÷ shipped c, Sensitised m·(u/m)^k): a resource
// 0.8 busy reads 0.8 at its shipped coefficient, 0.5·1.6² = 1.28 at twice
// it, 0.5·1.6³ = 2.048 at three times it; at 0 the next busiest resource
// (0.3) is the bottleneck. Director-side inputs (exponent (c − shipped) ÷
// shipped on the server's figure ÷ its service's median, the ratio bounded
// to [1/2, 2]) on a server 0.5 busy: a figure 1.5× its service's median
// reads 0.5·1.5 = 0.75 at twice the shipped value, 0.5·1.5² = 1.125 at
// three times, 0.5 at the shipped value and at 0; 3× is bounded to 2×:
// 1.0. Only an excess over the service counts: a resource (0.3) or a
// figure (0.8×) below its service's median reads as it is.
func TestReadingSensitivities(t *testing.T) {
	def := defaultCoefficients
	with := func(f func(*Coefficients)) Coefficients { c := def; f(&c); return c }
	nan := math.NaN()
	none := Pressures{Input: nan, Response: nan, Process: nan}
	ref := Pressures{Input: 1, Response: 1, Process: 0.8}
	cpuBound := ResourceFigures{CPU: 0.8, IOBusy: 0.3}
	diskBound := ResourceFigures{CPU: 0.3, IOBusy: 0.8}
	memBound := ResourceFigures{CPU: 0.3, MemoryPressure: 0.8}
	even := ResourceFigures{CPU: 0.5}
	for _, tt := range []struct {
		name       string
		c          Coefficients
		f          ResourceFigures
		x          Pressures
		want       float64
		driver     string
		bottleneck string
	}{
		{"cpu shipped 0.3", def, cpuBound, none, 0.8, "", ResourceCPU},
		{"cpu raised 0.6", with(func(c *Coefficients) { c.CPU, c.Response = 0.6, 0 }), cpuBound, none, 1.28, ResourceCPU, ResourceCPU},
		{"cpu 0: out, the disk is the bottleneck", with(func(c *Coefficients) { c.CPU, c.Disk = 0, 0.4 }), cpuBound, none, 0.3, "", ResourceDisk},
		{"cpu 0, disk shipped", with(func(c *Coefficients) { c.CPU, c.Memory = 0, 0.4 }), cpuBound, none, 0.3, "", ResourceDisk},
		{"disk shipped 0.1", def, diskBound, none, 0.8, "", ResourceDisk},
		{"disk raised 0.2", with(func(c *Coefficients) { c.Disk, c.Response = 0.2, 0.2 }), diskBound, none, 1.28, ResourceDisk, ResourceDisk},
		{"disk raised 0.3", with(func(c *Coefficients) { c.Disk, c.Response = 0.3, 0.1 }), diskBound, none, 2.048, ResourceDisk, ResourceDisk},
		{"disk 0: out", with(func(c *Coefficients) { c.Disk, c.Memory = 0, 0.2 }), diskBound, none, 0.3, "", ResourceCPU},
		{"memory shipped 0.1", def, memBound, none, 0.8, "", ResourceMemory},
		{"memory raised 0.2", with(func(c *Coefficients) { c.Memory, c.Response = 0.2, 0.2 }), memBound, none, 1.28, ResourceMemory, ResourceMemory},
		{"memory 0: out", with(func(c *Coefficients) { c.Memory, c.Disk = 0, 0.2 }), memBound, none, 0.3, "", ResourceCPU},
		{"response shipped 0.3", def, even, Pressures{Input: nan, Response: 1.5, Process: nan}, 0.5, "", ResourceCPU},
		{"response raised 0.6", with(func(c *Coefficients) { c.Response, c.Disk, c.Memory, c.Process = 0.6, 0, 0, 0 }), even, Pressures{Input: nan, Response: 1.5, Process: nan}, 0.75, InputResponse, ResourceCPU},
		{"response raised 0.6, 0.8× its service", with(func(c *Coefficients) { c.Response, c.Disk, c.Memory, c.Process = 0.6, 0, 0, 0 }), even, Pressures{Input: nan, Response: 0.8, Process: nan}, 0.5, "", ResourceCPU},
		{"response raised 0.6, 3× bounded to 2×", with(func(c *Coefficients) { c.Response, c.Disk, c.Memory, c.Process = 0.6, 0, 0, 0 }), even, Pressures{Input: nan, Response: 3, Process: nan}, 1, InputResponse, ResourceCPU},
		{"response 0: out", with(func(c *Coefficients) { c.Response, c.CPU = 0, 0.6 }), even, Pressures{Input: nan, Response: 1.5, Process: nan}, 0.5, "", ResourceCPU},
		{"process shipped 0.1", def, even, Pressures{Input: nan, Response: nan, Process: 1.2}, 0.5, "", ResourceCPU},
		{"process raised 0.2", with(func(c *Coefficients) { c.Process, c.Response = 0.2, 0.2 }), even, Pressures{Input: nan, Response: nan, Process: 1.2}, 0.75, InputProcess, ResourceCPU},
		{"process raised 0.3", with(func(c *Coefficients) { c.Process, c.Response = 0.3, 0.1 }), even, Pressures{Input: nan, Response: nan, Process: 1.2}, 1.125, InputProcess, ResourceCPU},
		{"process 0: out", with(func(c *Coefficients) { c.Process, c.Response = 0, 0.4 }), even, Pressures{Input: nan, Response: nan, Process: 1.2}, 0.5, "", ResourceCPU},
		{"input shipped 0.1", def, even, Pressures{Input: 1.5, Response: nan, Process: nan}, 0.5, "", ResourceCPU},
		{"input raised 0.2", with(func(c *Coefficients) { c.Input, c.Response = 0.2, 0.2 }), even, Pressures{Input: 1.5, Response: nan, Process: nan}, 0.75, InputShare, ResourceCPU},
		{"input raised 0.3", with(func(c *Coefficients) { c.Input, c.Response = 0.3, 0.1 }), even, Pressures{Input: 1.5, Response: nan, Process: nan}, 1.125, InputShare, ResourceCPU},
		{"input 0: out", with(func(c *Coefficients) { c.Input, c.Response = 0, 0.4 }), even, Pressures{Input: 1.5, Response: nan, Process: nan}, 0.5, "", ResourceCPU},
	} {
		if s := tt.c.Sum(); math.Abs(s-1) > 1e-9 {
			t.Fatalf("%s: coefficients sum to %v", tt.name, s)
		}
		busy, bottleneck := Busy(tt.f, tt.c)
		got, driver := Reading(busy, 0.5, 0.2, bottleneck, tt.x, ref, tt.c)
		if !near(got, tt.want) || driver != tt.driver || bottleneck != tt.bottleneck {
			t.Errorf("%s: reading %v, driver %q, bottleneck %q; want %v, %q, %q", tt.name, got, driver, bottleneck, tt.want, tt.driver, tt.bottleneck)
		}
	}
}

// TestReadingDriver: with two inputs moving the reading, the driver is the
// one that moved it more. cpu 0.6 on a CPU 0.6 busy against a median of
// 0.5: 0.5·1.2² = 0.72 (×1.2); response 0.6 on a probe 1.5× its service's:
// ×1.5 → 1.08, response.
func TestReadingDriver(t *testing.T) {
	c := Coefficients{CPU: 0.4, Response: 0.6}
	got, driver := Reading(0.6, 0.5, 0.2, ResourceCPU, Pressures{Input: 2, Response: 1.5, Process: 2}, Pressures{Input: 1, Response: 1, Process: 1}, c)
	if want := 0.5 * math.Pow(1.2, 4.0/3) * 1.5; !near(got, want) || driver != InputResponse {
		t.Errorf("reading %v, driver %q; want %v, %q", got, driver, want, InputResponse)
	}
}

// TestSensitivityEdges: the pure pieces at their edges.
func TestSensitivityEdges(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want float64
	}{
		{"resource at its shipped value", ResourceSensitivity(0.3, 0.3), 1},
		{"resource at 0", ResourceSensitivity(0, 0.3), 0},
		{"resource doubled", ResourceSensitivity(0.2, 0.1), 2},
		{"director input at its shipped value", DirectorSensitivity(0.3, 0.3), 0},
		{"director input below it", DirectorSensitivity(0.1, 0.3), 0},
		{"director input doubled", DirectorSensitivity(0.6, 0.3), 1},
		{"sensitised, k 1", Sensitised(0.8, 0.5, 0.2, 1), 0.8},
		{"sensitised, no median: the floor 0.2", Sensitised(0.3, 0, 0.2, 3), 0.2 * 1.5 * 1.5 * 1.5},
		{"sensitised, an idle service: the floor 0.2", Sensitised(0.25, 0.05, 0.2, 2), 0.2 * 1.25 * 1.25},
		{"sensitised, at the floor", Sensitised(0.2, 0.05, 0.2, 2), 0.2},
		{"sensitised, light 0.1: the floor 0.1", Sensitised(0.15, 0, 0.1, 3), 0.1 * 1.5 * 1.5 * 1.5},
		{"sensitised, the ratio bounded to 2", Sensitised(0.9, 0.3, 0.2, 2), 0.3 * 4},
		{"sensitised, k 0: the median", Sensitised(0.8, 0.5, 0.2, 0), 0.5},
		{"sensitised, at the median", Sensitised(0.5, 0.5, 0.2, 3), 0.5},
		{"sensitised, below the median", Sensitised(0.25, 0.5, 0.2, 2), 0.25},
		{"sensitised, above the median, k 0.5", Sensitised(0.72, 0.5, 0.2, 0.5), 0.6},
		{"correction, no reference", Correction(1.5, 0, 1), 1},
		{"correction, NaN", Correction(math.NaN(), 1, 1), 1},
		{"correction, s 0", Correction(1.5, 1, 0), 1},
		{"correction, below the median", Correction(0.1, 1, 2), 1},
		{"correction, bounded above", Correction(5, 1, 2), 4},
	} {
		if !near(tt.got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestPressuresFromTheCycle: the director-side inputs reach the reading
// from the cycle's own figures. Four servers at CPU 0.6, weights 10, 10,
// 10, 20, sent 300, 300, 300, 600 connections (each its weight's share:
// INPUT ÷ weight share 1), probes 20, 20, 20, 40 ms against a reference of
// 100 ms (RESPONSE 0.2, 0.2, 0.2, 0.4), runnable tasks per CPU 1, 1, 1, 2.
// With response 0.6 (exponent 1) the last reads 0.6 × (0.4/0.2) = 1.2; with
// process 0.2 (exponent 1) 0.6 × 2 = 1.2; with input 0.2 it reads 0.6 (its
// share of connections is its weight's); at the shipped coefficients 0.6.
func TestPressuresFromTheCycle(t *testing.T) {
	run := func(c Coefficients) CapacityStep {
		e := capacityEngine(t, c)
		var servers []Server
		for _, w := range []int{10, 10, 10, 20} {
			servers = append(servers, Server{
				Obs: &Observed{Record: DestRecord{State: Managed, Written: w}, Configured: w, Kernel: w, NewConns: int64(30 * w),
					Probed: true, ProbeRTT: time.Duration(2*w) * time.Millisecond, Polled: true, CPU: 0.6, Process: float64(w) / 10},
				State: &ServerState{Ctrl: float64(w), CtrlSet: true, Capacity: CapacityState{Est: 50 * float64(w), NObs: 2, AnchorSet: true}},
				Out:   &Decision{},
			})
		}
		e.Cycle(Service{Reference: 100 * time.Millisecond}, &ServiceState{}, servers, false, time.Unix(1000, 0))
		return *servers[3].Out.Trace.Capacity
	}
	for _, tt := range []struct {
		name   string
		c      Coefficients
		want   float64
		driver string
	}{
		{"shipped", defaultCoefficients, 0.6, ""},
		{"response 0.6", Coefficients{Input: 0.1, CPU: 0.3, Response: 0.6}, 1.2, InputResponse},
		{"process 0.2", Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.2, Process: 0.2}, 1.2, InputProcess},
		{"input 0.2", Coefficients{Input: 0.2, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.2, Process: 0.1}, 0.6, ""},
	} {
		c := run(tt.c)
		if !near(c.Reading, tt.want) || c.Driver != tt.driver || c.Busy != 0.6 {
			t.Errorf("%s: reading %v, driver %q, busy %v; want %v, %q, 0.6", tt.name, c.Reading, c.Driver, c.Busy, tt.want, tt.driver)
		}
	}
}

// Only a director input raised above its shipped coefficient makes the
// capacity controller read the servers' pressures.
func TestDirectorCorrected(t *testing.T) {
	def := DefaultCoefficients()
	raised, lowered := def, def
	raised.Response = 0.4
	lowered.Input, lowered.Process, lowered.CPU = 0.05, 0, 0.9
	for _, c := range []struct {
		name string
		c    Coefficients
		want bool
	}{{"shipped", def, false}, {"response 0.4 over 0.3", raised, true}, {"lowered, cpu raised", lowered, false}} {
		if got := DirectorCorrected(c.c); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
