package monitor

import (
	"math"
	"net/netip"
	"strings"
	"testing"
)

func TestSmoothCapacity(t *testing.T) {
	tests := []struct {
		prev  float64
		n     int
		obs   float64
		alpha float64
		want  float64
	}{
		{0, 1, 100, 0.5, 100}, // the first observation is taken as it is
		// ((1−0.5)·50 + (0.5−0.25)·100) / (1−0.25) = (25 + 25)/0.75 = 66.667
		{100, 2, 50, 0.5, 200.0 / 3},
		// n = 3: ((0.5)·80 + (0.5−0.125)·66.667) / 0.875 = (40 + 25)/0.875 = 74.286
		{200.0 / 3, 3, 80, 0.5, 65 / 0.875},
		{100, 5, 40, 0, 40}, // α = 0: the last observation only
	}
	for _, tt := range tests {
		if got := SmoothCapacity(tt.prev, tt.n, tt.obs, tt.alpha); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("SmoothCapacity(%v, %d, %v, %v) = %v, want %v", tt.prev, tt.n, tt.obs, tt.alpha, got, tt.want)
		}
	}
}

func TestCapacityWeight(t *testing.T) {
	tests := []struct {
		est, maxEst     float64
		resolution, min int
		want            int
	}{
		{400, 400, 20, 1, 20},
		{200, 400, 20, 1, 10},
		{100, 400, 20, 1, 5},
		{1, 400, 20, 1, 1}, // 0.05 → never below min
		{0, 400, 20, 1, 1},
		{100, 0, 20, 1, 1},
	}
	for _, tt := range tests {
		if got := CapacityWeight(tt.est, tt.maxEst, tt.resolution, tt.min); got != tt.want {
			t.Errorf("CapacityWeight(%v, %v, %d) = %d, want %d", tt.est, tt.maxEst, tt.resolution, got, tt.want)
		}
	}
	for _, tt := range []struct {
		cur, next int
		band      float64
		want      bool
	}{{10, 12, 0.2, false}, {10, 13, 0.2, true}, {10, 7, 0.2, true}, {20, 20, 0, false}} {
		if got := PassesBand(tt.cur, tt.next, tt.band); got != tt.want {
			t.Errorf("PassesBand(%d, %d, %v) = %v", tt.cur, tt.next, tt.band, got)
		}
	}
}

// TestCapacityController: weights follow each server's connections per unit
// of CPU, in proportion, the most capable at the resolution.
func TestCapacityController(t *testing.T) {
	r := newRig(t)
	cfg, err := ParseConfig("t.toml", []byte(cpuOnlyConfig+"[weight]\ncontroller = \"capacity\"\nsmoothing = 0.5\n"))
	must(t, err)
	cfg.StateDir = r.dir
	r.cfg = cfg
	m := r.monitor(false)
	r.agents.set(agentOf(rsA), 0.5)
	r.agents.set(agentOf(rsB), 1.0)
	r.agents.set(agentOf(rsC), 0.25)
	rep := cycle(t, m) // no earlier counter reading: no estimate, nothing written
	if rep.Writes != 0 {
		t.Fatalf("first cycle wrote %d weights without a measurement", rep.Writes)
	}
	// 100 connections each in the interval: capacities 200, 100, 400.
	addConns(t, r, 100, 100, 100)
	cycle(t, m)
	// 20·200/400 = 10 (A stays: no change), 20·100/400 = 5, 20·400/400 = 20.
	if a, b, c := r.weight(rsA), r.weight(rsB), r.weight(rsC); a != 10 || b != 5 || c != 20 {
		t.Errorf("weights A %d B %d C %d, want 10 5 20", a, b, c)
	}
	// B recovers: 150 connections at CPU 0.5 = 300; smoothed with α 0.5,
	// n = 2: (0.5·300 + 0.25·100)/0.75 = 233.3; 20·233.3/400 = 11.7 → 12,
	// more than 20 % above 5: written. A and C: 200 and 400 again.
	r.agents.set(agentOf(rsB), 0.5)
	addConns(t, r, 100, 150, 100)
	cycle(t, m)
	if a, b, c := r.weight(rsA), r.weight(rsB), r.weight(rsC); a != 10 || b != 12 || c != 20 {
		t.Errorf("after B recovered: weights A %d B %d C %d, want 10 12 20", a, b, c)
	}
	e, err := m.Explain(svcKey, rsB)
	must(t, err)
	if !strings.Contains(e.Decision, "capacity share 12 of 20") {
		t.Errorf("explain: %q", e.Decision)
	}
}

func addConns(t *testing.T, r *rig, a, b, c uint32) {
	t.Helper()
	must(t, r.table.AddConnections(svcKey, rsA, a))
	must(t, r.table.AddConnections(svcKey, rsB, b))
	must(t, r.table.AddConnections(svcKey, rsC, c))
}

func TestCapacityExplainWithinBand(t *testing.T) {
	r := newRig(t)
	cfg, err := ParseConfig("t.toml", []byte(cpuOnlyConfig+"[weight]\ncontroller = \"capacity\"\nresolution = 10\n"))
	must(t, err)
	cfg.StateDir = r.dir
	r.cfg = cfg
	m := r.monitor(false)
	cycle(t, m)
	addConns(t, r, 90, 95, 100) // all at CPU 0.95: capacities 94.7, 100, 105.3 → 9, 9, 10
	cycle(t, m)
	e, err := m.Explain(svcKey, rsA)
	must(t, err)
	if r.weight(rsA) != 10 || !strings.Contains(e.Decision, "not more than 20% of it") || !math.IsNaN(e.Step) {
		t.Errorf("A weight %d, decision %q, step %v", r.weight(rsA), e.Decision, e.Step)
	}
}

func TestSaturatedAlone(t *testing.T) {
	for _, tt := range []struct {
		cpu, median, sat float64
		want             bool
	}{
		{0.95, 0.4, 0.9, true},   // one server saturated, the service is not: lost capacity
		{0.95, 0.92, 0.9, false}, // everyone busy: a burst
		{0.85, 0.4, 0.9, false},
		{1, 0, 0, false}, // off
	} {
		if got := SaturatedAlone(tt.cpu, tt.median, tt.sat); got != tt.want {
			t.Errorf("SaturatedAlone(%v, %v, %v) = %v", tt.cpu, tt.median, tt.sat, got)
		}
	}
}

// TestCapacitySaturatedServerDropsAtOnce: a server saturated alone takes its
// lower capacity estimate at once instead of smoothing it in.
func TestCapacitySaturatedServerDropsAtOnce(t *testing.T) {
	for _, sat := range []string{"0.9", "0.0"} {
		r := newRig(t)
		cfg, err := ParseConfig("t.toml", []byte(cpuOnlyConfig+"[weight]\ncontroller = \"capacity\"\nsmoothing = 0.5\nsaturation = "+sat+"\n"))
		must(t, err)
		cfg.StateDir = r.dir
		r.cfg = cfg
		m := r.monitor(false)
		for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
			r.agents.set(agentOf(rs), 0.5)
		}
		cycle(t, m)
		addConns(t, r, 100, 100, 100) // all 200: weights 20, 20, 20
		cycle(t, m)
		// B loses capacity: busy 1.0 for 50 connections = 50. Median CPU 0.5.
		r.agents.set(agentOf(rsB), 1.0)
		addConns(t, r, 100, 50, 100)
		cycle(t, m)
		// At once: 20·50/200 = 5. Smoothed (α 0.5, n = 2):
		// (0.5·50 + 0.25·200)/0.75 = 100 → 10.
		want := 5
		if sat == "0.0" {
			want = 10
		}
		if got := r.weight(rsB); got != want {
			t.Errorf("saturation %s: B weight %d, want %d", sat, got, want)
		}
	}
}
