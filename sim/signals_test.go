package sim

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"lvs-feedback/monitor"
	lvspolicy "lvs-feedback/policy"
)

// serverSignals are one server's means, over a stretch of monitor cycles,
// of what the monitor saw: the six inputs of the composite load, and
// connections served per unit of CPU busy (the default controller's
// capacity observation). The composite is linear, so its mean is the
// composite of the means.
type serverSignals struct {
	in           lvspolicy.Inputs
	servedPerCPU float64
	// servedPerBusiest: connections served per unit of the busy
	// fraction of the busier of CPU and disk (the bottleneck's).
	servedPerBusiest float64
	n                int
}

// observeSignals runs the default monitor in dry run (it decides, writes
// nothing: the weights stay the configured ones) on scenario sc, seed 1,
// under wrr, and returns each server's mean signals over the cycles in
// [from, to) seconds.
func observeSignals(t *testing.T, sc *Scenario, from, to float64) []serverSignals {
	t.Helper()
	spec, err := BuiltinPolicy(PolDefault)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := newMonitorPolicy(spec.Name, spec.Monitor, sc)
	if err != nil {
		t.Fatal(err)
	}
	ref := sc.Probe.Reference.Seconds()
	iv := pol.cfg.Interval.Seconds()
	out := make([]serverSignals, len(sc.Servers))
	pol.dryRun = true
	pol.onCycle = func(now float64, rep monitor.CycleReport) {
		if now < from || now >= to || len(rep.Dests) != len(sc.Servers) {
			return
		}
		var newSum float64
		for _, d := range rep.Dests {
			newSum += float64(d.NewConns)
		}
		for _, d := range rep.Dests {
			k := -1
			for j := range sc.Servers {
				if serverAddr(j) == d.Key.Dest {
					k = j
				}
			}
			o := d.Observed
			if k < 0 || !o.Polled || o.AgentErr != nil || o.ProbeErr != nil || o.NewConns < 0 || o.CPU <= 0 {
				continue
			}
			in := lvspolicy.Inputs{
				Input:    float64(o.NewConns) / (newSum / float64(len(sc.Servers))),
				CPU:      o.CPU,
				Memory:   o.Memory,
				Disk:     o.Disk,
				Response: o.ProbeRTT.Seconds() / ref,
				Process:  o.Process,
			}
			s := &out[k]
			s.in.Input += in.Input
			s.in.CPU += in.CPU
			s.in.Memory += in.Memory
			s.in.Disk += in.Disk
			s.in.Response += in.Response
			s.in.Process += in.Process
			served := lvspolicy.ServedConnections(o.NewConns, o.ActiveDelta) / iv
			s.servedPerCPU += served / in.CPU
			s.servedPerBusiest += served / math.Max(in.CPU, in.Disk)
			s.n++
		}
	}
	r, err := newRun(sc, NewStream(sc, 1), 1, "wrr", pol)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	for k := range out {
		s := &out[k]
		if s.n == 0 {
			t.Fatalf("no cycle observed server %s in [%g, %g)", sc.Servers[k].Name, from, to)
		}
		f := 1 / float64(s.n)
		s.in = lvspolicy.Inputs{Input: s.in.Input * f, CPU: s.in.CPU * f, Memory: s.in.Memory * f,
			Disk: s.in.Disk * f, Response: s.in.Response * f, Process: s.in.Process * f}
		s.servedPerCPU *= f
		s.servedPerBusiest *= f
	}
	return out
}

// coefficientSets are the coefficient sets compared: the default (the
// monitor's, which the lvs policy uses) and two variants.
func coefficientSets(t *testing.T, sc *Scenario) (names []string, sets []lvspolicy.Coefficients) {
	t.Helper()
	names = []string{"default", "disk-heavy", "memory-heavy"}
	for _, n := range names {
		base := "# monitor defaults\n"
		if n != "default" {
			b, err := os.ReadFile("variants/" + n + ".toml")
			if err != nil {
				t.Fatal(err)
			}
			base = string(b)
		}
		cfg, err := MonitorConfig(n, base, sc)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, cfg.Coefficients)
	}
	return names, sets
}

func signalTable(sc *Scenario, sig []serverSignals, names []string, sets []lvspolicy.Coefficients) string {
	var b strings.Builder
	b.WriteString("| server | CPU | DISK | MEMORY | PROCESS | RESPONSE | INPUT | served conn/s per CPU busy | per busiest of CPU, DISK |")
	for _, n := range names {
		fmt.Fprintf(&b, " load, %s |", n)
	}
	b.WriteString("\n|---|---|---|---|---|---|---|---|---|" + strings.Repeat("---|", len(names)) + "\n")
	for k, s := range sig {
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f |",
			sc.Servers[k].Name, s.in.CPU, s.in.Disk, s.in.Memory, s.in.Process, s.in.Response, s.in.Input, s.servedPerCPU, s.servedPerBusiest)
		for _, c := range sets {
			fmt.Fprintf(&b, " %.3f |", lvspolicy.AggregateLoad(s.in, c))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestCompositeSignals runs the default monitor in dry run (static equal
// weights) through the multi-resource scenarios and compares, for the
// troubled server against the others during its event (from 30 s after it
// to its end), what the default controller measures — connections served
// per unit of CPU busy — with the composite load under three coefficient
// sets. Run with -v for the tables of docs/results/notebook.md, which says what
// they mean:
//   - disk-slow: the CPU-only measure is blind (within 15 %); the
//     composite with the default coefficients reads the server as *less*
//     loaded (its CPU and PROCESS fall more than DISK rises), the
//     disk-heavy set as the most loaded;
//   - memory-squeeze: the CPU-only measure reads the thrashing server as
//     no less capable (stalls are not CPU busy); the composite is many
//     times the others' (PROCESS and RESPONSE, not MEMORY);
//   - memory-full: nothing is slower, the CPU-only measure agrees, and
//     every composite reads the server as the most loaded — a false
//     alarm, largest with the memory-heavy set.
//
// In all three, connections served per unit of the busier of CPU and
// DISK — the bottleneck's busy fraction — is within 20 % of the true
// capacity ratio (b's 1.25 of 4 when its disk is slow, c's 1.6 of 4 when
// it thrashes, 1 when its memory is merely full). The thrashing server
// reads high (0.47 for 0.40 with seed 1): it is overloaded, and processor
// sharing completes the short requests first, so the connections it
// serves overstate the work it does.
func TestCompositeSignals(t *testing.T) {
	cases := []struct {
		file    string
		server  int // the troubled server
		top     [3]bool
		ratio   float64 // the troubled server's default composite ÷ the others' largest, at least
		trueCap float64 // the troubled server's true capacity ÷ the others'
	}{
		{"disk-slow", 1, [3]bool{false, true, false}, 0, 1.25 / 4},
		{"memory-squeeze", 2, [3]bool{true, true, true}, 2, 1.6 / 4},
		{"memory-full", 1, [3]bool{true, true, true}, 1.05, 1},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			sc := loadShipped(t, c.file)
			from, to := sc.Events[0].At.Seconds()+30, sc.Events[1].At.Seconds()
			sig := observeSignals(t, sc, from, to)
			names, sets := coefficientSets(t, sc)
			t.Logf("%s, seed 1, wrr, weights static, cycles in [%gs, %gs):\n%s", c.file, from, to, signalTable(sc, sig, names, sets))
			bad := sig[c.server]
			var othersPerCPU, othersPerBusiest float64
			for k, s := range sig {
				if k != c.server {
					othersPerCPU += s.servedPerCPU / float64(len(sig)-1)
					othersPerBusiest += s.servedPerBusiest / float64(len(sig)-1)
				}
			}
			if got := bad.servedPerBusiest / othersPerBusiest; math.Abs(got/c.trueCap-1) > 0.2 {
				t.Errorf("served per busiest resource: %.2f of the others', true capacity %.2f", got, c.trueCap)
			}
			// The CPU-only capacity observation does not show the lost
			// capacity: not more than 15 % below the others'.
			if bad.servedPerCPU < 0.85*othersPerCPU {
				t.Errorf("served per CPU %.0f against the others' %.0f: the CPU-only measure saw it", bad.servedPerCPU, othersPerCPU)
			}
			for i, set := range sets {
				mine := lvspolicy.AggregateLoad(bad.in, set)
				var others float64
				for k, s := range sig {
					if k != c.server {
						others = math.Max(others, lvspolicy.AggregateLoad(s.in, set))
					}
				}
				if (mine > others) != c.top[i] {
					t.Errorf("%s coefficients: load %.3f against the others' largest %.3f; want above: %v", names[i], mine, others, c.top[i])
				}
				if i == 0 && mine < c.ratio*others {
					t.Errorf("default coefficients: load %.3f, want at least %.2f × the others' largest %.3f", mine, c.ratio, others)
				}
			}
		})
	}
}
