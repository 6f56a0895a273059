package agent

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHostSample is one sample of the host source on this machine's
// /proc, as Sampler.Run takes it every interval: read the counters, make
// the report from the previous reading, marshal it. docs/developer/scale.md ("The
// agent") compares the agent's whole cost with node_exporter's. Every
// report is made against one reading taken 50 ms before the loop: /proc's
// CPU counters move in 10 ms ticks, and a window without a tick is an error.
func BenchmarkHostSample(b *testing.B) {
	src, err := NewHostSource(Options{})
	if err != nil {
		b.Fatal(err)
	}
	prev, err := src.Read()
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		cur, err := src.Read()
		if err != nil {
			b.Fatal(err)
		}
		rep, err := cur.Report(prev)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(rep); err != nil {
			b.Fatal(err)
		}
	}
	// CPU rather than wall time: on a shared machine the wall time
	// counts the waits for a CPU too.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// processCPU is the user and system CPU time of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
