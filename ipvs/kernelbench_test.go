//go:build linux

package ipvs

import "testing"

// BenchmarkKernel measures the kernel work of a monitor cycle at 10,000
// destinations (100 services × 100 servers, wrr, weight 10) in a fresh
// network namespace: read lists every service's destinations; SetWeights
// writes every weight with one call per service. SetWeight, one call per
// destination that dumps its service each time (how every write was made
// before SetWeights), runs on one service of the table only (100 writes):
// each of its dumps covers one service, so the cost per destination does not
// depend on how many services there are, and all 10,000 take minutes under
// TCG. Needs LVS_KERNEL_TEST=1 (the VM: make bench-kernel).
func BenchmarkKernel(b *testing.B) {
	requireKernelTests(b)
	bt := newBenchTable(b, openTestKernel(b), 100, 100, 10)
	benchOp(b, bt, 100, "read", readAll)
	benchOp(b, bt, 100, "SetWeights", writeBatches)
	benchOp(b, bt, 1, "SetWeights", writeBatches)
	benchOp(b, bt, 1, "SetWeight", writeEach)
}
