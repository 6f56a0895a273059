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
	weight := "[weight]\ncontroller = \"lvs\"\nthreshold = 0\n"
	load := 0.0
	if steady {
		weight, load = "", 0.95
	}
	table := ipvs.NewMem()
	cfg, _, addrs := benchTable(b, table, services, servers, weight)
	agents := &stubAgents{reports: map[string]agent.Report{}}
	for _, svc := range addrs {
		for _, rs := range svc {
			agents.set(agentOf(rs), load)
		}
	}
	return benchMonitor(b, cfg, table, agents), agents
}

// benchTable adds services×servers destinations (wrr, weight 10) to table
// and returns a configuration for them — CPU the only input, weightTOML
// added — with the services' keys and their servers.
func benchTable(b *testing.B, table ipvs.Admin, services, servers int, weightTOML string) (Config, []ipvs.ServiceKey, [][]netip.AddrPort) {
	b.Helper()
	var conf strings.Builder
	conf.WriteString("interval = \"5s\"\nstate_dir = \"" + b.TempDir() + "\"\n")
	conf.WriteString("[coefficients]\ninput = 0.0\ncpu = 1.0\nmemory = 0.0\ndisk = 0.0\nresponse = 0.0\nprocess = 0.0\n")
	conf.WriteString(weightTOML)
	var keys []ipvs.ServiceKey
	var addrs [][]netip.AddrPort
	for s := 1; s <= services; s++ {
		key := ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(s)}), 80)}
		if err := table.AddService(key, "wrr"); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, key)
		fmt.Fprintf(&conf, "[[service]]\naddress = %q\n", key.String())
		var svc []netip.AddrPort
		for i := 1; i <= servers; i++ {
			rs := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(s), byte(i >> 8), byte(i)}), 80)
			if err := table.AddDestination(key, rs, 10); err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(&conf, "[[service.server]]\naddress = %q\nweight = 10\n", rs.String())
			svc = append(svc, rs)
		}
		addrs = append(addrs, svc)
	}
	cfg, err := ParseConfig("bench.toml", []byte(conf.String()))
	if err != nil {
		b.Fatal(err)
	}
	return cfg, keys, addrs
}

// benchMonitor returns a monitor for cfg over table with stub probes, after
// one cycle that adopts every destination.
func benchMonitor(b *testing.B, cfg Config, table ipvs.Table, agents *stubAgents) *Monitor {
	b.Helper()
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
	return m
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
// agents and probes, observe, decide, apply) at 100, 1,000 and 10,000
// destinations: steady (nothing written) and all-writing (every weight
// written every cycle, asserted). The 1,000 case shows what a destination
// costs when the cycle's records fit in the caches. docs/developer/scale.md
// has the figures.
func BenchmarkCycle(b *testing.B) {
	for _, size := range []struct {
		services, servers int
		steady            bool
	}{{10, 10, true}, {10, 100, true}, {100, 100, true}, {100, 100, false}} {
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
