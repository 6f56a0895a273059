package monitor

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCycleStages times the steady cycle's stages one at a time at
// 10,000 destinations (the rig of BenchmarkCycle): reading the table and
// reconciling ownership, the gather (stub agents and probes), and policy's
// decisions. Timed alone a stage varies far less on a shared machine than
// the whole cycle does, so a change of a few per cent to one of them shows
// in a few interleaved runs. docs/developer/scale.md has the figures.
func BenchmarkCycleStages(b *testing.B) {
	ctx := context.Background()
	m, _ := benchRig(b, 100, 100, true)
	_, rows := m.readTable()
	m.reconcile(rows)
	m.gather(ctx, rows)
	m.observe(rows)
	for _, stage := range []struct {
		name string
		run  func()
	}{
		{"read", func() { _, rows = m.readTable(); m.reconcile(rows) }},
		{"gather", func() { m.gather(ctx, rows) }},
		{"decide", func() { m.decide(rows) }},
	} {
		b.Run(stage.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for range b.N {
				stage.run()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}
