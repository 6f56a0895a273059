//go:build linux

package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The kernel tests change IPVS tables, so they run only where asked to: in a
// throw-away VM as root with the ip_vs, ip_vs_rr, ip_vs_wrr and ip_vs_wlc
// modules loaded (make test-kernel). Each test gets a fresh network
// namespace, whose IPVS table starts empty and disappears with it.
const kernelTestEnv = "LVS_KERNEL_TEST"

func requireKernelTests(t testing.TB) {
	t.Helper()
	if os.Getenv(kernelTestEnv) != "1" {
		t.Skipf("set %s=1 to run against the kernel's IPVS (needs root and the ip_vs modules; meant for a VM: make test-kernel)", kernelTestEnv)
	}
}

func TestKernelConformance(t *testing.T) {
	requireKernelTests(t)
	runConformance(t, func(t *testing.T) Admin { return openTestKernel(t) })
}

// TestKernelSetWeightKeepsForwardingAndThresholds checks, by reading the
// kernel through moby/ipvs directly, that SetWeight and SetWeights keep what
// Destination does not show: the forwarding method and the connection
// thresholds.
func TestKernelSetWeightKeepsForwardingAndThresholds(t *testing.T) {
	requireKernelTests(t)
	type attrs struct {
		fwd          uint32
		upper, lower uint32
	}
	cases := map[netip.AddrPort]attrs{
		netip.MustParseAddrPort("10.1.0.1:80"): {mobyipvs.ConnFwdDirectRoute, 1000, 100},
		netip.MustParseAddrPort("10.1.0.2:80"): {mobyipvs.ConnFwdTunnel, 0, 0},
		netip.MustParseAddrPort("10.1.0.3:80"): {mobyipvs.ConnFwdMasq, 50, 0},
	}
	for _, batch := range []bool{false, true} {
		name := "SetWeight"
		if batch {
			name = "SetWeights"
		}
		t.Run(name, func(t *testing.T) {
			k := openTestKernel(t)
			svc := mustKey(t, "192.0.2.10:80/tcp")
			must(t, k.AddService(svc, "wlc"))
			k.mu.Lock()
			for a, c := range cases {
				d := mobyDest(a)
				d.Weight, d.ConnectionFlags, d.UpperThreshold, d.LowerThreshold = 5, c.fwd, c.upper, c.lower
				if err := k.h.NewDestination(mobyService(svc), d); err != nil {
					k.mu.Unlock()
					t.Fatalf("add %v through moby/ipvs: %v", a, err)
				}
			}
			k.mu.Unlock()

			var changes []WeightChange
			for a := range cases {
				changes = append(changes, WeightChange{Dest: a, From: 5, To: 9})
			}
			if batch {
				for _, err := range k.SetWeights(svc, changes) {
					must(t, err)
				}
			} else {
				for _, c := range changes {
					must(t, k.SetWeight(svc, c.Dest, c.From, c.To))
				}
			}

			k.mu.Lock()
			ds, err := k.h.GetDestinations(mobyService(svc))
			k.mu.Unlock()
			must(t, err)
			if len(ds) != len(cases) {
				t.Fatalf("kernel lists %d destinations, want %d", len(ds), len(cases))
			}
			for _, d := range ds {
				a, _ := addrPortFromMoby(d.Address, d.Port)
				want, ok := cases[a]
				if !ok {
					t.Fatalf("unexpected destination %v", a)
				}
				got := attrs{d.ConnectionFlags & mobyipvs.ConnFwdMask, d.UpperThreshold, d.LowerThreshold}
				if got != want || d.Weight != 9 {
					t.Errorf("%v after %s: weight %d, %+v; want weight 9, %+v", a, name, d.Weight, got, want)
				}
			}
		})
	}
}

// TestKernelServiceFlagsAndFamilies checks what the kernel reports back for
// the service kinds (the "hashed" flag is set and is not part of the key).
func TestKernelServiceFlagsAndFamilies(t *testing.T) {
	requireKernelTests(t)
	k := openTestKernel(t)
	for _, s := range []string{"192.0.2.10:80/tcp", "[2001:db8::10]:443/tcp", "fwmark:7", "fwmark:8/inet6"} {
		must(t, k.AddService(mustKey(t, s), "wrr"))
	}
	k.mu.Lock()
	ms, err := k.h.GetServices()
	k.mu.Unlock()
	must(t, err)
	for _, m := range ms {
		key, err := keyFromMoby(m)
		must(t, err)
		t.Logf("kernel service %v: flags %#x, family %d, address %v (%d bytes)", key, m.Flags, m.AddressFamily, m.Address, len(m.Address))
		if m.Flags&0x2 == 0 {
			t.Errorf("%v: kernel flags %#x lack the hashed bit 0x2", key, m.Flags)
		}
		if !key.IsFWMark() && key.Addr.Addr().Is4() && len(m.Address) != 4 {
			t.Errorf("%v: IPv4 address read back with %d bytes", key, len(m.Address))
		}
	}
}

// TestKernelNamespacesAreSeparate checks that a Kernel opened on a namespace
// sees only that namespace's table.
func TestKernelNamespacesAreSeparate(t *testing.T) {
	requireKernelTests(t)
	a, b := openTestKernel(t), openTestKernel(t)
	must(t, a.AddService(mustKey(t, "192.0.2.10:80/tcp"), "wrr"))
	if got := services(t, b); len(got) != 0 {
		t.Errorf("second namespace lists %v", got)
	}
	if got := services(t, a); len(got) != 1 {
		t.Errorf("first namespace lists %v, want one service", got)
	}
}

func TestKernelClosed(t *testing.T) {
	requireKernelTests(t)
	k := openTestKernel(t)
	must(t, k.Close())
	must(t, k.Close())
	if _, err := k.Services(); err == nil {
		t.Error("Services on a closed Kernel succeeded")
	}
}

// TestOpenKernelRefusesWithoutIPVS runs everywhere: without IPVS in the
// kernel (no /proc/net/ip_vs) OpenKernel must refuse instead of returning a
// handle that silently does nothing; with IPVS it must open.
func TestOpenKernelRefusesWithoutIPVS(t *testing.T) {
	_, statErr := os.Stat("/proc/net/ip_vs")
	k, err := OpenKernel("")
	if statErr == nil {
		if os.Geteuid() != 0 {
			t.Skip("this kernel has IPVS, but opening it needs CAP_NET_ADMIN; run as root")
		}
		if err != nil {
			t.Fatalf("kernel has IPVS (/proc/net/ip_vs exists) but OpenKernel failed: %v", err)
		}
		must(t, k.Close())
		return
	}
	if err == nil {
		k.Close()
		t.Fatal("OpenKernel succeeded on a kernel without IPVS")
	}
	if !errors.Is(err, ErrNoIPVS) {
		t.Fatalf("OpenKernel without IPVS: %v; want an error wrapping ErrNoIPVS", err)
	}
	if !strings.Contains(err.Error(), "modprobe ip_vs") {
		t.Errorf("error %q does not tell the operator to modprobe ip_vs", err)
	}
	t.Logf("OpenKernel without IPVS: %v", err)
}

func TestOpenKernelBadNamespace(t *testing.T) {
	if _, err := OpenKernel("/nonexistent/netns"); err == nil {
		t.Fatal("OpenKernel on a missing namespace path succeeded")
	}
}

// openTestKernel opens a Kernel on a new, empty network namespace with lo
// up, and closes both when t ends.
func openTestKernel(t testing.TB) *Kernel {
	t.Helper()
	ns := newTestNamespace(t)
	// IPv4 destinations are refused (EINVAL) until the namespace has
	// routing tables; bringing lo up creates them.
	nh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink handle in the test namespace: %v", err)
	}
	defer nh.Close()
	lo, err := nh.LinkByName("lo")
	if err != nil {
		t.Fatalf("find lo in the test namespace: %v", err)
	}
	if err := nh.LinkSetUp(lo); err != nil {
		t.Fatalf("bring lo up in the test namespace: %v", err)
	}
	k, err := OpenKernel(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// newTestNamespace creates a network namespace and returns a handle to it
// (closed when t ends; the namespace goes with its last reference). The
// namespace is created on a locked OS thread that is moved back to the
// original namespace before it is released; if that fails the goroutine
// ends still locked, and the Go runtime discards the thread.
func newTestNamespace(t testing.TB) netns.NsHandle {
	t.Helper()
	type result struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("get current namespace: %w", err)}
			return
		}
		defer orig.Close()
		ns, err := netns.New() // unshare(CLONE_NEWNET) on this thread
		if err != nil {
			ch <- result{err: fmt.Errorf("create network namespace: %w", err)}
			return
		}
		if err := netns.Set(orig); err != nil {
			ns.Close()
			ch <- result{err: fmt.Errorf("return to the original namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{ns: ns}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.ns.Close() })
	return r.ns
}

// TestKernelErrnoMapping provokes the kernel's errno values through moby/ipvs
// directly and checks how kernelErr maps them.
func TestKernelErrnoMapping(t *testing.T) {
	requireKernelTests(t)
	k := openTestKernel(t)
	svc := mustKey(t, "192.0.2.10:80/tcp")
	gone := mustKey(t, "192.0.2.11:80/tcp")
	must(t, k.AddService(svc, "wrr"))
	must(t, k.AddDestination(svc, netip.MustParseAddrPort("10.1.0.1:80"), 1))
	missing := mobyDest(netip.MustParseAddrPort("10.1.0.2:80"))
	bad := mobyDest(netip.MustParseAddrPort("10.1.0.3:80"))
	bad.Weight = -1

	k.mu.Lock()
	errs := map[string]error{
		"update missing destination": k.h.UpdateDestination(mobyService(svc), missing),
		"update in missing service":  k.h.UpdateDestination(mobyService(gone), missing),
		"get missing service":        serviceExists(k.h, gone),
		"add negative weight":        k.h.NewDestination(mobyService(svc), bad),
	}
	k.mu.Unlock()
	want := map[string]error{
		"update missing destination": ErrNotFound,
		"update in missing service":  ErrNotFound,
		"get missing service":        ErrNotFound,
		"add negative weight":        ErrWeightRange,
	}
	for name, raw := range errs {
		err := kernelErr(name, raw)
		t.Logf("%s: kernel %v -> %v", name, raw, err)
		if !errors.Is(err, want[name]) {
			t.Errorf("%s: %v, want %v", name, err, want[name])
		}
	}

	err := k.AddService(gone, "nosuchsched")
	t.Logf("unknown scheduler: %v", err)
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "scheduler") {
		t.Errorf("AddService with an unknown scheduler: %v, want an error naming the scheduler", err)
	}
}

// TestKernelErrMapping checks the errno mapping without a kernel.
func TestKernelErrMapping(t *testing.T) {
	for _, c := range []struct {
		errno unix.Errno
		want  error
	}{
		{unix.ESRCH, ErrNotFound},
		{unix.ENOENT, ErrNotFound},
		{unix.EEXIST, ErrExist},
		{unix.ERANGE, ErrWeightRange},
		{unix.EPERM, os.ErrPermission},
	} {
		err := kernelErr("op", c.errno)
		if !errors.Is(err, c.want) || !errors.Is(err, c.errno) {
			t.Errorf("kernelErr(%v) = %v; want it to wrap %v and the errno", c.errno, err, c.want)
		}
		if !strings.HasPrefix(err.Error(), "op: ") {
			t.Errorf("kernelErr(%v) = %q lacks the operation", c.errno, err)
		}
	}
	if err := kernelErr("op", unix.EPERM); !strings.Contains(err.Error(), "CAP_NET_ADMIN") {
		t.Errorf("EPERM error %q does not mention CAP_NET_ADMIN", err)
	}
	if err := kernelErr("op", unix.EINVAL); errors.Is(err, ErrNotFound) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("kernelErr(EINVAL) = %v", err)
	}
}
