//go:build linux

package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ipvsadmIn runs ipvsadm in k's network namespace (through nsenter, which
// the test VM's busybox provides) and returns its output.
func ipvsadmIn(t *testing.T, k *Kernel, args ...string) string {
	t.Helper()
	nsenter, err := exec.LookPath("nsenter")
	pre := []string{}
	if err != nil {
		if nsenter, err = exec.LookPath("busybox"); err != nil {
			t.Fatal("neither nsenter nor busybox to enter the test namespace")
		}
		pre = []string{"nsenter"}
	}
	argv := append(append(pre, "--net="+k.netns, "ipvsadm"), args...)
	out, err := exec.Command(nsenter, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("ipvsadm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKernelSetWeightsKeepsTunnelSettings sets tunnel destinations up with
// ipvsadm (GUE to port 6080 with checksums, GRE without), writes their
// weights with SetWeights and SetWeight, and reads them back with ipvsadm:
// the tunnel type, port and flags must be as they were. IPVS_CMD_SET_DEST
// resets what a write leaves out, and moby/ipvs's write leaves them out.
func TestKernelSetWeightsKeepsTunnelSettings(t *testing.T) {
	requireKernelTests(t)
	k := openTestKernel(t)
	ipvsadmIn(t, k, "-A", "-t", "192.0.2.10:80", "-s", "wrr")
	ipvsadmIn(t, k, "-a", "-t", "192.0.2.10:80", "-r", "10.1.0.1:80", "-i", "--tun-type", "gue", "--tun-port", "6080", "--tun-csum", "-w", "5")
	ipvsadmIn(t, k, "-a", "-t", "192.0.2.10:80", "-r", "10.1.0.2:80", "-i", "--tun-type", "gre", "--tun-nocsum", "-w", "5")
	before := ipvsadmIn(t, k, "-L", "-n", "--tun-info")
	svc := mustKey(t, "192.0.2.10:80/tcp")
	for _, err := range k.SetWeights(svc, []WeightChange{
		{Dest: netip.MustParseAddrPort("10.1.0.1:80"), From: 5, To: 9},
		{Dest: netip.MustParseAddrPort("10.1.0.2:80"), From: 5, To: 9},
	}) {
		must(t, err)
	}
	must(t, k.SetWeight(svc, netip.MustParseAddrPort("10.1.0.2:80"), 9, 8))
	after := ipvsadmIn(t, k, "-L", "-n", "--tun-info")
	t.Logf("before:\n%s\nafter:\n%s", before, after)
	// ipvsadm prints one line per destination; only the weight may differ.
	want := strings.NewReplacer(" 5 ", " 9 ").Replace(before)
	wantLines, gotLines := strings.Split(want, "\n"), strings.Split(after, "\n")
	if len(wantLines) != len(gotLines) {
		t.Fatalf("ipvsadm lists %d lines after the writes, %d before", len(gotLines), len(wantLines))
	}
	for i := range wantLines {
		w := wantLines[i]
		if strings.Contains(w, "10.1.0.2:80") {
			w = strings.Replace(w, " 9 ", " 8 ", 1)
		}
		if strings.Join(strings.Fields(w), " ") != strings.Join(strings.Fields(gotLines[i]), " ") {
			t.Errorf("after the writes:\n  %s\nwant\n  %s", gotLines[i], w)
		}
	}
	if !strings.Contains(before, "6080") || !strings.Contains(strings.ToLower(before), "gue") {
		t.Errorf("ipvsadm's listing does not show the GUE tunnel it was given:\n%s", before)
	}
}

// TestKernelSetWeightsBatches writes 150 weights of one service in one
// call (three sendmsg batches of at most 64) while two of the destinations
// are gone from the kernel between the dump and the writes (the writes are
// handed to setDests directly, as SetWeights would after its dump): those
// two, one in the first batch and one in the last, fail with the kernel's
// ENOENT, and every other weight is written.
func TestKernelSetWeightsBatches(t *testing.T) {
	requireKernelTests(t)
	k := openTestKernel(t)
	svc := mustKey(t, "192.0.2.10:80/tcp")
	must(t, k.AddService(svc, "wlc"))
	const n = 150
	addr := func(i int) netip.AddrPort {
		return netip.MustParseAddrPort(fmt.Sprintf("10.2.%d.%d:80", i/200, 1+i%200))
	}
	for i := range n {
		must(t, k.AddDestination(svc, addr(i), 1))
	}
	k.mu.Lock()
	dumped, err := k.dumpDests(svc, nil)
	k.mu.Unlock()
	must(t, err)
	if len(dumped) != n {
		t.Fatalf("dumped %d destinations, want %d", len(dumped), n)
	}
	gone := map[netip.AddrPort]bool{addr(10): true, addr(140): true}
	for a := range gone {
		must(t, k.RemoveDestination(svc, a))
	}
	for i := range dumped {
		dumped[i].Weight = 2 + i
	}
	k.mu.Lock()
	errs := k.setDests(svc, dumped)
	k.mu.Unlock()
	failed := 0
	for i, d := range dumped {
		switch {
		case gone[d.Addr]:
			failed++
			if !errors.Is(errs[i], unix.ENOENT) {
				t.Errorf("write %d to removed %v: %v, want ENOENT", i, d.Addr, errs[i])
			}
		case errs[i] != nil:
			t.Errorf("write %d to %v: %v", i, d.Addr, errs[i])
		}
	}
	if failed != 2 {
		t.Errorf("%d writes to removed destinations, want 2", failed)
	}
	ds, err := k.Destinations(svc)
	must(t, err)
	want := map[netip.AddrPort]int{}
	for i, d := range dumped {
		if !gone[d.Addr] {
			want[d.Addr] = 2 + i
		}
	}
	if len(ds) != len(want) {
		t.Fatalf("kernel lists %d destinations, want %d", len(ds), len(want))
	}
	for _, d := range ds {
		if d.Weight != want[d.Addr] {
			t.Errorf("%v: weight %d, want %d", d.Addr, d.Weight, want[d.Addr])
		}
	}
}
