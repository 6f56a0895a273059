package policy

import (
	"math"
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
// 1000 per unit of CPU busy, as its peers: weight kept at 10.
func TestCoefficientsDriveCapacityWeights(t *testing.T) {
	diskBound := ResourceFigures{CPU: 0.2, IOBusy: 0.95}
	d := bottleneckCycle(t, defaultCoefficients, diskBound)
	c := d.Trace.Capacity
	if !d.Write || d.To != 2 || c.Bottleneck != ResourceDisk || c.Busy != 0.95 || !c.SaturatedAlone {
		t.Errorf("default coefficients: write %v to %d (%s), capacity step %+v; want weight 2, bottleneck disk at 0.95, saturated alone",
			d.Write, d.To, d.Reason, c)
	}
	// ((1 − 0.7)·210.5 + (0.7 − 0.7³)·1000) ÷ (1 − 0.7³) is not taken:
	// saturated alone, the lower observation is taken at once.
	if want := 200 / 0.95; math.Abs(c.Estimate-want) > 1e-9 {
		t.Errorf("default coefficients: estimate %v, want %v", c.Estimate, want)
	}
	noDisk := defaultCoefficients
	noDisk.CPU, noDisk.Disk = 0.4, 0
	d = bottleneckCycle(t, noDisk, diskBound)
	c = d.Trace.Capacity
	if d.Write || c.Weight != 10 || c.Bottleneck != ResourceCPU || c.Busy != 0.2 || math.Abs(c.Factor-1) > 1e-9 {
		t.Errorf("disk = 0: write %v to %d (%s), capacity step %+v; want weight kept at 10, bottleneck cpu at 0.2, factor 1",
			d.Write, d.To, d.Reason, c)
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
// measured: every figure of the step is the same with cpu = 1 and the
// others 0.
func TestCPUBoundUnchanged(t *testing.T) {
	slowCPU := ResourceFigures{CPU: 0.9, IOBusy: 0.3, MemoryPressure: 0.01}
	a := bottleneckCycle(t, defaultCoefficients, slowCPU)
	b := bottleneckCycle(t, Coefficients{CPU: 1}, slowCPU)
	ca, cb := *a.Trace.Capacity, *b.Trace.Capacity
	if ca != cb || a.To != b.To || a.Reason != b.Reason {
		t.Errorf("default coefficients: %+v to %d (%s); cpu only: %+v to %d (%s)", ca, a.To, a.Reason, cb, b.To, b.Reason)
	}
	// 200 ÷ 0.9 = 222 per unit of CPU: 0.22×, saturated alone: weight 2.
	if a.To != 2 || ca.Bottleneck != ResourceCPU {
		t.Errorf("slow CPU: to %d, step %+v; want 2, bottleneck cpu", a.To, ca)
	}
}
