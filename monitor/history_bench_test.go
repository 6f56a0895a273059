package monitor

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"lvs-feedback/history"
)

// BenchmarkHistory measures the history at 100 and 10,000 destinations
// (the steady rig of BenchmarkCycle, all-writing at 10,000):
//   - cycle: a whole cycle with a recorder, flushed after each, so that
//     cpu-ms/op is the cycle's and the recorder's CPU together (compare
//     BenchmarkCycle for the cycle alone);
//   - write: what the recorder's goroutine does per cycle — turn the
//     report into records, encode them, append them to the file —
//     with the bytes each record, and each cycle, takes on disk.
func BenchmarkHistory(b *testing.B) {
	for _, size := range []struct {
		services, servers int
		steady            bool
	}{{10, 10, true}, {100, 100, true}, {100, 100, false}} {
		name := fmt.Sprintf("dests=%d/steady", size.services*size.servers)
		if !size.steady {
			name = fmt.Sprintf("dests=%d/all-writing", size.services*size.servers)
		}
		b.Run("cycle/"+name, func(b *testing.B) {
			m, agents := benchRig(b, size.services, size.servers, size.steady)
			rec, err := OpenRecorder(b.TempDir(), HistoryConfig{Enabled: true, FileMiB: 64, Files: 2}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer rec.Close()
			m.deps.History = rec
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				if !size.steady {
					agents.mu.Lock()
					agents.mirror = !agents.mirror
					agents.mu.Unlock()
				}
				if _, err := m.Cycle(context.Background()); err != nil {
					b.Fatal(err)
				}
				rec.Flush()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
		b.Run("write/"+name, func(b *testing.B) {
			m, _ := benchRig(b, size.services, size.servers, size.steady)
			rep, err := m.Cycle(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			w, err := history.Open(dir, history.Limits{MaxSize: 64 << 20, Files: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			var rb recordBuilder
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := w.Write(rb.records(rep)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var bytes int64
			files, _ := history.Files(dir)
			for _, f := range files {
				if fi, err := os.Stat(f); err == nil {
					bytes += fi.Size()
				}
			}
			// Bytes of the records still on disk (older ones rotated away).
			n := 0
			if _, err := history.Read(dir, history.Filter{}, func(history.Record) { n++ }); err != nil || n == 0 {
				b.Fatalf("read back %d records: %v", n, err)
			}
			b.ReportMetric(float64(bytes)/float64(n), "bytes/record")
			b.ReportMetric(float64(bytes)/float64(n)*float64(len(rep.Dests)), "disk-B/cycle")
		})
	}
}
