package monitor

import (
	"lvs-feedback/agent"
	"lvs-feedback/policy"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestCapacityController: weights follow each server's connections per unit
// of CPU, in proportion, the most capable at the resolution.
func TestCapacityController(t *testing.T) {
	r, m := newCapacityRig(t, "anchor = 0\nsmoothing = 0.5\n")
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
	wantWeights(t, r, "first measurement", 10, 5, 20)
	// B recovers: 150 connections at CPU 0.5 = 300; smoothed with α 0.5,
	// n = 2: (0.5·300 + 0.25·100)/0.75 = 233.3; 20·233.3/400 = 11.7 → 12,
	// more than 20 % above 5: written. A and C: 200 and 400 again.
	r.agents.set(agentOf(rsB), 0.5)
	addConns(t, r, 100, 150, 100)
	cycle(t, m)
	wantWeights(t, r, "after B recovered", 10, 12, 20)
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
	r, m := newCapacityRig(t, "anchor = 0\nresolution = 10\n")
	cycle(t, m)
	addConns(t, r, 90, 95, 100) // all at CPU 0.95: capacities 94.7, 100, 105.3 → 9, 9, 10
	cycle(t, m)
	e, err := m.Explain(svcKey, rsA)
	must(t, err)
	if r.weight(rsA) != 10 || !strings.Contains(e.Decision, "not more than 20% of it") || e.Dest.Decision.Trace.Formula != nil {
		t.Errorf("A weight %d, decision %q, formula %v", r.weight(rsA), e.Decision, e.Dest.Decision.Trace.Formula)
	}
}

// TestCapacitySaturatedServerDropsAtOnce: a server saturated alone takes its
// lower capacity estimate at once instead of smoothing it in.
func TestCapacitySaturatedServerDropsAtOnce(t *testing.T) {
	for _, sat := range []string{"0.9", "0.0"} {
		r, m := newCapacityRig(t, "anchor = 0\nsmoothing = 0.5\nsaturation = "+sat+"\n")
		setAllCPU(r, 0.5)
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

func TestIntervalCPU(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	prev := &agent.CPUTime{Since: t0, BusySeconds: 10, SampledSeconds: 20}
	cur := &agent.CPUTime{Since: t0, BusySeconds: 13.5, SampledSeconds: 25}
	for _, tt := range []struct {
		name            string
		prev, cur       *agent.CPUTime
		maxSpan         float64
		wantCPU, wantSp float64
	}{
		{"5 s of totals", prev, cur, 10, 0.7, 5},
		{"a gap longer than maxSpan: last window", prev, cur, 4, 0.9, 0},
		{"first poll: last window", nil, cur, 10, 0.9, 0},
		{"old agent: last window", prev, nil, 10, 0.9, 0},
	} {
		cpu, span := intervalCPU(tt.prev, tt.cur, 0.9, tt.maxSpan)
		if math.Abs(cpu-tt.wantCPU) > 1e-12 || span != tt.wantSp {
			t.Errorf("%s: intervalCPU = %v over %v s, want %v over %v s", tt.name, cpu, span, tt.wantCPU, tt.wantSp)
		}
	}
}

// TestAnchoredCapacityController: the default controller keeps servers at
// their configured weights while their capacity per unit of weight agrees,
// moves a server that lost capacity, and returns it when it is idle again.
func TestAnchoredCapacityController(t *testing.T) {
	r, m := newCapacityRig(t, "smoothing = 0.5\n")
	setAllCPU(r, 0.5)
	cycle(t, m)
	addConns(t, r, 100, 100, 100) // capacities 200 each: all at the default
	if rep := cycle(t, m); rep.Writes != 0 {
		t.Errorf("equal capacities: %d writes, want 0", rep.Writes)
	}
	// B serves the same 100 connections at CPU 1.0, alone: its estimate
	// falls at once to 100, per unit of weight 10 against the median 20:
	// factor 0.5, weight 10·0.5 = 5.
	r.agents.set(agentOf(rsB), 1.0)
	addConns(t, r, 100, 100, 100)
	cycle(t, m)
	wantWeights(t, r, "B lost capacity", 10, 5, 10)
	e, err := m.Explain(svcKey, rsB)
	must(t, err)
	if !strings.Contains(e.Dest.Reason+e.Decision, "capacity 0.50×") {
		t.Errorf("explain B: reason %q decision %q", e.Dest.Reason, e.Decision)
	}
	// A: 200 per unit 10 = 20, the median (A and C at 20, B at 10) is 20.
	e, err = m.Explain(svcKey, rsA)
	must(t, err)
	if want := "not written: capacity per unit of default weight 1.00× the service's median (TH2 close: within ±15%: the default weight 10); the kernel has 10 already"; e.Decision != want {
		t.Errorf("explain A: %q\nwant %q", e.Decision, want)
	}
	// Everyone nearly idle (CPU 0.01): capacity to spare, B back to 10.
	setAllCPU(r, 0.01)
	addConns(t, r, 100, 50, 100)
	cycle(t, m)
	if b := r.weight(rsB); b != 10 {
		t.Errorf("idle again: B weight %d, want the default 10", b)
	}
	e, err = m.Explain(svcKey, rsA)
	must(t, err)
	if want := "not written: capacity per unit of default weight 1.00× the service's median (TH1 light: CPU 1% busy, under half of 20%: capacity to spare: the default weight 10); the kernel has 10 already"; e.Decision != want {
		t.Errorf("explain A, idle: %q\nwant %q", e.Decision, want)
	}
	// Everyone lightly loaded (CPU 0.15: under weight.light, 0.2, not
	// under half of it): TH1 holds, nothing is decided, and explain and
	// the status API say why.
	setAllCPU(r, 0.15)
	addConns(t, r, 30, 30, 30)
	if rep := cycle(t, m); rep.Writes != 0 {
		t.Errorf("all light: %d writes, want 0", rep.Writes)
	}
	e, err = m.Explain(svcKey, rsB)
	must(t, err)
	if want := "capacity controller: TH1 light: every server below 20% busy (weight.light; here CPU 15% busy): every server has capacity to spare, nothing is decided: weight kept"; e.Decision != want {
		t.Errorf("explain B, all light: %q\nwant %q", e.Decision, want)
	}
	if c := e.Dest.Decision.Trace.Capacity; c == nil || c.Rule != policy.RuleLight || c.Weight != 0 {
		t.Errorf("all light: capacity step %+v, want rule %q and no weight", c, policy.RuleLight)
	}
}

// TestCapacityLightKey: weight.light reaches the controller. Every server
// at 15 % CPU serving 30 connections: under the default 0.2 TH1 holds
// (nothing decided); with light = 0.1 each is measured (30 ÷ 0.15 = 200
// per unit of busy, 20 per unit of weight, all at the median) and TH2
// keeps it at its default weight.
func TestCapacityLightKey(t *testing.T) {
	for _, tt := range []struct {
		weight, rule string
	}{
		{"", policy.RuleLight},
		{"light = 0.1\n", policy.RuleClose},
	} {
		r, m := newCapacityRig(t, tt.weight)
		setAllCPU(r, 0.15)
		cycle(t, m)
		addConns(t, r, 30, 30, 30)
		if rep := cycle(t, m); rep.Writes != 0 {
			t.Errorf("%q: %d writes, want 0", tt.weight, rep.Writes)
		}
		e, err := m.Explain(svcKey, rsA)
		must(t, err)
		c := e.Dest.Decision.Trace.Capacity
		if c == nil || c.Rule != tt.rule || !strings.Contains(e.Decision, tt.rule) {
			t.Errorf("%q: capacity step %+v, decision %q; want rule %q named", tt.weight, c, e.Decision, tt.rule)
		}
	}
}

// TestCapacityHogAmongLightlyLoaded is the real-kernel e2e-monitor case
// (vmtest/guest/e2e-monitor.sh) in miniature: light traffic (0–3
// connections per 1 s interval), every server under 10 % CPU, then B's
// CPU saturated by a hog while the connections it is sent stay active.
// B must fall to the minimum at once, even in intervals where its peers
// served no connection (their smoothed lower bounds stand), stay there
// through intervals in which nothing came to it (no measurement: the
// estimate stands), and come back when the hog ends. It failed before the bounds were smoothed and a known estimate
// of 0 counted (B kept 10 for the whole hog).
func TestCapacityHogAmongLightlyLoaded(t *testing.T) {
	r, m := newCapacityRig(t, "")
	setAllCPU(r, 0.02)
	cycle(t, m)
	for i := uint32(0); i < 4; i++ {
		addConns(t, r, i%3, (i+1)%3, (i+2)%3)
		if rep := cycle(t, m); rep.Writes != 0 {
			t.Fatalf("light traffic, cycle %d: %d writes, want none", i, rep.Writes)
		}
	}
	r.agents.set(agentOf(rsB), 1.0)
	for i := range 4 {
		// The hog holds what B is sent: at even cycles a connection
		// comes and stays active (served 0: measured, the loss at once);
		// at odd ones none comes (nothing to measure: the estimate
		// stands). The peers serve nothing.
		addConns(t, r, 0, uint32(1-i%2), 0)
		must(t, r.table.SetActive(svcKey, rsB, i/2+1, 0))
		cycle(t, m)
		if a, b, c := r.weight(rsA), r.weight(rsB), r.weight(rsC); a != 10 || b != 1 || c != 10 {
			t.Fatalf("hog, cycle %d: weights %d %d %d, want 10 1 10", i, a, b, c)
		}
	}
	r.agents.set(agentOf(rsB), 0.02)
	must(t, r.table.SetActive(svcKey, rsB, 0, 0))
	addConns(t, r, 1, 0, 2)
	cycle(t, m)
	if b := r.weight(rsB); b != 10 {
		t.Errorf("hog over: B weight %d, want the default 10", b)
	}
}

// newCapacityRig is a rig running the capacity controller with the given
// extra [weight] lines (capacityConfig).
func newCapacityRig(t *testing.T, weight string) (*rig, *Monitor) {
	t.Helper()
	r := newRig(t)
	cfg, err := ParseConfig("t.toml", []byte(capacityConfig(weight)))
	must(t, err)
	cfg.StateDir = r.dir
	r.cfg = cfg
	return r, r.monitor(false)
}

// setAllCPU makes every agent of the rig report CPU busy fraction cpu.
func setAllCPU(r *rig, cpu float64) {
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		r.agents.set(agentOf(rs), cpu)
	}
}

// wantWeights checks the kernel weights of A, B and C after step what.
func wantWeights(t *testing.T, r *rig, what string, a, b, c int) {
	t.Helper()
	if ga, gb, gc := r.weight(rsA), r.weight(rsB), r.weight(rsC); ga != a || gb != b || gc != c {
		t.Errorf("%s: weights A %d B %d C %d, want %d %d %d", what, ga, gb, gc, a, b, c)
	}
}

// TestCapacityRestartKeepsDeviation: a monitor that restarts (or a
// director that takes over) while a server sits below its configured
// weight has no estimates yet; its first measurements must not write the
// configured weight back for the confirmation intervals and then lower the
// server again.
func TestCapacityRestartKeepsDeviation(t *testing.T) {
	r, m := newCapacityRig(t, "smoothing = 0.5\n")
	setAllCPU(r, 0.5)
	cycle(t, m)
	r.agents.set(agentOf(rsB), 1.0)
	addConns(t, r, 100, 100, 100)
	cycle(t, m) // B saturated alone: 10 → 5 at once
	wantWeights(t, r, "before the restart", 10, 5, 10)

	// At weight 5 B gets 50 connections and is 50 % busy: capacity 100,
	// half its peers' per unit of configured weight, as before.
	r.agents.set(agentOf(rsB), 0.5)
	m2 := r.monitor(false)
	for i := range 5 {
		addConns(t, r, 100, 50, 100)
		rep := cycle(t, m2)
		if rep.Writes != 0 {
			t.Errorf("restarted monitor, cycle %d: %d writes (B %d), want none", i, rep.Writes, r.weight(rsB))
		}
	}
	wantWeights(t, r, "after the restart", 10, 5, 10)
}

// TestCapacityTakeoverKeepsDeviation: a follower director (no traffic
// through its own table) does not measure and tracks the writer's weights;
// when it takes over with a server below its configured weight, the
// server stays there while the new writer's measurements agree.
func TestCapacityTakeoverKeepsDeviation(t *testing.T) {
	w, mw := newCapacityRig(t, "smoothing = 0.5\n")
	f, mf := newCapacityRig(t, "smoothing = 0.5\n")
	mf.SetFollower(true)
	setAllCPU(w, 0.5)
	setAllCPU(f, 0.5)
	cycle(t, mw)
	cycle(t, mf)
	w.agents.set(agentOf(rsB), 1.0)
	f.agents.set(agentOf(rsB), 1.0)
	addConns(t, w, 100, 100, 100)
	cycle(t, mw) // B saturated alone: 10 → 5 on the writer
	wantWeights(t, w, "writer", 10, 5, 10)
	for range 3 { // the standby mirrors it and sees no traffic of its own
		if _, err := mf.Adopt(mw.Snapshot(), nil); err != nil {
			t.Fatal(err)
		}
		cycle(t, mf)
	}
	wantWeights(t, f, "follower", 10, 5, 10)

	mf.SetFollower(false) // takeover: the traffic now comes through f
	f.agents.set(agentOf(rsB), 0.5)
	for i := range 5 {
		addConns(t, f, 100, 50, 100) // B: capacity 100, half its peers' per unit of weight
		if rep := cycle(t, mf); rep.Writes != 0 {
			t.Errorf("after the takeover, cycle %d: %d writes (B %d), want none", i, rep.Writes, f.weight(rsB))
		}
	}
	wantWeights(t, f, "after the takeover", 10, 5, 10)
}

// setResources makes addr's agent report CPU busy cpu, its busiest disk
// busy ioBusy and PSI memory some psiMemory % (the raw figures of an
// lvs-agent report, as e2e-disk reads them from disk_io_busy).
func setResources(r *rig, addr string, cpu, ioBusy, psiMemory float64) {
	r.agents.mu.Lock()
	defer r.agents.mu.Unlock()
	r.agents.reports[addr] = agent.Report{Schema: agent.SchemaVersion, Time: time.Now(), CPU: cpu, Disk: ioBusy,
		Raw: agent.Raw{CPUBusy: cpu, DiskIOBusy: ioBusy, DiskIODevice: "vda", PSIMemorySome10: &psiMemory}}
}

// TestCapacityDiskBoundServer: through the monitor, from the agents' raw
// figures. A and C are CPU-bound (CPU 0.5, disk 0.2 busy, 100 connections:
// 200 per unit of busy); B's disk is 95 % busy at 20 % CPU and it serves
// 40. With a disk coefficient B's capacity is 40 ÷ 0.95 = 42.1, 0.21× the
// median, saturated alone: weight 10 × 0.21 → 2 at once. With disk = 0.2
// (sensitivity 2) its disk reads 0.5 × (0.95/0.5)² = 1.805, 1.90× its busy
// fraction: 40 ÷ 1.805 = 22.2, 0.11×: weight 1. With disk = 0 it
// is 40 ÷ 0.2 = 200, as its peers': weight kept. The same for memory
// pressure (PSI memory some 95 %, disk idle).
func TestCapacityDiskBoundServer(t *testing.T) {
	withDisk := "memory = 0.0\ndisk = 0.2\n"     // memory out (its share to disk: B's disk counts twice as strongly)
	withMemory := "memory = 0.2\ndisk = 0.0\n"   // disk out
	const shipped = "memory = 0.1\ndisk = 0.1\n" // capacityConfig's
	for _, tt := range []struct {
		name, coefficients string
		ioBusy, psiMemory  float64
		wantB              int
		wantNote           string
		wantDriver         string // in the history record; "" at the shipped coefficients
	}{
		{"disk bound, disk 0.1", "", 0.95, 0, 2, "bottleneck disk 95% busy (CPU 20%)", ""},
		{"disk bound, disk 0.2", withDisk, 0.95, 0, 1, "bottleneck disk 95% busy (CPU 20%); read 1.90× its busy fraction, most from disk", "disk"},
		{"disk bound, disk 0", withMemory, 0.95, 0, 10, "", ""},
		{"memory bound, memory 0.1", "", 0.05, 95, 2, "bottleneck memory 95% busy (CPU 20%)", ""},
		{"memory bound, memory 0", withDisk, 0.05, 95, 10, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			conf := capacityConfig("")
			if tt.coefficients != "" {
				conf = strings.Replace(conf, shipped, tt.coefficients, 1)
			}
			cfg, err := ParseConfig("t.toml", []byte(conf))
			must(t, err)
			cfg.StateDir = r.dir
			r.cfg = cfg
			m := r.monitor(false)
			setResources(r, agentOf(rsA), 0.5, 0.2, 0)
			setResources(r, agentOf(rsB), 0.2, tt.ioBusy, tt.psiMemory)
			setResources(r, agentOf(rsC), 0.5, 0.2, 0)
			cycle(t, m)
			addConns(t, r, 100, 40, 100)
			cycle(t, m)
			wantWeights(t, r, tt.name, 10, tt.wantB, 10)
			e, err := m.Explain(svcKey, rsB)
			must(t, err)
			if tt.wantNote != "" && !strings.Contains(e.Dest.Reason, tt.wantNote) {
				t.Errorf("B's reason %q does not name its bottleneck (%q)", e.Dest.Reason, tt.wantNote)
			}
			if c := historyRecord(CycleReport{}, &e.Dest).Capacity; c == nil || c.Driver != tt.wantDriver || (c.Driver == "") != (c.Reading == 0) {
				t.Errorf("B's history record capacity %+v, want driver %q (and a reading with it)", c, tt.wantDriver)
			}
		})
	}
}

// TestCoefficientWarnings: under the capacity controller, -check warns
// about input, response and process set above 0 but below their defaults
// (the controller counts them only above their defaults: such a value acts
// as 0); not at 0, not at or above their defaults, not for cpu, disk and
// memory, and not under the LVS formula, which reads them all by size.
// With cpu, disk and memory all 0 it warns that the CPU is measured anyway.
func TestCoefficientWarnings(t *testing.T) {
	const service = "[[service]]\naddress = \"192.0.2.10:80/tcp\"\n[[service.server]]\naddress = \"198.51.100.11:80\"\nweight = 10\n"
	for _, tt := range []struct {
		name, conf string
		wants      []string
	}{
		{"defaults", "[coefficients]\ninput = 0.1\ncpu = 0.3\nmemory = 0.1\ndisk = 0.1\nresponse = 0.3\nprocess = 0.1\n" + service, nil},
		{"raised: they count", "[coefficients]\ninput = 0.2\ncpu = 0.2\nmemory = 0.1\ndisk = 0.1\nresponse = 0.3\nprocess = 0.1\n" + service, nil},
		{"below their defaults", "[coefficients]\ninput = 0.05\ncpu = 0.3\nmemory = 0.1\ndisk = 0.4\nresponse = 0.1\nprocess = 0.05\n" + service,
			[]string{`w.toml:2: warning: coefficients.input: 0.05 is below its default 0.1: the "capacity" controller counts it only above 0.1, so its weights are as with 0`,
				`w.toml:6: warning: coefficients.response: 0.1 is below its default 0.3`, `w.toml:7: warning: coefficients.process: 0.05 is below its default 0.1`}},
		{"cpu only: 0 is out, no warning", "[coefficients]\ninput = 0.0\ncpu = 1.0\nmemory = 0.0\ndisk = 0.0\nresponse = 0.0\nprocess = 0.0\n" + service, nil},
		{"the LVS formula reads them all", "[weight]\ncontroller = \"lvs\"\n[coefficients]\ninput = 0.0\ncpu = 1.0\nmemory = 0.0\ndisk = 0.0\nresponse = 0.0\nprocess = 0.0\n" + service, nil},
	} {
		_, ws, err := CheckConfig("w.toml", []byte(tt.conf))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(ws) != len(tt.wants) {
			t.Errorf("%s: warnings %v, want %d", tt.name, ws, len(tt.wants))
			continue
		}
		for i, w := range tt.wants {
			if !strings.HasPrefix(ws[i].String(), w) {
				t.Errorf("%s: warning %q, want it to start with %q", tt.name, ws[i], w)
			}
		}
	}
	_, ws, err := CheckConfig("w.toml", []byte("[coefficients]\ninput = 0.5\ncpu = 0.0\nmemory = 0.0\ndisk = 0.0\nresponse = 0.5\nprocess = 0.0\n"+service))
	if err != nil || len(ws) != 1 || !strings.HasPrefix(ws[0].String(), `w.toml:1: warning: coefficients: cpu, disk and memory are all 0`) {
		t.Errorf("no resource coefficient under the capacity controller: error %v, warnings %v", err, ws)
	}
}
