package ipvs

import (
	"fmt"
	"net/netip"
	"testing"
)

// benchTable is a table of services × servers destinations, all at one
// weight, with the changes that flip every weight between that weight and
// the next one up: every op writes every destination it covers, and its
// compare-and-set fails (b.Fatal) unless the previous op's writes landed.
type benchTable struct {
	tb      Admin
	keys    []ServiceKey
	up      [][]WeightChange // per service: weight → weight+1
	down    [][]WeightChange // per service: weight+1 → weight
	raised  []bool           // per service: whether the table holds weight+1
	servers int
}

// newBenchTable adds 192.0.2.S:80/tcp (wrr) for S = 1..services, each with
// 10.S.I>>8.I:80 for I = 1..servers, all at weight.
func newBenchTable(b *testing.B, tb Admin, services, servers, weight int) *benchTable {
	b.Helper()
	bt := &benchTable{tb: tb, raised: make([]bool, services), servers: servers}
	for s := 1; s <= services; s++ {
		key := ServiceKey{Protocol: TCP, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(s)}), 80)}
		if err := tb.AddService(key, "wrr"); err != nil {
			b.Fatal(err)
		}
		up := make([]WeightChange, 0, servers)
		down := make([]WeightChange, 0, servers)
		for i := 1; i <= servers; i++ {
			dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(s), byte(i >> 8), byte(i)}), 80)
			if err := tb.AddDestination(key, dst, weight); err != nil {
				b.Fatal(err)
			}
			up = append(up, WeightChange{Dest: dst, From: weight, To: weight + 1})
			down = append(down, WeightChange{Dest: dst, From: weight + 1, To: weight})
		}
		bt.keys = append(bt.keys, key)
		bt.up = append(bt.up, up)
		bt.down = append(bt.down, down)
	}
	return bt
}

// next returns service s's changes for the next op and records the flip.
func (bt *benchTable) next(s int) []WeightChange {
	c := bt.up[s]
	if bt.raised[s] {
		c = bt.down[s]
	}
	bt.raised[s] = !bt.raised[s]
	return c
}

// op is one benchmarked operation on the table's first services services.
type op func(b *testing.B, bt *benchTable, services int)

// writeBatches writes every destination with one SetWeights per service.
func writeBatches(b *testing.B, bt *benchTable, services int) {
	for s, key := range bt.keys[:services] {
		for i, err := range bt.tb.SetWeights(key, bt.next(s)) {
			if err != nil {
				b.Fatalf("SetWeights %v, change %d: %v", key, i, err)
			}
		}
	}
}

// writeEach writes every destination with one SetWeight per destination.
func writeEach(b *testing.B, bt *benchTable, services int) {
	for s, key := range bt.keys[:services] {
		for _, c := range bt.next(s) {
			if err := bt.tb.SetWeight(key, c.Dest, c.From, c.To); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// readAll lists every service's destinations.
func readAll(b *testing.B, bt *benchTable, services int) {
	for _, key := range bt.keys[:services] {
		ds, err := bt.tb.Destinations(key)
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) != bt.servers {
			b.Fatalf("%v lists %d destinations, want %d", key, len(ds), bt.servers)
		}
	}
}

// benchOp runs fn on the table's first services services as a
// sub-benchmark named dests=N/name, and reports the time per destination.
func benchOp(b *testing.B, bt *benchTable, services int, name string, fn op) {
	dests := services * bt.servers
	b.Run(fmt.Sprintf("dests=%d/%s", dests, name), func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			fn(b, bt, services)
			n++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*dests), "ns/dest")
	})
}

// BenchmarkMemSetWeights writes every weight of 100 and of 100 × 100
// destinations in the in-memory table: one SetWeights per service against
// one SetWeight per destination.
func BenchmarkMemSetWeights(b *testing.B) {
	for _, services := range []int{1, 100} {
		bt := newBenchTable(b, NewMem(), services, 100, 10)
		benchOp(b, bt, services, "SetWeights", writeBatches)
		benchOp(b, bt, services, "SetWeight", writeEach)
	}
}
