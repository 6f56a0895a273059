package monitor

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
)

// benchRig builds services×servers destinations in an in-memory table with
// stub agents and probes that answer at once, and a monitor for them.
// Steady, it runs the default controller with every server at the same
// load: nothing is written. Otherwise it runs the LVS formula with every
// server at load 0; flipping agents.mirror between cycles (load 1.9) moves
// every weight by about 5 every cycle: every weight is written.
func benchRig(b *testing.B, services, servers int, steady bool) (*Monitor, *stubAgents) {
	b.Helper()
	var conf strings.Builder
	conf.WriteString("interval = \"5s\"\nstate_dir = \"" + b.TempDir() + "\"\n")
	conf.WriteString("[coefficients]\ninput = 0.0\ncpu = 1.0\nmemory = 0.0\ndisk = 0.0\nresponse = 0.0\nprocess = 0.0\n")
	if !steady {
		conf.WriteString("[weight]\ncontroller = \"lvs\"\nthreshold = 0\n")
	}
	table := ipvs.NewMem()
	agents := &stubAgents{reports: map[string]agent.Report{}}
	for s := range services {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(s)})
		key := ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.AddrPortFrom(vip, 80)}
		if err := table.AddService(key, "wrr"); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&conf, "[[service]]\naddress = %q\n", key.String())
		for i := range servers {
			rip := netip.AddrFrom4([4]byte{10, byte(s), byte(i >> 8), byte(i)})
			rs := netip.AddrPortFrom(rip, 80)
			if err := table.AddDestination(key, rs, 10); err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(&conf, "[[service.server]]\naddress = %q\nweight = 10\n", rs.String())
			if steady {
				agents.set(agentOf(rs), 0.95)
			} else {
				agents.set(agentOf(rs), 0)
			}
		}
	}
	cfg, err := ParseConfig("bench.toml", []byte(conf.String()))
	if err != nil {
		b.Fatal(err)
	}
	store, err := NewFileStore(cfg.StateDir)
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(cfg, Deps{Table: table, Agents: agents, Prober: &stubProber{down: map[netip.AddrPort]bool{}}, Store: store}, false)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Cycle(context.Background()); err != nil { // adopt everything once
		b.Fatal(err)
	}
	return m, agents
}

// processCPU returns the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCycle measures one full cycle (read, reconcile, gather from stub
// agents and probes, observe, decide, apply) at 100 and 10,000
// destinations: steady (nothing written) and all-writing (every weight
// written every cycle, asserted). docs/scale.md has the figures.
func BenchmarkCycle(b *testing.B) {
	for _, size := range []struct {
		services, servers int
		steady            bool
	}{{10, 10, true}, {100, 100, true}, {100, 100, false}} {
		name := fmt.Sprintf("dests=%d/steady", size.services*size.servers)
		if !size.steady {
			name = fmt.Sprintf("dests=%d/all-writing", size.services*size.servers)
		}
		b.Run(name, func(b *testing.B) {
			m, agents := benchRig(b, size.services, size.servers, size.steady)
			want := 0
			if !size.steady {
				want = size.services * size.servers
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				if !size.steady {
					agents.mu.Lock()
					agents.mirror = !agents.mirror
					agents.mu.Unlock()
				}
				rep, err := m.Cycle(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if rep.Writes != want {
					b.Fatalf("%d weights written, want %d", rep.Writes, want)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkGuard measures one backlog check between cycles (read the table,
// reconcile, median per service, decide) at 100 and 10,000 destinations
// with no backlog: what the guard costs every second.
func BenchmarkGuard(b *testing.B) {
	for _, size := range []struct{ services, servers int }{{10, 10}, {100, 100}} {
		b.Run(fmt.Sprintf("dests=%d", size.services*size.servers), func(b *testing.B) {
			m, _ := benchRig(b, size.services, size.servers, true)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				if n, err := m.Guard(context.Background()); err != nil || n != 0 {
					b.Fatalf("guard: %d writes, %v", n, err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
