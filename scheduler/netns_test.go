package scheduler

// Tests with real network namespaces, veth pairs and netlink. They need
// root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and are skipped otherwise. Every
// address is configured only inside namespaces the test creates; nothing
// touches the host's namespace.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inThread runs fn on a fresh OS thread that is discarded afterwards, so
// that switching its network namespace cannot leak into other goroutines.
func inThread(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		ch <- fn()
	}()
	return <-ch
}

// inNS runs fn inside ns (sockets it opens belong to ns).
func inNS(ns netns.NsHandle, fn func() error) error {
	return inThread(func() error {
		if err := netns.Set(ns); err != nil {
			return err
		}
		return fn()
	})
}

// newNS creates an anonymous network namespace, closed (and so destroyed
// once its sockets are gone) when the test ends.
func newNS(t *testing.T) (netns.NsHandle, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	var ns netns.NsHandle
	err := inThread(func() error {
		var err error
		ns, err = netns.New()
		return err
	})
	if err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); ns.Close() })
	return ns, h
}

func mustPrefix(s string) *net.IPNet {
	p := netip.MustParsePrefix(s)
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// addDummy creates an up interface named name to carry addresses: a dummy
// interface, or a port-less bridge where the kernel has no dummy driver
// (as on this project's test machine).
func addDummy(t *testing.T, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	if err := h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
			t.Fatalf("create %s (neither dummy nor bridge): %v", name, err)
		}
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	return l
}

func addAddr(t *testing.T, h *netlink.Handle, l netlink.Link, prefix string) {
	t.Helper()
	a := &netlink.Addr{IPNet: mustPrefix(prefix)}
	if netip.MustParsePrefix(prefix).Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := h.AddrAdd(l, a); err != nil {
		t.Fatalf("add %s: %v", prefix, err)
	}
}

func delAddr(t *testing.T, h *netlink.Handle, l netlink.Link, prefix string) {
	t.Helper()
	if err := h.AddrDel(l, &netlink.Addr{IPNet: mustPrefix(prefix)}); err != nil {
		t.Fatalf("delete %s: %v", prefix, err)
	}
}

// waitRole waits for the watcher to announce want, returning how long it
// took.
// waitPresent waits until the watcher sees n of its VIPs on the host: the
// netlink events are in, whatever the machine's load (a generous bound
// guards against a hang only).
func waitPresent(t *testing.T, w *VIPWatcher, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(w.Present()) != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("present %v after 30 s, want %d VIPs", w.Present(), n)
		}
	}
}

func waitRole(t *testing.T, w *VIPWatcher, want Role) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(5 * time.Second)
	for {
		if w.Role() == want {
			// Drain the announcement, if any.
			select {
			case <-w.Changes():
			default:
			}
			return time.Since(start)
		}
		select {
		case <-w.Changes():
		case <-timeout:
			t.Fatalf("role still %v after 5 s, want %v", w.Role(), want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestVIPWatcherInNamespace(t *testing.T) {
	leakCheck(t)
	ns, h := newNS(t)
	dummy := addDummy(t, h, "vip0")
	other := addDummy(t, h, "vip1")
	addAddr(t, h, dummy, "10.232.0.1/24") // not a VIP
	var logs logBuf
	w, err := NewVIPWatcher(VIPWatcherConfig{
		VIPs:   []netip.Addr{netip.MustParseAddr("10.232.0.10"), netip.MustParseAddr("2001:db8:232::10")},
		NetNS:  &ns,
		Logger: logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-w.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("watcher never ready")
	}
	if w.Role() != Standby {
		t.Fatalf("initial role %v", w.Role())
	}
	addAddr(t, h, dummy, "10.232.0.10/32")
	t.Logf("VIP added: active after %v", waitRole(t, w, Active))
	addAddr(t, h, other, "2001:db8:232::10/128")
	waitPresent(t, w, 2) // the watcher has seen the second VIP
	delAddr(t, h, dummy, "10.232.0.10/32")
	waitPresent(t, w, 1) // and the first one go
	if w.Role() != Active {
		t.Error("one VIP is still here, but the role went standby")
	}
	if p := w.Present(); len(p) != 1 || p[0] != netip.MustParseAddr("2001:db8:232::10") {
		t.Errorf("present %v", p)
	}
	delAddr(t, h, other, "2001:db8:232::10/128")
	t.Logf("last VIP removed: standby after %v", waitRole(t, w, Standby))
	// The same VIP on two interfaces: the role holds until both are gone.
	addAddr(t, h, dummy, "10.232.0.10/32")
	addAddr(t, h, other, "10.232.0.10/32")
	waitRole(t, w, Active)
	delAddr(t, h, dummy, "10.232.0.10/32")
	time.Sleep(100 * time.Millisecond)
	if w.Role() != Active {
		t.Error("the VIP is still on vip1, but the role went standby")
	}
	// The interface going away removes its addresses.
	if err := h.LinkDel(other); err != nil {
		t.Fatal(err)
	}
	waitRole(t, w, Standby)
}

// TestVIPWatcherResubscribes: the subscription ends (as on any netlink
// receive error); while there is none, the VIP is removed. Only a fresh
// listing can see that: the watcher re-subscribes and re-lists.
func TestVIPWatcherResubscribes(t *testing.T) {
	leakCheck(t)
	ns, h := newNS(t)
	dummy := addDummy(t, h, "vip0")
	addAddr(t, h, dummy, "10.232.0.10/32")
	w, err := NewVIPWatcher(VIPWatcherConfig{VIPs: []netip.Addr{netip.MustParseAddr("10.232.0.10")}, NetNS: &ns})
	if err != nil {
		t.Fatal(err)
	}
	var gaps sync.WaitGroup
	gaps.Add(1)
	var once sync.Once
	w.gapHook = func() {
		once.Do(func() {
			delAddr(t, h, dummy, "10.232.0.10/32")
			gaps.Done()
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-w.Ready()
	waitRole(t, w, Active)
	w.kick()
	gaps.Wait()
	t.Logf("VIP removed between subscriptions: standby after %v", waitRole(t, w, Standby))
	// And the new subscription works.
	addAddr(t, h, dummy, "10.232.0.10/32")
	waitRole(t, w, Active)
}

// vethPair creates a veth pair between two namespaces with an IPv4 address
// on each end, both up.
func vethPair(t *testing.T, h1, h2 *netlink.Handle, ns2 netns.NsHandle, a1, a2 string) (netlink.Link, netlink.Link) {
	t.Helper()
	err := h1.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "sync0"}, PeerName: "sync1", PeerNamespace: netlink.NsFd(ns2)})
	if err != nil {
		t.Fatal(err)
	}
	l1, err := h1.LinkByName("sync0")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := h2.LinkByName("sync1")
	if err != nil {
		t.Fatal(err)
	}
	addAddr(t, h1, l1, a1)
	addAddr(t, h2, l2, a2)
	for _, x := range []struct {
		h *netlink.Handle
		l netlink.Link
	}{{h1, l1}, {h2, l2}} {
		if err := x.h.LinkSetUp(x.l); err != nil {
			t.Fatal(err)
		}
	}
	return l1, l2
}

func listenIn(t *testing.T, ns netns.NsHandle, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	err := inNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func dialFrom(ns netns.NsHandle) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNS(ns, func() error {
			var d net.Dialer
			var err error
			c, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
}

// followVIP feeds a VIP watcher's role to a director.
func followVIP(t *testing.T, d *liveDirector, ns netns.NsHandle, vip string) {
	t.Helper()
	w, err := NewVIPWatcher(VIPWatcherConfig{VIPs: []netip.Addr{netip.MustParseAddr(vip)}, NetNS: &ns})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	wg.Go(func() {
		select {
		case <-w.Ready():
		case <-ctx.Done():
			return
		}
		d.setRole(w.Role())
		for {
			select {
			case <-ctx.Done():
				return
			case r := <-w.Changes():
				d.setRole(r)
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestPairInNamespaces: two directors, each in its own network namespace
// with an in-memory table, a VIP watcher on its own dummy interface, and a
// sync listener on its end of a veth pair. The VIP makes one active; a
// partition (veth down) makes each carry on alone and report the peer
// unreachable; healing brings the standby back in step; killing the active
// and moving the VIP makes the standby take over from the replicated
// weights.
func TestPairInNamespaces(t *testing.T) {
	leakCheck(t)
	ns1, h1 := newNS(t)
	ns2, h2 := newNS(t)
	_, l2 := vethPair(t, h1, h2, ns2, "10.231.0.1/24", "10.231.0.2/24")
	vip1, vip2 := addDummy(t, h1, "vip"), addDummy(t, h2, "vip")
	const vip = "10.231.100.1"

	k := testKey(t, 9)
	const interval = 200 * time.Millisecond
	now := time.Now()
	a := newLiveDirector(t, newSimDirector(t, "dir-a", 1, +1, now), k, listenIn(t, ns1, "10.231.0.1:7946"))
	b := newLiveDirector(t, newSimDirector(t, "dir-b", 1, +1, now), k, listenIn(t, ns2, "10.231.0.2:7946"))
	a.start(t, k, []string{"10.231.0.2:7946"}, interval, dialFrom(ns1))
	b.start(t, k, []string{"10.231.0.1:7946"}, interval, dialFrom(ns2))
	followVIP(t, a, ns1, vip)
	followVIP(t, b, ns2, vip)

	// keepalived makes dir-a master.
	addAddr(t, h1, vip1, vip+"/32")
	waitFor(t, 5*time.Second, "dir-a writes", a.writer)
	waitFor(t, 5*time.Second, "dir-b mirrors dir-a", func() bool {
		return !b.writer() && mapsEqual(a.snapshotWeights(), b.snapshotWeights()) && a.snapshotWeights()[simKeys[0]] > 12
	})

	// Partition.
	if err := h2.LinkSetDown(l2); err != nil {
		t.Fatal(err)
	}
	const unreachable = 3 * interval
	took := waitFor(t, 5*time.Second, "both report the peer unreachable", func() bool {
		n := time.Now()
		sa, sb := a.push.Status()[0], b.push.Status()[0]
		return sa.Unreachable(n, unreachable) && sb.Unreachable(n, unreachable) && sa.LastError != "" && sb.LastError != ""
	})
	t.Logf("partition: both directors report the peer unreachable after %v (threshold %v); dir-a: %q; dir-b: %q",
		took, unreachable, a.push.Status()[0].LastError, b.push.Status()[0].LastError)
	w1 := a.snapshotWeights()[simKeys[0]]
	time.Sleep(3 * interval)
	if !a.writer() || a.snapshotWeights()[simKeys[0]] <= w1 {
		t.Error("dir-a stopped writing during the partition")
	}
	if b.writer() {
		t.Error("dir-b writes without the VIP")
	}

	// Heal.
	if err := h2.LinkSetUp(l2); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, 10*time.Second, "recovery", func() bool {
		n := time.Now()
		return !a.push.Status()[0].Unreachable(n, unreachable) && !b.push.Status()[0].Unreachable(n, unreachable) &&
			mapsEqual(a.snapshotWeights(), b.snapshotWeights())
	})
	t.Logf("healed: in step again after %v", took)

	// Kill the active mid-run; keepalived moves the VIP to dir-b.
	a.stop()
	last := a.weights()
	delAddr(t, h1, vip1, vip+"/32")
	waitFor(t, 2*time.Second, "dir-b holds dir-a's last state", func() bool { return mapsEqual(b.snapshotWeights(), last) })
	t0 := time.Now()
	addAddr(t, h2, vip2, vip+"/32")
	waitFor(t, 5*time.Second, "dir-b writes", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.node.Writer() && b.ownWrites > 0
	})
	takeover, diff := b.takeoverReport(last, t0)
	t.Logf("failover: dir-b writing %v after the VIP was added (interval %v); weight difference between the tables at takeover: %d", takeover, interval, diff)
	// The target is one interval; the figure is logged above. The test
	// asserts behaviour with room for a slow, shared machine: the standby
	// writes promptly (well under the 2 s a takeover must never take) and
	// from the replicated weights.
	if takeover > 2*time.Second || diff != 0 {
		t.Errorf("takeover took %v (target: one interval, %v), weight difference %d (want 0)", takeover, interval, diff)
	}
	st := b.node.Status(time.Now())
	if st.Epoch <= a.node.Epoch() {
		t.Errorf("new epoch %d not above the old active's %d", st.Epoch, a.node.Epoch())
	}
}

// TestListenerSourceFloodIPv6InNamespace: the source flood over IPv6, in
// a network namespace the test creates, where an IPv6 source counts by
// its /64. Ten /64s (2001:db8:1:1::/64 to 2001:db8:1:a::/64), three
// addresses in each, two connections per address, reconnect in a loop:
// the listener never holds more than 4 of a /64, nor sees more than ten
// sources among them. The peer pushes 30 times from 2001:db8:2::1, each on
// a new connection (at least 29 accepted), then ten peers push once each
// from a /64 never seen before (all accepted).
func TestListenerSourceFloodIPv6InNamespace(t *testing.T) {
	leakCheck(t)
	ns, h := newNS(t)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	dev := addDummy(t, h, "flood0")
	addAddr(t, h, dev, "2001:db8:ffff::1/128")
	addAddr(t, h, dev, "2001:db8:2::1/128")
	var sources []netip.Addr
	for n := 1; n <= 10; n++ {
		for host := 1; host <= 3; host++ {
			a := netip.MustParseAddr(fmt.Sprintf("2001:db8:1:%x::%x", n, host))
			addAddr(t, h, dev, a.String()+"/128")
			sources = append(sources, a)
		}
	}
	for n := 1; n <= 10; n++ {
		addAddr(t, h, dev, fmt.Sprintf("2001:db8:3:%x::1/128", n))
	}
	enter := func() error { return netns.Set(ns) }

	k := testKey(t, 7)
	l := startListener(t, ListenerConfig{Self: "b", Key: k, Listener: listenIn(t, ns, "[2001:db8:ffff::1]:7946"), Senders: []string{"a"}}, func(Message) {})
	f := startSourceFlood(t, l, k, sources, 2, enter)
	// The sources the listener counts: /64s, at most 4 connections each.
	l.mu.Lock()
	nsrc, wrong := 0, []string{}
	for src, q := range l.pending[poolOthers].bySrc {
		nsrc++
		if src.Bits() != 64 || len(q) > DefaultMaxUnauthenticatedPerSource {
			wrong = append(wrong, fmt.Sprintf("%v: %d", src, len(q)))
		}
	}
	l.mu.Unlock()
	if nsrc > 10 || len(wrong) > 0 {
		t.Errorf("%d sources held (want at most the ten /64s); not a /64 or over 4 connections: %v", nsrc, wrong)
	}

	peer := netip.MustParseAddr("2001:db8:2::1")
	ok, full, _ := f.push(30, func(int) netip.Addr { return peer })
	t.Logf("the peer from %v: %d of 30 pushes accepted (%d began with the others' slots full)", peer, ok, full)
	if ok < 29 {
		t.Errorf("the peer from %v: %d of 30 pushes accepted, want at least 29", peer, ok)
	}
	ok, full, _ = f.push(10, func(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("2001:db8:3:%x::1", i+1)) })
	t.Logf("ten peers, each from a new /64: %d of 10 pushes accepted (%d began with the others' slots full)", ok, full)
	if ok < 10 {
		t.Errorf("first contact: %d of 10 pushes accepted, want 10", ok)
	}
	f.end()
	pend, live := f.peaks(maxKnownSources)
	t.Logf("attacker connections: %d (%d dials failed); listener at peak: %d unauthenticated connections, %d connection goroutines (bound %d); %+v",
		f.made.Load(), f.failed.Load(), pend, live, cap(l.slots), l.ConnStats())
}
