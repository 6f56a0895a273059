//go:build linux

package ipvs

import (
	"net/netip"
	"testing"

	mobyipvs "github.com/moby/ipvs"
)

// BenchmarkKernel measures the kernel work of a monitor cycle at 10,000
// destinations (100 services × 100 servers, wrr, weight 10) in a fresh
// network namespace: read lists every service's destinations; SetWeights
// writes every weight with one call per service. SetWeight, one call per
// destination that dumps its service each time, runs on one service of the
// table only (100 writes): each of its dumps covers one service, so the cost
// per destination does not depend on how many services there are, and all
// 10,000 take minutes under TCG. read-moby and SetWeights-moby do the same
// as read and SetWeights through github.com/moby/ipvs (a dump of every
// attribute into objects, one acknowledged write per destination), as
// Kernel did before it read and wrote on its own socket. Needs
// LVS_KERNEL_TEST=1 (the VM: make bench-kernel).
func BenchmarkKernel(b *testing.B) {
	requireKernelTests(b)
	k := openTestKernel(b)
	bt := newBenchTable(b, k, 100, 100, 10)
	benchOp(b, bt, 100, "read", readAll)
	benchOp(b, bt, 100, "read-moby", func(b *testing.B, bt *benchTable, services int) { readAllMoby(b, k, bt, services) })
	benchOp(b, bt, 100, "SetWeights", writeBatches)
	benchOp(b, bt, 100, "SetWeights-moby", func(b *testing.B, bt *benchTable, services int) { writeBatchesMoby(b, k, bt, services) })
	benchOp(b, bt, 1, "SetWeights", writeBatches)
	benchOp(b, bt, 1, "SetWeight", writeEach)
}

// readAllMoby lists every service's destinations through moby/ipvs.
func readAllMoby(b *testing.B, k *Kernel, bt *benchTable, services int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range bt.keys[:services] {
		ds, err := k.h.GetDestinations(mobyService(key))
		if err != nil {
			b.Fatal(err)
		}
		if len(ds) != bt.servers {
			b.Fatalf("%v lists %d destinations, want %d", key, len(ds), bt.servers)
		}
	}
}

// writeBatchesMoby writes every destination as SetWeights did through
// moby/ipvs: per service one dump, a compare with it, then one
// UpdateDestination per destination, each waiting for its acknowledgement.
func writeBatchesMoby(b *testing.B, k *Kernel, bt *benchTable, services int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for s, key := range bt.keys[:services] {
		ms := mobyService(key)
		ds, err := k.h.GetDestinations(ms)
		if err != nil {
			b.Fatal(err)
		}
		byAddr := make(map[netip.AddrPort]*mobyipvs.Destination, len(ds))
		for _, d := range ds {
			a, _ := addrPortFromMoby(d.Address, d.Port)
			byAddr[a] = d
		}
		for _, c := range bt.next(s) {
			d := byAddr[c.Dest]
			if d == nil || d.Weight != c.From {
				b.Fatalf("%v in %v: %+v, want weight %d", c.Dest, key, d, c.From)
			}
			upd := *d
			upd.Weight = c.To
			if err := k.h.UpdateDestination(ms, &upd); err != nil {
				b.Fatal(err)
			}
		}
	}
}
