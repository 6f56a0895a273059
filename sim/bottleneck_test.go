package sim

import (
	"testing"

	"lvs-feedback/monitor"
)

// TestBottleneckWeights runs the real monitor, writing weights, without
// the backlog guard (the capacity controller alone), on the disk and
// memory scenarios, seed 1, wrr, and averages the troubled server's
// weight, as a share of its configured weight, over the cycles from 30 s
// after its trouble starts to its end (seed 1 measured 0.40 and 0.54, and
// 1.00 with the CPU alone). With the default coefficients the controller
// measures the troubled server against its bottleneck — the disk,
// saturated (the paging's, in the squeeze) — and cuts it towards its true
// share (0.31 and 0.40 of the others'); with disk = 0 and memory = 0 it
// measures the CPU alone (cpu at its shipped 0.3: read as measured; their
// share to response, which does not see the disk), and the server keeps
// its weight. With disk raised from 0.1 to 0.3 (from response) the slow
// disk counts with sensitivity 3 and b is cut further (0.29, seed 1): the
// direction docs/tuning.md's worked example describes.
func TestBottleneckWeights(t *testing.T) {
	const noGuard = "[backlog_guard]\ncheck = \"0s\"\n"
	const cpuOnly = noGuard + "[coefficients]\ninput = 0.1\ncpu = 0.3\nmemory = 0.0\ndisk = 0.0\nresponse = 0.5\nprocess = 0.1\n"
	const diskBound = noGuard + "[coefficients]\ninput = 0.1\ncpu = 0.3\nmemory = 0.1\ndisk = 0.3\nresponse = 0.1\nprocess = 0.1\n"
	for _, tt := range []struct {
		file, base     string
		server         int
		bottleneck     string
		minCut, maxCut float64 // the troubled server's mean weight ÷ its default
	}{
		{"disk-slow", noGuard, 1, "disk", 0.15, 0.6},
		{"disk-slow", cpuOnly, 1, "cpu", 0.9, 1.01},
		{"disk-slow", diskBound, 1, "disk", 0.05, 0.3},
		{"memory-squeeze", noGuard, 2, "disk", 0.15, 0.7},
		{"memory-squeeze", cpuOnly, 2, "cpu", 0.9, 1.01},
	} {
		sc := loadShipped(t, tt.file)
		from, to := sc.Events[0].At.Seconds()+30, sc.Events[1].At.Seconds()
		pol, err := newMonitorPolicy("bottleneck", tt.base, sc)
		if err != nil {
			t.Fatal(err)
		}
		var r *run
		var weightSum float64
		var cycles int
		bottlenecks := map[string]int{}
		pol.onCycle = func(now float64, rep monitor.CycleReport) {
			if now < from || now >= to {
				return
			}
			weightSum += float64(r.dests[tt.server].Weight)
			cycles++
			for _, d := range rep.Dests {
				if d.Key.Dest == serverAddr(tt.server) && d.Decision.Trace.Capacity != nil {
					bottlenecks[d.Decision.Trace.Capacity.Bottleneck]++
				}
			}
		}
		r, err = newRun(sc, NewStream(sc, 1), 1, "wrr", pol)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.loop(); err != nil {
			t.Fatal(err)
		}
		if cycles == 0 {
			t.Fatalf("%s: no cycle in [%g, %g)", tt.file, from, to)
		}
		share := weightSum / float64(cycles) / float64(sc.Servers[tt.server].Weight)
		most, name := 0, ""
		for b, n := range bottlenecks {
			if n > most {
				most, name = n, b
			}
		}
		t.Logf("%s, cpu only %v: %s's mean weight %.2f of its default over %d cycles; bottleneck %v",
			tt.file, tt.base == cpuOnly, sc.Servers[tt.server].Name, share, cycles, bottlenecks)
		if share < tt.minCut || share > tt.maxCut || name != tt.bottleneck {
			t.Errorf("%s, cpu only %v: mean weight %.2f of the default, want %.2f–%.2f; bottleneck mostly %q, want %q",
				tt.file, tt.base == cpuOnly, share, tt.minCut, tt.maxCut, name, tt.bottleneck)
		}
	}
}
