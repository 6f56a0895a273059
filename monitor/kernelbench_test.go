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

	mobyipvs "github.com/moby/ipvs"
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

// bareTable opens a moby/ipvs handle on the current network namespace and
// returns its view of the rig's services: the bare work goes through the
// netlink library directly, not through this module's ipvs package, so that
// everything the monitor adds — conversion, compare-and-set, the cycle's own
// work — counts against it.
func (r *kernelRig) bareTable(b *testing.B) (*mobyipvs.Handle, []*mobyipvs.Service) {
	b.Helper()
	h, err := mobyipvs.New("")
	if err != nil {
		b.Fatalf("moby/ipvs handle: %v", err)
	}
	b.Cleanup(h.Close)
	svcs, err := h.GetServices()
	if err != nil {
		b.Fatalf("moby/ipvs services: %v", err)
	}
	if len(svcs) != len(r.keys) {
		b.Fatalf("moby/ipvs lists %d services, want %d", len(svcs), len(r.keys))
	}
	return h, svcs
}

// bare is the least netlink work a cycle needs, through moby/ipvs: one
// destination dump of every service (IPVS has no dump of every
// destination at once), the whole table's state; and, when writing, one
// IPVS_CMD_SET_DEST per destination with its weight changed. The writes
// are undone outside the returned time (the same way), so the monitor
// never sees them. It returns the wall and the process's CPU time.
func (r *kernelRig) bare(b *testing.B, h *mobyipvs.Handle, svcs []*mobyipvs.Service, writing bool) (wall, cpu time.Duration) {
	cpu0, start := processCPU(), time.Now()
	var written [][]*mobyipvs.Destination
	if writing {
		written = make([][]*mobyipvs.Destination, len(svcs))
	}
	dests := 0
	for s, svc := range svcs {
		ds, err := h.GetDestinations(svc)
		if err != nil {
			b.Fatal(err)
		}
		dests += len(ds)
		if !writing {
			continue
		}
		for _, d := range ds {
			upd := *d
			upd.Weight ^= 1
			if err := h.UpdateDestination(svc, &upd); err != nil {
				b.Fatalf("set weight: %v", err)
			}
		}
		written[s] = ds
	}
	wall, cpu = time.Since(start), processCPU()-cpu0
	if dests != r.dests {
		b.Fatalf("bare dump listed %d destinations, want %d", dests, r.dests)
	}
	for s, ds := range written {
		for _, d := range ds {
			if err := h.UpdateDestination(svcs[s], d); err != nil {
				b.Fatalf("undo set weight: %v", err)
			}
		}
	}
	return wall, cpu
}

// BenchmarkKernelCycle measures the monitor's cycle (Monitor.Cycle) on the
// kernel's IPVS table at 10,000 destinations (100 services × 100 servers)
// against the bare netlink work of a cycle on the same table (bare), each
// iteration timing one of each in turn. ns/op is the cycle's wall time;
// bare-ms/op the bare work's; cycle/bare their ratio (targets: 1.5 steady,
// 1.2 all-writing; reported, not asserted); cpu-ms/op and bare-cpu-ms/op
// the process's CPU time for each (netlink work counts as the process's
// system time). steady: loads at the target, nothing written (asserted),
// against one dump of the table; all-writing: the loads alternate each
// cycle between 0 and 1.9, so every weight is written every cycle
// (asserted), against one dump and 10,000 weight sets. Needs
// LVS_KERNEL_TEST=1 and an empty IPVS table: the VM (make bench-kernel).
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
	h, svcs := r.bareTable(b)
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
			var cycle, bare, cpu, bareCPU time.Duration
			n := 0
			for b.Loop() {
				n++
				if writing {
					r.flips++
					r.setLoads(func(i int) float64 { return float64((i+r.flips)%2) * 1.9 })
				}
				wall, bcpu := r.bare(b, h, svcs, writing)
				bare += wall
				bareCPU += bcpu
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
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n) }
			b.ReportMetric(float64(cycle.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(ms(bare), "bare-ms/op")
			b.ReportMetric(float64(cycle)/float64(bare), "cycle/bare")
			b.ReportMetric(ms(cpu), "cpu-ms/op")
			b.ReportMetric(ms(bareCPU), "bare-cpu-ms/op")
		})
	}
}
