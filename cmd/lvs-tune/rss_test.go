package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/tune"
)

// writeBigHistory records 10 servers of one service over cycles cycles,
// with every figure regress and search -history read (about 1 KB a
// record), in files of at most 64 MiB.
func writeBigHistory(tb testing.TB, dir string, cycles int) int64 {
	tb.Helper()
	w, err := history.Open(dir, history.Limits{MaxSize: 64 << 20, Files: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	truth := tune.Vector{0.2, 0.5, 0, 0, 0.3, 0}
	const n = 10
	prev := make([]float64, n)
	batch := make([]history.Record, n)
	for c := 0; c < cycles; c++ {
		for i := range batch {
			weight := 5 + i%3*5
			in := history.Inputs{Input: 0.2 + rng.Float64(), CPU: 0.2 + rng.Float64(), Memory: 0.2 + rng.Float64(),
				Disk: 0.2 + rng.Float64(), Response: 0.2 + rng.Float64(), Process: 0.2 + rng.Float64()}
			cpu := 0.3 + 0.4*rng.Float64()
			conns, load, probe := int64(400+rng.IntN(200)), 0.5, 0.01
			batch[i] = history.Record{V: history.SchemaVersion, Time: t0.Add(time.Duration(c) * 5 * time.Second),
				Service: "192.0.2.10:80/tcp", Server: fmt.Sprintf("198.51.100.%d:80", 10+i), State: "managed",
				Configured: 10, DefaultWeight: 10, WeightBefore: weight, WeightTo: weight, WeightAfter: weight,
				Counter: uint32(c * 500), NewConns: &conns, ActiveConns: int(math.Round(prev[i] * float64(weight))),
				ProbeSeconds: &probe, Polled: true, AgentSeconds: 0.002, Inputs: &in, Load: &load, Ramp: 1,
				Agent: &history.Agent{Source: "host", Time: t0, CPU: cpu, Memory: 0.4, Disk: 0.1, Processes: 0.2, CPUUsed: cpu, CPUSpan: 5,
					Raw: history.AgentRaw{WindowSeconds: 5, CPUs: 4, CPUBusy: cpu, MemTotalBytes: 8 << 30, MemAvailableBytes: 5 << 30,
						DiskIOBusy: 0.1, DiskIODevice: "sda", RunnableTasks: 3, Load1: 1.2, Load5: 1.1, Load15: 1}},
				Capacity: &history.Capacity{Weight: weight, CPU: cpu, Busy: cpu, Bottleneck: "cpu", Estimate: 1000, Error: 0.1}}
			x := tune.Vector{in.Input, in.CPU, in.Memory, in.Disk, in.Response, in.Process}
			var l float64
			for j := range x {
				l += truth[j] * x[j]
			}
			prev[i] = 1000 * (0.2 + l) * (1 + 0.05*rng.NormFloat64())
		}
		if err := w.Write(batch); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	files, err := history.Files(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var size int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			tb.Fatal(err)
		}
		size += fi.Size()
	}
	return size
}

// keptExit reports whether err is the exit status of a verdict to keep.
func keptExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == exitKeep
}

// BenchmarkPeakRSS runs the lvs-tune binary on histories of 16, 64 and
// 256 MiB (1×, 4×, 16×: 1,600 to 25,600 cycles of 10 servers) and reports
// its peak resident set size for regress and for search -history -n, with
// the default -max-cycles and with 1,600:
//
//	go test -run '^$' -bench BenchmarkPeakRSS -benchtime 1x ./cmd/lvs-tune/
//
// The size is GNU time's %M (ru_maxrss of its child): the binary must be
// forked from a small process. Started from this one, it would report at
// least this test's own size: Go starts children with vfork, and Linux
// keeps the parent's high-water mark in the child's across exec.
func BenchmarkPeakRSS(b *testing.B) {
	timeBin, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Skip("no /usr/bin/time (GNU time) to measure the peak RSS with")
	}
	bin := filepath.Join(b.TempDir(), "lvs-tune")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, scale := range []int{1, 4, 16} {
		dir := b.TempDir()
		size := writeBigHistory(b, dir, 1600*scale)
		for _, method := range []struct {
			name string
			args []string
		}{
			{"regress", []string{"regress", "-config", "../../docs/examples/lvs-monitor.toml", "-dir", dir}},
			{"search-history", []string{"search", "-history", dir, "-n"}},
			// The default keeps a day of cycles (17,280), more than the
			// 16× history holds; at the 1× history's 1,600 the bound shows.
			{"search-history-max1600", []string{"search", "-history", dir, "-n", "-max-cycles", "1600"}},
		} {
			b.Run(fmt.Sprintf("history=%dx/%s", scale, method.name), func(b *testing.B) {
				var rss int64
				for b.Loop() {
					report := filepath.Join(b.TempDir(), "rss")
					cmd := exec.Command(timeBin, append([]string{"-f", "%M", "-o", report, bin}, method.args...)...)
					// Exit 3 is a verdict to keep the coefficients, not a failure.
					if out, err := cmd.CombinedOutput(); err != nil && !keptExit(err) {
						b.Fatalf("%v: %v\n%s", method.args, err, out)
					}
					text, err := os.ReadFile(report)
					if err != nil {
						b.Fatal(err)
					}
					kib, err := strconv.ParseInt(strings.TrimSpace(string(text)), 10, 64)
					if err != nil {
						b.Fatalf("GNU time wrote %q: %v", text, err)
					}
					rss = max(rss, kib)
				}
				b.ReportMetric(float64(size)/(1<<20), "history-MiB")
				b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
			})
		}
		os.RemoveAll(dir)
	}
}
