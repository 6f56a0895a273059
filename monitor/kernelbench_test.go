//go:build linux

package monitor

import (
	"context"
	"net/netip"
	"os"

	"testing"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
)

// kernelRig is a monitor over an IPVS table (the kernel's) at services ×
// servers destinations (wrr, weight 10), with stub agents and probes that
// answer at once, so that a cycle's cost is the monitor's own work plus the
// table's.
type kernelRig struct {
	table  ipvs.Admin
	m      *Monitor
	agents *stubAgents
	keys   []ipvs.ServiceKey
	addrs  [][]netip.AddrPort // per service
	flips  int                // all-writing cycles so far
	dests  int
}

// newKernelRig fills table, which must be empty (the benchmark never
// touches a table it did not build), and removes what it added when b
// ends. The "lvs" controller with threshold 0 and the CPU as the only input
// makes the loads decide every write: at the target (0.95) nothing moves;
// alternating far from it, every weight moves every cycle.
func newKernelRig(b *testing.B, table ipvs.Admin, services, servers int) *kernelRig {
	b.Helper()
	if svcs, err := table.Services(); err != nil || len(svcs) != 0 {
		b.Fatalf("this benchmark needs an empty IPVS table in its network namespace (the test VM's): %d services, %v", len(svcs), err)
	}
	r := &kernelRig{table: table, agents: &stubAgents{reports: map[string]agent.Report{}}, dests: services * servers}
	b.Cleanup(func() {
		for _, k := range r.keys {
			if err := table.RemoveService(k); err != nil {
				b.Errorf("clean up: %v", err)
			}
		}
	})
	var cfg Config
	cfg, r.keys, r.addrs = benchTable(b, table, services, servers, "[weight]\ncontroller = \"lvs\"\nthreshold = 0\n")
	r.setLoads(func(int) float64 { return 0.95 })
	r.m = benchMonitor(b, cfg, table, r.agents)
	return r
}

// setLoads gives server i of every service the CPU load(i).
func (r *kernelRig) setLoads(load func(i int) float64) {
	for _, addrs := range r.addrs {
		for i, rs := range addrs {
			r.agents.set(agentOf(rs), load(i))
		}
	}
}

// bare is the kernel work of one cycle without the monitor: every service's
// destinations listed and, when writing, every weight written with one
// SetWeights per service. The writes are undone outside the returned time
// (the same way, one batch per service), so the monitor never sees them.
func (r *kernelRig) bare(b *testing.B, writing bool) time.Duration {
	start := time.Now()
	undo := make([][]ipvs.WeightChange, len(r.keys))
	for s, key := range r.keys {
		ds, err := r.table.Destinations(key)
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) != len(r.addrs[s]) {
			b.Fatalf("%v lists %d destinations, want %d", key, len(ds), len(r.addrs[s]))
		}
		if !writing {
			continue
		}
		changes := make([]ipvs.WeightChange, len(ds))
		undo[s] = make([]ipvs.WeightChange, len(ds))
		for i, d := range ds {
			changes[i] = ipvs.WeightChange{Dest: d.Addr, From: d.Weight, To: d.Weight ^ 1}
			undo[s][i] = ipvs.WeightChange{Dest: d.Addr, From: d.Weight ^ 1, To: d.Weight}
		}
		checkBatch(b, key, r.table.SetWeights(key, changes))
	}
	took := time.Since(start)
	if writing {
		for s, key := range r.keys {
			checkBatch(b, key, r.table.SetWeights(key, undo[s]))
		}
	}
	return took
}

func checkBatch(b *testing.B, key ipvs.ServiceKey, errs []error) {
	b.Helper()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("SetWeights %v: %v", key, err)
		}
	}
}

// BenchmarkKernelCycle measures the monitor's cycle (Monitor.Cycle) on the
// kernel's IPVS table at 10,000 destinations (100 services × 100 servers)
// against the bare kernel work of a cycle on the same table (bare), each
// iteration timing one of each in turn. ns/op is the cycle's wall time;
// bare-ms/op the bare work's; cycle/bare their ratio; cpu-ms/op the
// process's CPU time per cycle (netlink work counts as the process's system
// time). steady: loads at the target, nothing written (asserted);
// all-writing: the loads alternate each cycle between 0 and 1.9, so every
// weight is written every cycle (asserted). Needs LVS_KERNEL_TEST=1 and an
// empty IPVS table: the VM (make bench-kernel).
func BenchmarkKernelCycle(b *testing.B) {
	if os.Getenv("LVS_KERNEL_TEST") != "1" {
		b.Skip("set LVS_KERNEL_TEST=1 to run against the kernel's IPVS (needs root and the ip_vs modules; meant for the VM: make bench-kernel)")
	}
	// The current network namespace's table: in the VM, the guest's.
	table, err := ipvs.OpenKernel("")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { table.Close() })
	r := newKernelRig(b, table, 100, 100)
	for _, writing := range []bool{false, true} {
		name := "dests=10000/steady"
		if writing {
			name = "dests=10000/all-writing"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			wantWrites := 0
			if writing {
				wantWrites = r.dests
			} else {
				r.setLoads(func(int) float64 { return 0.95 })
			}
			var cycle, bare, cpu time.Duration
			n := 0
			for b.Loop() {
				n++
				if writing {
					r.flips++
					r.setLoads(func(i int) float64 { return float64((i+r.flips)%2) * 1.9 })
				}
				bare += r.bare(b, writing)
				cpu0, t0 := processCPU(), time.Now()
				rep, err := r.m.Cycle(ctx)
				cycle += time.Since(t0)
				cpu += processCPU() - cpu0
				if err != nil {
					b.Fatal(err)
				}
				if rep.Writes != wantWrites {
					b.Fatalf("cycle wrote %d weights, want %d", rep.Writes, wantWrites)
				}
			}
			b.ReportMetric(float64(cycle.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(float64(bare)/float64(time.Millisecond)/float64(n), "bare-ms/op")
			b.ReportMetric(float64(cycle)/float64(bare), "cycle/bare")
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(n), "cpu-ms/op")
		})
	}
}
