package scheduler

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// heapWatch samples the heap until stopped and reports the peak above the
// level at start, and the bytes allocated meanwhile.
type heapWatch struct {
	base, total uint64
	peak        atomic.Uint64
	quit, done  chan struct{}
}

func watchHeap() *heapWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapWatch{base: ms.HeapAlloc, total: ms.TotalAlloc, quit: make(chan struct{}), done: make(chan struct{})}
	h.peak.Store(ms.HeapAlloc)
	go func() {
		defer close(h.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.quit:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > h.peak.Load() {
				h.peak.Store(ms.HeapAlloc)
			}
		}
	}()
	return h
}

// stop returns the peak heap above the start and the bytes allocated since.
func (h *heapWatch) stop() (peak, allocated uint64) {
	close(h.quit)
	<-h.done
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := h.peak.Load()
	if p < h.base {
		p = h.base
	}
	return p - h.base, ms.TotalAlloc - h.total
}

// multiListener accepts on several listeners at once (one listener
// socket cannot be on both 127.0.0.1 and ::1).
type multiListener struct {
	lns    []net.Listener
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

func newMultiListener(lns ...net.Listener) *multiListener {
	m := &multiListener{lns: lns, conns: make(chan net.Conn), closed: make(chan struct{})}
	for _, ln := range lns {
		m.wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				select {
				case m.conns <- c:
				case <-m.closed:
					c.Close()
					return
				}
			}
		})
	}
	return m
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	m.once.Do(func() {
		close(m.closed)
		for _, ln := range m.lns {
			ln.Close()
		}
	})
	m.wg.Wait()
	return nil
}

func (m *multiListener) Addr() net.Addr { return m.lns[0].Addr() }

// flood runs n attackers against addr until stop is closed or each has
// made rounds connections: an idle attacker holds its connection until
// the listener closes it, then opens another; a garbage attacker sends a
// 4 MiB garbage frame on each. It returns a function that waits for them
// and the count of connections made so far.
func flood(addr string, n, rounds int, garbage []byte, stop <-chan struct{}) (wait func(), made *atomic.Int64) {
	var wg sync.WaitGroup
	made = new(atomic.Int64)
	for range n {
		wg.Go(func() {
			for range rounds {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				made.Add(1)
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if garbage != nil {
					c.Write(garbage)
					c.Close()
					continue
				}
				closed := make(chan struct{})
				go func() {
					defer close(closed)
					var b [256]byte
					for {
						if _, err := c.Read(b[:]); err != nil {
							return
						}
					}
				}()
				select {
				case <-stop:
					c.Close()
					<-closed
					return
				case <-closed:
					c.Close()
				}
			}
		})
	}
	return wg.Wait, made
}

// TestListenerUnderFlood: with the default limits, 100 idle connections,
// then 100 connections each sending 4 MiB garbage frames, from 127.0.0.1,
// do not keep the real peer out, and the garbage costs the listener next
// to no memory. The peer connects from ::1 (another source: it gets
// through while the attack goes on), then from 127.0.0.1 (the attackers'
// own address: it gets through as the bounded attack allows). Every
// attacker is on loopback and stops by itself.
func TestListenerUnderFlood(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	ln4, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lns := []net.Listener{ln4}
	peerAddrs := []string{}
	if ln6, err := net.Listen("tcp", "[::1]:0"); err == nil {
		lns = append(lns, ln6)
		peerAddrs = append(peerAddrs, ln6.Addr().String())
	} else {
		t.Logf("no IPv6 loopback (%v): the peer only connects from the attackers' address", err)
	}
	peerAddrs = append(peerAddrs, ln4.Addr().String())
	in := NewInbox()
	l := startListener(t, ListenerConfig{Self: "b", Key: k, Listener: newMultiListener(lns...)}, in.Put)
	attackAddr := ln4.Addr().String()
	garbage := binary.BigEndian.AppendUint32(nil, MaxFrameSize)
	garbage = append(garbage, bytes.Repeat([]byte{0xA5}, MaxFrameSize)...)

	epoch := uint64(0)
	// peerThrough runs a new pusher (a restarted peer) to peerAddr while
	// the attack goes on; it returns whether its frame was delivered, the
	// attempts it took and the attacker connections made meanwhile.
	peerThrough := func(peerAddr string, made *atomic.Int64) (ok bool, took time.Duration, attempts uint64, during int64) {
		epoch++
		p, stop := runPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{peerAddr}, RetryInterval: 200 * time.Millisecond})
		defer stop()
		p.Publish(Message{Epoch: epoch, Writer: true, Snapshot: sampleSnapshot()})
		took, ok = within(60*time.Second, func() bool {
			for _, m := range in.Take() {
				if m.Epoch == epoch {
					return true
				}
			}
			return false
		})
		during = made.Load()
		within(5*time.Second, func() bool { return p.Status()[0].Sent > 0 })
		s := p.Status()[0]
		return ok, took, s.Sent + s.Failed, during
	}

	const n = 100
	var peak, allocated uint64
	for _, peerAddr := range peerAddrs {
		sameSource := peerAddr == attackAddr
		from := "::1"
		if sameSource {
			from = "127.0.0.1, the attackers' address"
		}
		// Idle: each attacker holds a connection, reopening it when the
		// listener closes it, up to 6 times.
		stop := make(chan struct{})
		wait, made := flood(attackAddr, n, 6, nil, stop)
		waitFor(t, 30*time.Second, "100 idle connections", func() bool { return made.Load() >= n })
		ok, took, attempts, during := peerThrough(peerAddr, made)
		close(stop)
		wait()
		t.Logf("peer from %s, 100 idle connections: through %v after %v, %d attempt(s), %d attacker connections by then (%d in all); %+v",
			from, ok, took, attempts, during, made.Load(), l.ConnStats())
		if !ok {
			t.Errorf("peer from %s: not through 100 idle connections after %v (%d attempts)", from, took, attempts)
		}

		// Garbage: each attacker sends a 4 MiB garbage frame on each of up
		// to 10 connections.
		heap := watchHeap()
		stop = make(chan struct{})
		wait, made = flood(attackAddr, n, 10, garbage, stop)
		waitFor(t, 30*time.Second, "the garbage under way", func() bool { return made.Load() >= n })
		ok, took, attempts, during = peerThrough(peerAddr, made)
		close(stop)
		wait()
		p, a := heap.stop()
		peak, allocated = max(peak, p), max(allocated, a)
		t.Logf("peer from %s, 100 connections sending 4 MiB garbage frames: through %v after %v, %d attempt(s), %d attacker connections by then (%d in all); heap peak +%.1f MiB, %.1f MiB allocated meanwhile (attackers included); %+v",
			from, ok, took, attempts, during, made.Load(), float64(p)/(1<<20), float64(a)/(1<<20), l.ConnStats())
		if !ok {
			t.Errorf("peer from %s: not through the garbage after %v (%d attempts)", from, took, attempts)
		}
		if !sameSource && during >= n*10 {
			t.Errorf("peer from %s: through only once the garbage had stopped", from)
		}
	}
	// Generous: the listener reads a few hundred bytes of each; the rest
	// is the attackers' own connections and the race detector.
	if peak > 24<<20 {
		t.Errorf("heap peak +%.1f MiB under garbage frames", float64(peak)/(1<<20))
	}
	if allocated > 64<<20 {
		t.Errorf("%.1f MiB allocated under garbage frames", float64(allocated)/(1<<20))
	}
}

// sourceFlood runs perSource attackers from each of the source addresses
// against addr until stop is closed or each has made rounds connections:
// an attacker holds its connection, silent, until the listener closes it,
// then opens another at once. made counts the connections opened, failed
// the dials that failed. With enter, each attacker runs on an OS thread of
// its own, discarded afterwards, which enter moves (into a network
// namespace) first.
func sourceFlood(addr string, sources []netip.Addr, perSource, rounds int, enter func() error, stop <-chan struct{}) (wait func(), made, failed *atomic.Int64) {
	var wg sync.WaitGroup
	made, failed = new(atomic.Int64), new(atomic.Int64)
	for _, src := range sources {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 10 * time.Second}
		for range perSource {
			wg.Go(func() {
				if enter != nil {
					runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
					if err := enter(); err != nil {
						failed.Add(1)
						return
					}
				}
				var b [256]byte
				for range rounds {
					select {
					case <-stop:
						return
					default:
					}
					c, err := d.Dial("tcp", addr)
					if err != nil {
						failed.Add(1)
						continue
					}
					made.Add(1)
					for {
						c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
						_, err := c.Read(b[:])
						if err == nil {
							continue
						}
						if !isTimeout(err) {
							break // closed by the listener
						}
						select {
						case <-stop:
							c.Close()
							return
						default:
						}
					}
					c.Close()
				}
			})
		}
	}
	return wg.Wait, made, failed
}

// pushOnce runs a new pusher from src (a peer that has just restarted:
// a new connection) and reports whether its one attempt to send a
// message was accepted, and if not why. With enter, it dials from an OS
// thread that enter moves first (see sourceFlood).
func pushOnce(t *testing.T, k *Key, addr string, src netip.Addr, enter func() error, epoch uint64) (bool, string) {
	t.Helper()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
	dial := func(ctx context.Context, a string) (net.Conn, error) {
		if enter == nil {
			return d.DialContext(ctx, "tcp", a)
		}
		var c net.Conn
		err := inThread(func() error {
			if err := enter(); err != nil {
				return err
			}
			var err error
			c, err = d.DialContext(ctx, "tcp", a)
			return err
		})
		return c, err
	}
	p, stop := runPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{addr}, RetryInterval: time.Hour,
		DialTimeout: 20 * time.Second, IOTimeout: 20 * time.Second, Dial: dial})
	defer stop()
	p.Publish(Message{Epoch: epoch, Writer: true, Snapshot: sampleSnapshot()})
	waitFor(t, 60*time.Second, "the push's outcome", func() bool { s := p.Status()[0]; return s.Sent+s.Failed > 0 })
	s := p.Status()[0]
	return s.Sent == 1, s.LastError
}

// sourceFloodRun is a listener under a sourceFlood, with its peers
// pushing.
type sourceFloodRun struct {
	t            *testing.T
	l            *Listener
	k            *Key
	made, failed *atomic.Int64
	stop         chan struct{}
	wait         func()
	enter        func() error
	epoch        uint64
}

// startSourceFlood floods l from the sources, perSource connections each,
// until end is called (or a bound on the connections is reached), and
// waits for the flood to fill the others' unauthenticated slots. enter,
// if not nil, moves the attackers' and the peers' threads (see
// sourceFlood).
func startSourceFlood(t *testing.T, l *Listener, k *Key, sources []netip.Addr, perSource int, enter func() error) *sourceFloodRun {
	t.Helper()
	f := &sourceFloodRun{t: t, l: l, k: k, stop: make(chan struct{}), enter: enter}
	f.wait, f.made, f.failed = sourceFlood(l.Addr().String(), sources, perSource, 50_000, enter, f.stop)
	t.Cleanup(f.end)
	waitFor(t, 60*time.Second, "the flood filling the unauthenticated slots", func() bool { return f.full() })
	return f
}

// full reports whether the slots shared by all but the peers' sources
// are taken.
func (f *sourceFloodRun) full() bool {
	s := f.l.ConnStats()
	return s.Unauthenticated-s.FromPeerSources >= DefaultMaxUnauthenticated
}

// end stops the flood and waits for its goroutines; it is idempotent.
func (f *sourceFloodRun) end() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wait()
}

// push pushes count times, each from the address src(i) on a new
// connection, once the attackers have made 40 more connections. It
// returns how many pushes were accepted, why the others were not, and how
// many began with the others' slots full.
func (f *sourceFloodRun) push(count int, src func(i int) netip.Addr) (ok, full int, why []string) {
	f.t.Helper()
	for i := range count {
		from := f.made.Load()
		waitFor(f.t, 60*time.Second, "40 more attacker connections", func() bool { return f.made.Load() >= from+40 })
		if f.full() {
			full++
		}
		f.epoch++
		if good, e := pushOnce(f.t, f.k, f.l.Addr().String(), src(i), f.enter, f.epoch); good {
			ok++
		} else {
			why = append(why, e)
		}
	}
	if len(why) > 0 {
		f.t.Logf("failures: %s", strings.Join(why[:min(len(why), 3)], "; "))
	}
	return ok, full, why
}

// peaks returns the most unauthenticated connections and connection
// goroutines l held at once, and checks them against its bounds with
// known peers' sources.
func (f *sourceFloodRun) peaks(known int) (pend, live int) {
	f.t.Helper()
	f.l.mu.Lock()
	pend, live = f.l.peakPend, f.l.peakLive
	f.l.mu.Unlock()
	if bound := DefaultMaxUnauthenticated + known*DefaultMaxUnauthenticatedPerSource; pend > bound {
		f.t.Errorf("%d unauthenticated connections at once, bound %d", pend, bound)
	}
	if live > cap(f.l.slots) {
		f.t.Errorf("%d connection goroutines at once, bound %d", live, cap(f.l.slots))
	}
	return pend, live
}

func loopbacks(a, b byte, n int) []netip.Addr {
	var out []netip.Addr
	for i := range n {
		out = append(out, netip.AddrFrom4([4]byte{127, 0, a, b + byte(i)}))
	}
	return out
}

// TestListenerPeerThroughSourceFlood: ten source addresses
// (127.0.0.10-19) reconnect in a loop, six connections each at a time,
// each holding its connection silent until the listener closes it. The
// real peer, from 127.0.0.2, pushes 30 times, each from a new connection
// (a restarted pusher), after at least 40 attacker connections each
// time: at least 29 pushes must be accepted. Then ten peers each push once
// from an address never seen before (the first contact of a peer): each
// must get through as well. The listener's connections stay within its
// bounds throughout: the unauthenticated ones within the total plus the
// per-source share of the known peers' sources, its connection goroutines
// within their semaphore. Everything counts events; the flood stops once
// the pushes are done (or after a bounded number of connections).
func TestListenerPeerThroughSourceFlood(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	l := startListener(t, ListenerConfig{Self: "b", Key: k, Addr: "127.0.0.1:0", Senders: []string{"a"}}, func(Message) {})
	f := startSourceFlood(t, l, k, loopbacks(0, 10, 10), 6, nil)

	before := l.ConnStats()
	peer := netip.MustParseAddr("127.0.0.2")
	ok, full, _ := f.push(30, func(int) netip.Addr { return peer })
	after := l.ConnStats()
	t.Logf("the peer from %v: %d of 30 pushes accepted (%d began with the others' slots full); attackers closed meanwhile: %d evicted, %d turned away",
		peer, ok, full, after.Evicted-before.Evicted, after.TurnedAway-before.TurnedAway)
	if ok < 29 {
		t.Errorf("the peer from %v: %d of 30 pushes accepted, want at least 29", peer, ok)
	}
	if after.Evicted+after.TurnedAway-before.Evicted-before.TurnedAway < 30*40/2 {
		t.Errorf("the flood barely pressed the listener during the pushes: %+v then %+v", before, after)
	}

	ok, full, _ = f.push(10, func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(40 + i)}) })
	t.Logf("ten peers, each from a new address: %d of 10 pushes accepted (%d began with the others' slots full)", ok, full)
	if ok < 10 {
		t.Errorf("first contact: %d of 10 pushes accepted, want 10", ok)
	}
	f.end()
	pend, live := f.peaks(maxKnownSources)
	t.Logf("attacker connections: %d (%d dials failed); listener at peak: %d unauthenticated connections, %d connection goroutines (bound %d); %+v",
		f.made.Load(), f.failed.Load(), pend, live, cap(l.slots), l.ConnStats())
}

// TestListenerKnownPeerThroughManySources: 48 source addresses
// (127.0.1.1-48), two connections each, more sources than slots: a new
// source can no longer take a slot from one holding more, and a peer's
// first contact is as likely to be turned away as an attacker's. A peer
// that has authenticated before from 127.0.0.2 has slots of its own
// there: at least 29 of its 30 pushes are accepted.
func TestListenerKnownPeerThroughManySources(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	l := startListener(t, ListenerConfig{Self: "b", Key: k, Addr: "127.0.0.1:0", Senders: []string{"a"}}, func(Message) {})
	peer := netip.MustParseAddr("127.0.0.2")
	if ok, why := pushOnce(t, k, l.Addr().String(), peer, nil, 1); !ok {
		t.Fatalf("the peer's push before the flood: %s", why)
	}
	f := startSourceFlood(t, l, k, loopbacks(1, 1, 48), 2, nil)
	f.epoch = 1
	ok, full, _ := f.push(30, func(int) netip.Addr { return peer })
	t.Logf("the known peer from %v: %d of 30 pushes accepted (%d began with the others' slots full)", peer, ok, full)
	if ok < 29 {
		t.Errorf("the known peer from %v: %d of 30 pushes accepted, want at least 29", peer, ok)
	}
	ok, full, _ = f.push(10, func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(40 + i)}) })
	t.Logf("ten peers, each from a new address (not asserted: the limit of first contact): %d of 10 pushes accepted (%d began with the others' slots full)", ok, full)
	f.end()
	pend, live := f.peaks(maxKnownSources)
	t.Logf("attacker connections: %d (%d dials failed); listener at peak: %d unauthenticated connections, %d connection goroutines (bound %d); %+v",
		f.made.Load(), f.failed.Load(), pend, live, cap(l.slots), l.ConnStats())
}

// tryDial connects to pl from src and reports whether the listener's
// hello came (the connection was admitted) or the connection was closed.
func tryDial(t *testing.T, pl *pipeListener, src string) (net.Conn, bool) {
	t.Helper()
	client, server := net.Pipe()
	pl.conns <- pipeConn{Conn: server, remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src))}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hello [helloLen]byte
	_, err := io.ReadFull(client, hello[:])
	if err != nil && isTimeout(err) {
		t.Fatalf("%s: neither a hello nor closed after 5 s", src)
	}
	return client, err == nil
}

// pipeAuth connects to pl from src and sends a frame of sender "a" with
// sequence seq, which the listener must accept: the connection stays
// open, authenticated.
func pipeAuth(t *testing.T, pl *pipeListener, k *Key, src string, seq uint64) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	pl.conns <- pipeConn{Conn: server, remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src))}
	client.SetDeadline(time.Now().Add(5 * time.Second))
	var hello [helloLen]byte
	if _, err := io.ReadFull(client, hello[:]); err != nil {
		t.Fatalf("%s: no hello: %v", src, err)
	}
	n, err := parseHello(hello[:])
	if err != nil {
		t.Fatal(err)
	}
	f, err := Seal(k, Message{Sender: "a", Epoch: 1, Seq: seq}, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write(f); err != nil {
		t.Fatalf("%s: send: %v", src, err)
	}
	var ack [ackLen]byte
	if _, err := io.ReadFull(client, ack[:]); err != nil {
		t.Fatalf("%s: no acknowledgement: %v", src, err)
	}
	if a, err := parseAck(k, ack[:]); err != nil || a.code != 0 {
		t.Fatalf("%s: acknowledgement %+v, %v", src, a, err)
	}
	client.SetDeadline(time.Time{})
	return client
}

// TestListenerPeerSourceSlots: the admission of unauthenticated
// connections, step by step, every connection young (the clock does not
// move), so that only the fairness rule and the peers' own slots let a
// connection in over the bound.
func TestListenerPeerSourceSlots(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	pl := newPipeListener()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := startListener(t, ListenerConfig{Self: "b", Key: k, Listener: pl, MaxUnauthenticated: 4, MaxUnauthenticatedPerSource: 4,
		PeerSources: []netip.Addr{netip.MustParseAddr("198.51.100.9")}, Now: clock.Now}, func(Message) {})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Each connection a millisecond younger than the last (all stay
	// young): between sources holding as many, the oldest goes first,
	// whatever the order of a map.
	dial := func(src string) (net.Conn, bool) {
		clock.Add(time.Millisecond)
		c, ok := tryDial(t, pl, src)
		conns = append(conns, c)
		return c, ok
	}
	open := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return isTimeout(err)
	}
	stats := func(want ConnStats) {
		t.Helper()
		if got := l.ConnStats(); got != want {
			t.Errorf("conn stats %+v, want %+v", got, want)
		}
	}

	// One source holds all four slots; a second source takes them over
	// until it holds one fewer than the first: then, the connections in
	// the way being young, the new one is closed.
	var a [4]net.Conn
	for i := range a {
		a[i], _ = dial(fmt.Sprintf("192.0.2.1:%d", 1000+i))
	}
	b1, _ := dial("192.0.2.2:2001") // A 4 > B 0+1: a[0] goes, young as it is
	b2, _ := dial("192.0.2.2:2002") // A 3 > B 1+1: a[1] goes
	if _, ok := dial("192.0.2.2:2003"); ok {
		t.Error("A 2, B 2: a third connection of B got in over a young one")
	}
	if !closedByPeer(a[0]) || !closedByPeer(a[1]) || !open(a[2]) || !open(a[3]) || !open(b1) || !open(b2) {
		t.Error("want a[0] and a[1] closed, a[2], a[3], b1, b2 open")
	}
	stats(ConnStats{Unauthenticated: 4, Evicted: 2, TurnedAway: 1})

	// A peer's first contact: its source holds none, A and B two, so it
	// gets in (a[2] goes); once it has authenticated, its address has
	// slots of its own: its next connection takes none of the others'.
	clock.Add(time.Millisecond)
	pipeAuth(t, pl, k, "203.0.113.7:3000", 1)
	if !closedByPeer(a[2]) {
		t.Error("the peer's first connection got in, but a[2] is open")
	}
	p2, ok := dial("203.0.113.7:3001")
	if !ok {
		t.Fatal("the peer's second connection was closed")
	}
	stats(ConnStats{Unauthenticated: 4, Authenticated: 1, FromPeerSources: 1, Evicted: 3, TurnedAway: 1})
	// A new source fills the fourth slot of the others; the next new
	// source takes B's oldest (A, B and C hold one each, B's is the
	// oldest), never the peer's connection.
	dial("192.0.2.3:4000")
	dial("192.0.2.4:4000")
	if !closedByPeer(b1) || !open(b2) || !open(a[3]) || !open(p2) {
		t.Error("want b1 closed, b2, a[3] and the peer's connection open")
	}
	stats(ConnStats{Unauthenticated: 5, Authenticated: 1, FromPeerSources: 1, Evicted: 4, TurnedAway: 1})

	// A configured peer source has its slots before it authenticates.
	if _, ok := dial("198.51.100.9:5000"); !ok {
		t.Error("a connection from a configured peer source was closed")
	}
	stats(ConnStats{Unauthenticated: 6, Authenticated: 1, FromPeerSources: 2, Evicted: 4, TurnedAway: 1})

	// The peer authenticates from eight more addresses (each first
	// contact once the others' connections are old enough to go): its
	// first address, the longest ago, is forgotten, and the connection it
	// holds in its slots closed; the configured source stays.
	for i := range maxKnownSources {
		clock.Add(time.Second)
		conns = append(conns, pipeAuth(t, pl, k, fmt.Sprintf("192.0.2.%d:6000", 100+i), uint64(2+i)))
	}
	if !closedByPeer(p2) {
		t.Error("the connection of a forgotten peer source is still open")
	}
	l.mu.Lock()
	_, first := l.known[netip.MustParsePrefix("203.0.113.7/32")]
	nknown, npeers := len(l.known), l.pending[poolPeers].n
	l.mu.Unlock()
	if first || nknown != maxKnownSources || npeers != 1 {
		t.Errorf("the first peer source still known: %v; %d known (want %d); %d connections in the peers' slots (want 1)", first, nknown, maxKnownSources, npeers)
	}
}

// within polls cond every millisecond until it holds (true) or d passes
// (false), and says how long it waited.
func within(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start), true
}
