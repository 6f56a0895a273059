package scheduler

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"lvs-feedback/replica"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuf is a concurrency-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startListener runs a listener on 127.0.0.1 until the test ends.
func startListener(t *testing.T, cfg ListenerConfig, deliver func(Message)) *Listener {
	t.Helper()
	if cfg.Addr == "" && cfg.Listener == nil {
		cfg.Addr = "127.0.0.1:0"
	}
	l, err := NewListener(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx, deliver)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func startPusher(t *testing.T, cfg PusherConfig) *Pusher {
	t.Helper()
	p, err := NewPusher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// TestTwoDirectorsLoopback: two directors, each with a listener and a
// pusher to the other, exchange messages both ways.
func TestTwoDirectorsLoopback(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	inA, inB := NewInbox(), NewInbox()
	la := startListener(t, ListenerConfig{Self: "a", Key: k, Senders: []string{"b"}}, inA.Put)
	lb := startListener(t, ListenerConfig{Self: "b", Key: k, Senders: []string{"a"}}, inB.Put)
	pa := startPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{lb.Addr().String()}})
	pb := startPusher(t, PusherConfig{Self: "b", Key: k, Peers: []string{la.Addr().String()}})

	pa.Publish(Message{Epoch: 4, Writer: true, Snapshot: sampleSnapshot()})
	pb.Publish(Message{Epoch: 2, Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 2, ID: 1}, Key: simKeys[0], Weight: 0}}})
	var gotB, gotA []Message
	waitFor(t, 5*time.Second, "both messages", func() bool {
		gotB = append(gotB, inB.Take()...)
		gotA = append(gotA, inA.Take()...)
		return len(gotA) > 0 && len(gotB) > 0
	})
	if m := gotB[0]; m.Sender != "a" || m.Epoch != 4 || !m.Writer || len(m.Snapshot.Dests) != 5 || m.Seq == 0 {
		t.Errorf("b got %+v", m)
	}
	if m := gotA[0]; m.Sender != "b" || len(m.Edits) != 1 || m.Writer {
		t.Errorf("a got %+v", m)
	}
	now := time.Now()
	for _, p := range []*Pusher{pa, pb} {
		waitFor(t, 2*time.Second, "push status", func() bool { return !p.Status()[0].LastOK.IsZero() })
		if s := p.Status()[0]; s.Unreachable(now, time.Second) || s.LastError != "" || s.Sent == 0 {
			t.Errorf("push status %+v", s)
		}
	}
	if s := lb.Senders(); len(s) != 1 || s[0].ID != "a" || s[0].Epoch != 4 || !s[0].Writer {
		t.Errorf("b's senders %+v", s)
	}
	// Many publishes over the same connection: sequence keeps rising.
	for i := range 20 {
		pa.Publish(Message{Epoch: 4, Writer: true, Snapshot: replica.Snapshot{Dests: sampleSnapshot().Dests[:1+i%3]}})
	}
	waitFor(t, 5*time.Second, "the last publish", func() bool {
		for _, m := range inB.Take() {
			if len(m.Snapshot.Dests) == 1+19%3 && m.Seq > gotB[0].Seq {
				return true
			}
		}
		return false
	})
	if n := lb.Counters().Snapshot(); n["accepted"] < 2 || n["replay"] != 0 {
		t.Errorf("counters %v", n)
	}
}

// recordingConn keeps a copy of everything written through it.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// rawSend opens a connection, reads the listener's challenge, writes what
// data makes of it and returns the verdict byte of the acknowledgement (or
// -1 when the listener sent none).
func rawSend(t *testing.T, addr string, data func(Nonce) []byte, closeWrite bool) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var hello [helloLen]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		t.Fatalf("no challenge: %v", err)
	}
	n, err := parseHello(hello[:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(data(n)); err != nil {
		return -1
	}
	if closeWrite {
		c.(*net.TCPConn).CloseWrite()
	}
	var ack [ackLen]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return -1
	}
	return int(ack[0])
}

// bytesOf returns a data function for rawSend that ignores the challenge.
func bytesOf(b []byte) func(Nonce) []byte { return func(Nonce) []byte { return b } }

// TestListenerRejects sends a listener everything it must refuse, over
// real sockets: a wrong key, a captured frame replayed, a truncated frame,
// an oversized one, garbage, a reflected frame. Each is rejected, counted
// under its own reason and logged without the key; none is delivered.
func TestListenerRejects(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	wrong := testKey(t, 8)
	var logs logBuf
	var mu sync.Mutex
	var delivered []Message
	l := startListener(t, ListenerConfig{Self: "b", Key: k, Logger: logs.logger()}, func(m Message) {
		mu.Lock()
		delivered = append(delivered, m)
		mu.Unlock()
	})
	addr := l.Addr().String()
	deliveredCount := func() int { mu.Lock(); defer mu.Unlock(); return len(delivered) }

	// A legitimate pusher whose connection records the bytes on the wire.
	var rec *recordingConn
	var recMu sync.Mutex
	p := startPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{addr}, Dial: func(ctx context.Context, a string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return nil, err
		}
		recMu.Lock()
		defer recMu.Unlock()
		rec = &recordingConn{Conn: c}
		return rec, nil
	}})
	p.Publish(Message{Epoch: 3, Writer: true, Snapshot: sampleSnapshot()})
	waitFor(t, 5*time.Second, "the genuine frame", func() bool { return deliveredCount() == 1 })
	recMu.Lock()
	rec.mu.Lock()
	captured := bytes.Clone(rec.out.Bytes())
	rec.mu.Unlock()
	recMu.Unlock()

	// A pusher with the wrong key: rejected, and it can tell why.
	pw := startPusher(t, PusherConfig{Self: "c", Key: wrong, Peers: []string{addr}, RetryInterval: time.Hour})
	pw.Publish(Message{Epoch: 1, Writer: true, Snapshot: sampleSnapshot()})
	waitFor(t, 5*time.Second, "the wrong-key verdict", func() bool { return pw.Status()[0].LastError != "" })
	if s := pw.Status()[0]; !strings.Contains(s.LastError, "same key") || !s.LastOK.IsZero() {
		t.Errorf("wrong-key pusher status: %+v", s)
	}

	good := func(seq uint64, sender string) func(Nonce) []byte {
		return func(n Nonce) []byte {
			f, err := Seal(k, Message{Sender: sender, Epoch: 3, Seq: seq, SentAt: time.Now()}, n)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	oversized := func(n Nonce) []byte {
		f := good(40, "a")(n)
		binary.BigEndian.PutUint32(f[46:50], MaxFrameSize)
		h := fixedHeader + 1 + macLen
		copy(f[h-macLen:h], k.mac([]byte(headerMACTag), f[:h-macLen]))
		return f[:h]
	}
	http := []byte("GET / HTTP/1.1\r\nHost: director-b.example\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n")
	cases := []struct {
		name    string
		data    func(Nonce) []byte
		half    bool // close the write side after sending
		verdict int  // expected acknowledgement verdict; -1 none
		reason  error
	}{
		{"replayed captured frame", bytesOf(captured), false, int(verdictCode(ErrChallenge)), ErrChallenge},
		{"truncated frame", func(n Nonce) []byte { return good(50, "a")(n)[:60] }, true, -1, ErrTruncated},
		{"truncated header", bytesOf([]byte{0, 0}), true, -1, ErrTruncated},
		{"oversized frame", oversized, false, int(verdictCode(ErrTooLarge)), ErrTooLarge},
		{"garbage", bytesOf(bytes.Repeat([]byte("garbage!"), 30)), false, int(verdictCode(ErrMalformed)), ErrMalformed},
		{"plain HTTP", bytesOf(http), false, int(verdictCode(ErrMalformed)), ErrMalformed},
		{"tampered frame", func(n Nonce) []byte { f := good(60, "a")(n); f[40] ^= 0x10; return f }, false, int(verdictCode(ErrBadMAC)), ErrBadMAC},
		{"reflected own id", good(1, "b"), false, int(verdictCode(ErrOwnSender)), ErrOwnSender},
	}
	for _, c := range cases {
		before := l.Counters().Rejected(c.reason)
		got := rawSend(t, addr, c.data, c.half)
		if got != c.verdict {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.verdict)
		}
		waitFor(t, 2*time.Second, c.name+" counted", func() bool { return l.Counters().Rejected(c.reason) == before+1 })
	}
	// A frame with valid MACs after all that is still accepted.
	mu.Lock()
	next := delivered[0].Seq + 1
	mu.Unlock()
	if v := rawSend(t, addr, good(next, "a"), false); v != 0 {
		t.Errorf("genuine frame after the attacks: verdict %d", v)
	}
	// The acknowledgement may reach us before the delivery callback runs.
	waitFor(t, 5*time.Second, "the second genuine message delivered", func() bool { return deliveredCount() >= 2 })
	time.Sleep(50 * time.Millisecond)
	if n := deliveredCount(); n != 2 {
		t.Errorf("%d messages delivered, want 2 (the genuine ones)", n)
	}
	counts := l.Counters().Snapshot()
	if counts["bad_mac"] < 2 { // the wrong-key pusher and the tampered frame
		t.Errorf("bad_mac = %d", counts["bad_mac"])
	}
	// Each rejection is logged after its acknowledgement, by the
	// connection's goroutine: wait for the lines.
	for _, reason := range []string{"challenge", "truncated", "too_large", "malformed", "bad_mac", "own_sender"} {
		waitFor(t, 2*time.Second, "a log line for "+reason, func() bool { return strings.Contains(logs.String(), "reason="+reason) })
	}
	out := logs.String()
	if containsAny(out, string(k.b), string(wrong.b)) {
		t.Error("a key appears in the logs")
	}
}

// TestPublishNeverBlocks: peers that never answer, refuse connections or
// accept and stall cost the caller of Publish nothing.
func TestPublishNeverBlocks(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	// A peer that accepts and never reads nor answers.
	stall, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var hmu sync.Mutex
	go func() {
		for {
			c, err := stall.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			held = append(held, c)
			hmu.Unlock()
		}
	}()
	t.Cleanup(func() {
		stall.Close()
		hmu.Lock()
		for _, c := range held {
			c.Close()
		}
		hmu.Unlock()
	})
	// A port nobody listens on.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	p := startPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{stall.Addr().String(), closedAddr},
		IOTimeout: 200 * time.Millisecond, RetryInterval: 50 * time.Millisecond})
	snap := bigSnapshot(2000)
	const n = 1000
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for range n {
		t0 := time.Now()
		p.Publish(Message{Epoch: 1, Writer: true, Snapshot: snap})
		lat = append(lat, time.Since(t0))
	}
	total := time.Since(start)
	slices.Sort(lat)
	t.Logf("%d publishes of 2000 destinations to two dead peers: %v in all, median %v, worst %v", n, total, lat[n/2], lat[n-1])
	// Timing on a shared machine under the race detector is noisy: the
	// median says whether Publish waits for anything.
	if lat[n/2] > 100*time.Millisecond { // Publish must not wait for the dead peers' timeouts
		t.Errorf("median Publish took %v", lat[n/2])
	}
	// Each peer's goroutine encodes the 2,000 destinations before its
	// first attempt: slow under the race detector on a loaded machine.
	for i := range p.Status() {
		waitFor(t, 20*time.Second, "a failed attempt on each dead peer", func() bool { return p.Status()[i].Failed > 0 })
	}
	for _, s := range p.Status() {
		if !s.Unreachable(time.Now(), 100*time.Millisecond) || s.LastError == "" || s.Superseded == 0 {
			t.Errorf("status of a dead peer: %+v", s)
		}
	}
}

// TestPeerUnreachableThenBack: the listener goes away (the peer died) and
// comes back on the same address; the pusher says so, then recovers by
// itself with the latest state.
func TestPeerUnreachableThenBack(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	in := NewInbox()
	l, err := NewListener(ListenerConfig{Self: "b", Key: k, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx, in.Put) }()

	p := startPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{addr}, IOTimeout: 300 * time.Millisecond, RetryInterval: 100 * time.Millisecond})
	p.Publish(Message{Epoch: 1, Writer: true})
	waitFor(t, 5*time.Second, "first push", func() bool { return len(in.Take()) > 0 })
	cancel()
	<-done
	const after = 500 * time.Millisecond
	p.Publish(Message{Epoch: 1, Writer: true}) // retried until the peer is back
	down := waitFor(t, 5*time.Second, "peer unreachable", func() bool {
		return p.Status()[0].Unreachable(time.Now(), after)
	})
	t.Logf("peer reported unreachable %v after it died (threshold %v)", down, after)

	l2, err := NewListener(ListenerConfig{Self: "b", Key: k, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	in2 := NewInbox()
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan struct{})
	go func() { defer close(done2); l2.Run(ctx2, in2.Put) }()
	defer func() { cancel2(); <-done2 }()
	p.Publish(Message{Epoch: 1, Writer: true, Snapshot: sampleSnapshot()})
	back := waitFor(t, 5*time.Second, "recovery", func() bool {
		ms := in2.Take()
		return len(ms) > 0 && len(ms[len(ms)-1].Snapshot.Dests) == 5
	})
	t.Logf("state delivered %v after the peer came back", back)
	waitFor(t, 2*time.Second, "reachable again", func() bool { return !p.Status()[0].Unreachable(time.Now(), after) })
}

// pipeListener hands the Listener in-memory connections that seem to come
// from the source addresses the test chooses.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

type pipeConn struct {
	net.Conn
	remote net.Addr
}

func (c pipeConn) RemoteAddr() net.Addr { return c.remote }

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// dial connects from src and returns the client end, once the listener's
// hello has arrived (so the connection is registered).
func (l *pipeListener) dial(t *testing.T, src string) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	l.conns <- pipeConn{Conn: server, remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src))}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hello [helloLen]byte
	if _, err := io.ReadFull(client, hello[:]); err != nil {
		t.Fatalf("%s: no hello: %v", src, err)
	}
	return client
}

// closedByPeer reports whether the listener closed c (a read ends at once).
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

// TestListenerUnauthenticatedLimits: unauthenticated connections are
// bounded per source and in all; over a bound, the oldest connection of
// the same source goes, or of the source holding the most, so that a
// source with a single connection (a peer) keeps it — but one in its first
// moments (a quarter of the handshake timeout) stays, and the new one goes.
func TestListenerUnauthenticatedLimits(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	pl := newPipeListener()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := startListener(t, ListenerConfig{Self: "b", Key: k, Listener: pl, MaxUnauthenticated: 4, MaxUnauthenticatedPerSource: 3, Now: clock.Now}, func(Message) {})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func(src string) net.Conn {
		clock.Add(time.Second) // each connection old enough to go
		c := pl.dial(t, src)
		conns = append(conns, c)
		return c
	}
	a1, a2, a3 := dial("192.0.2.1:1001"), dial("192.0.2.1:1002"), dial("192.0.2.1:1003")
	a4 := dial("192.0.2.1:1004") // over the per-source bound: a1 goes
	if !closedByPeer(a1) {
		t.Error("the oldest connection of a source over its bound is still open")
	}
	peer := dial("198.51.100.7:2000") // four in all now
	c6 := dial("[2001:db8::1]:3000")  // over the total: the oldest of the source with the most (a2)
	if !closedByPeer(a2) {
		t.Error("over the total bound, the oldest connection of the biggest source is still open")
	}
	c6b := dial("[2001:db8::2]:3001") // the same /64 as c6: that source has two; a3 goes
	if !closedByPeer(a3) {
		t.Error("the second eviction did not take the biggest source's oldest connection")
	}
	dial("[2001:db8::3]:3002") // 2001:db8::/64 now holds the most: c6 goes
	if !closedByPeer(c6) {
		t.Error("an IPv6 /64 does not count as one source")
	}
	s := l.ConnStats()
	if s.Evicted != 4 || s.Unauthenticated != 4 {
		t.Errorf("conn stats %+v: want 4 evicted, 4 open", s)
	}
	// The single connections of the other sources are still there: the
	// peer answers its challenge and is accepted.
	for _, c := range []net.Conn{a4, c6b} {
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !isTimeout(err) {
			t.Errorf("a connection that should be open: %v", err)
		}
	}
	_ = peer

	// A new connection while the one in its way is in its first moments:
	// the new one is closed.
	pl2 := newPipeListener()
	l2 := startListener(t, ListenerConfig{Self: "b", Key: k, Listener: pl2, MaxUnauthenticatedPerSource: 1, Now: clock.Now}, func(Message) {})
	first := pl2.dial(t, "203.0.113.5:4000")
	conns = append(conns, first)
	client, server := net.Pipe()
	conns = append(conns, client)
	pl2.conns <- pipeConn{Conn: server, remote: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("203.0.113.5:4001"))}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Read(make([]byte, 1)); err == nil {
		t.Error("a connection over the bound got a hello while the one in its way was young")
	}
	clock.Add(time.Second)
	conns = append(conns, pl2.dial(t, "203.0.113.5:4002"))
	if !closedByPeer(first) {
		t.Error("an old enough connection in the way was not closed")
	}
	if s := l2.ConnStats(); s.TurnedAway != 1 || s.Evicted != 1 || s.Unauthenticated != 1 {
		t.Errorf("conn stats %+v: want 1 turned away, 1 evicted, 1 open", s)
	}
}

// TestListenerMaxConns: authenticated connections are bounded too; a
// sender's new connection replaces its older one.
func TestListenerMaxConns(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	in := NewInbox()
	l := startListener(t, ListenerConfig{Self: "b", Key: k, MaxConns: 1}, in.Put)
	addr := l.Addr().String()
	pa := startPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{addr}, RetryInterval: 50 * time.Millisecond})
	pa.Publish(Message{Epoch: 1})
	waitFor(t, 5*time.Second, "a's frame", func() bool { return len(in.Take()) == 1 })
	// Another pusher of the same id (a restarted a): it replaces the first.
	pa2 := startPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{addr}, RetryInterval: 50 * time.Millisecond})
	pa2.Publish(Message{Epoch: 2})
	waitFor(t, 5*time.Second, "the restarted a's frame", func() bool { return len(in.Take()) == 1 })
	// c is over the bound while a's connection is open.
	pc := startPusher(t, PusherConfig{Self: "c", Key: k, Peers: []string{addr}, RetryInterval: time.Hour})
	pc.Publish(Message{Epoch: 1})
	waitFor(t, 5*time.Second, "c refused", func() bool { return pc.Status()[0].Failed == 1 })
	if s := l.ConnStats(); s.OverMaxConns != 1 || s.Authenticated != 1 {
		t.Errorf("conn stats %+v: want 1 refused, 1 authenticated", s)
	}
}

// TestListenerIdleAndSlowFrames: a connection that does not authenticate
// within the handshake timeout is closed, whatever it sends; an
// authenticated frame that trickles in is cut after FrameTimeout.
func TestListenerIdleAndSlowFrames(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	l := startListener(t, ListenerConfig{Self: "b", Key: k, HandshakeTimeout: 200 * time.Millisecond, FrameTimeout: 200 * time.Millisecond}, func(Message) {})
	for _, send := range [][]byte{nil, []byte("LVSY"), bytes.Repeat([]byte{0}, fixedHeader-1)} {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(send)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := io.Copy(io.Discard, c); err != nil || n != helloLen {
			t.Errorf("sending %d bytes: read %d bytes, %v; want the hello, then EOF", len(send), n, err)
		}
	}
	waitFor(t, 2*time.Second, "handshake timeout counted", func() bool { return l.ConnStats().HandshakeTimeouts == 1 })
	if got := l.Counters().Rejected(ErrTruncated); got != 2 {
		t.Errorf("truncated = %d, want 2 (the headers begun)", got)
	}
	// An authenticated header, then a payload that never comes.
	slow, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	var hello [helloLen]byte
	io.ReadFull(slow, hello[:])
	n, _ := parseHello(hello[:])
	f, _ := Seal(k, Message{Sender: "a", Epoch: 1, Seq: 1, Snapshot: sampleSnapshot()}, n)
	slow.Write(f[:fixedHeader+1+macLen+1])
	slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, slow)
	waitFor(t, 2*time.Second, "truncated count", func() bool { return l.Counters().Rejected(ErrTruncated) == 3 })
	waitFor(t, 2*time.Second, "no connection left", func() bool { s := l.ConnStats(); return s.Authenticated == 0 && s.Unauthenticated == 0 })
}

// liveDirector runs a simDirector as lvs-monitor would: a goroutine with a
// ticker, an inbox fed by its listener, a pusher to its peers.
type liveDirector struct {
	*simDirector
	ln     *Listener
	push   *Pusher
	inbox  *Inbox
	role   chan Role
	cancel context.CancelFunc
	done   chan struct{}

	// When the director took over, and its table at that moment (before
	// its first own write).
	takeoverAt      time.Time
	takeoverWeights map[replica.DestKey]int
}

func newLiveDirector(t *testing.T, sd *simDirector, k *Key, ln net.Listener) *liveDirector {
	t.Helper()
	d := &liveDirector{simDirector: sd, inbox: NewInbox(), role: make(chan Role, 1), done: make(chan struct{})}
	var err error
	d.ln, err = NewListener(ListenerConfig{Self: sd.id, Key: k, Addr: "127.0.0.1:0", Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// start connects the director to its peers and runs it.
func (d *liveDirector) start(t *testing.T, k *Key, peers []string, interval time.Duration, dial func(context.Context, string) (net.Conn, error)) {
	t.Helper()
	var err error
	d.push, err = NewPusher(PusherConfig{Self: d.id, Key: k, Peers: peers, Dial: dial,
		DialTimeout: 300 * time.Millisecond, IOTimeout: 300 * time.Millisecond, RetryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	var wg sync.WaitGroup
	wg.Go(func() { d.ln.Run(ctx, d.inbox.Put) })
	wg.Go(func() { d.push.Run(ctx) })
	wg.Go(func() { d.loop(ctx, interval) })
	go func() { wg.Wait(); close(d.done) }()
	t.Cleanup(d.stop)
}

func (d *liveDirector) stop() {
	d.cancel()
	<-d.done
}

// loop is the monitor's main loop (the recipe in docs/director-pair.md):
// cycle and publish every interval; handle messages as they come; follow
// role changes at once.
func (d *liveDirector) loop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-d.role:
			d.mu.Lock()
			d.node.SetRole(r)
			d.mu.Unlock()
			d.step(nil)
		case <-d.inbox.Ready():
			d.step(d.inbox.Take())
		case <-t.C:
			d.step(nil)
			d.cycle()
			d.push.Publish(d.message())
		}
	}
}

// step handles messages (if any) and steps the node; a change of writer
// runs a cycle at once (takeover) and is published at once.
func (d *liveDirector) step(msgs []Message) {
	wasWriter := d.writer()
	st := d.handle(msgs, time.Now())
	if st.Writer == wasWriter {
		return
	}
	if st.Writer {
		d.mu.Lock()
		if st.EpochChanged {
			d.takeoverAt, d.takeoverWeights = time.Now(), d.weights()
		}
		d.mu.Unlock()
		d.cycle() // the new writer writes at once
	}
	d.push.Publish(d.message())
}

func (d *liveDirector) setRole(r Role) {
	select {
	case <-d.role:
	default:
	}
	d.role <- r
}

func (d *liveDirector) writer() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node.Writer()
}

func (d *liveDirector) snapshotWeights() map[replica.DestKey]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.weights()
}

// TestPushApplyLatencyLoopback measures, over loopback TCP, the time from
// the active's Publish of a changed weight to the standby's table holding
// it (verify, Plan, write included).
func TestPushApplyLatencyLoopback(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	now := time.Now()
	a := newLiveDirector(t, newSimDirector(t, "a", 1, 0, now), k, nil)
	b := newLiveDirector(t, newSimDirector(t, "b", 1, 0, now), k, nil)
	applied := make(chan replica.Write, 16)
	var appliedAt sync.Map
	b.onApply = func(w replica.Write, _ time.Time) {
		appliedAt.Store(w.To, time.Now())
		select {
		case applied <- w:
		default:
		}
	}
	a.start(t, k, []string{b.ln.Addr().String()}, time.Hour, nil)
	b.start(t, k, []string{a.ln.Addr().String()}, time.Hour, nil)
	a.setRole(Active)
	waitFor(t, 2*time.Second, "a writes", a.writer)

	const n = 300
	var lat []time.Duration
	for i := range n {
		w := 20 + i
		a.mu.Lock()
		a.reconcile()
		r := a.rec[simKeys[0]]
		if err := a.table.SetWeight(simKeys[0].Service, simKeys[0].Dest, r.Weight, w); err != nil {
			t.Fatal(err)
		}
		r.Weight, r.Ctrl = w, float64(w)
		a.rec[simKeys[0]] = r
		a.mu.Unlock()
		t0 := time.Now()
		a.push.Publish(a.message())
		select {
		case got := <-applied:
			for got.To != w {
				got = <-applied
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d not applied", i)
		}
		at, _ := appliedAt.Load(w)
		lat = append(lat, at.(time.Time).Sub(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("push→apply latency over loopback, %d changes: min %v, median %v, p90 %v, p99 %v, max %v",
		n, lat[0], p(0.5), p(0.9), p(0.99), lat[len(lat)-1])
	if p(0.5) > time.Second { // a behaviour bound, not a benchmark: the figure is logged above
		t.Errorf("median latency %v", p(0.5))
	}
}

// TestFailoverOverLoopback: the real stack on loopback — the active dies
// mid-run, the VIP moves to the standby, which writes within one interval
// from the replicated weights (difference between the tables: none).
func TestFailoverOverLoopback(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	now := time.Now()
	const interval = 100 * time.Millisecond
	a := newLiveDirector(t, newSimDirector(t, "a", 1, +1, now), k, nil)
	b := newLiveDirector(t, newSimDirector(t, "b", 1, +1, now), k, nil)
	a.start(t, k, []string{b.ln.Addr().String()}, interval, nil)
	b.start(t, k, []string{a.ln.Addr().String()}, interval, nil)
	a.setRole(Active)
	waitFor(t, 2*time.Second, "a writes", a.writer)
	a.operator(simKeys[1], 0)
	time.Sleep(8 * interval)
	b.operator(simKeys[2], 0)
	waitFor(t, 3*time.Second, "the drain on b reaches a", func() bool { return a.snapshotWeights()[simKeys[2]] == 0 })

	// Kill the active mid-run; take its last state as the reference. Its
	// controller stops first, so that the last state is one it published:
	// on a loaded machine the frame of its very last cycle could still be
	// on its way when it dies (b would then rightly hold the one before).
	a.mu.Lock()
	a.dead = true
	a.mu.Unlock()
	last := a.snapshotWeights()
	waitFor(t, 5*time.Second, "b holds a's last state", func() bool { return mapsEqual(b.snapshotWeights(), last) })
	a.stop()
	t0 := time.Now()
	b.setRole(Active)
	waitFor(t, 2*time.Second, "b writes", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.node.Writer() && b.ownWrites > 0
	})
	takeover, diff := b.takeoverReport(last, t0)
	t.Logf("takeover: b writing weights %v after getting the VIP (interval %v); weight difference between the tables at takeover: %d", takeover, interval, diff)
	// The target is one interval; the figure is logged above. The test
	// asserts behaviour with room for a slow, shared machine: the standby
	// writes promptly (well under the 2 s a takeover must never take) and
	// from the replicated weights.
	if takeover > 2*time.Second || diff != 0 {
		t.Errorf("takeover took %v (target: one interval, %v), weight difference %d (want 0)", takeover, interval, diff)
	}
	w := b.snapshotWeights()
	if w[simKeys[1]] != 0 || w[simKeys[2]] != 0 {
		t.Errorf("drains forgotten at failover: %v", w)
	}
	if w[simKeys[0]] < last[simKeys[0]] {
		t.Errorf("weights reset at failover: %d, was %d", w[simKeys[0]], last[simKeys[0]])
	}
	waitFor(t, 3*time.Second, "b reports a unreachable", func() bool {
		return b.push.Status()[0].Unreachable(time.Now(), 5*interval)
	})
	if s := b.ln.Senders(); len(s) != 1 || s[0].ID != "a" || !s[0].Writer {
		t.Errorf("b's senders: %+v", s)
	}
}

// takeoverReport returns how long after t0 the director took over and the
// total weight difference between its table then and ref.
func (d *liveDirector) takeoverReport(ref map[replica.DestKey]int, t0 time.Time) (time.Duration, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	diff := 0
	for k, w := range ref {
		diff += abs(d.takeoverWeights[k] - w)
	}
	return d.takeoverAt.Sub(t0), diff
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestInboxKeepsLatestPerSender(t *testing.T) {
	in := NewInbox()
	in.Put(Message{Sender: "b", Epoch: 2, Seq: 5})
	in.Put(Message{Sender: "b", Epoch: 2, Seq: 4}) // late: ignored
	in.Put(Message{Sender: "a", Epoch: 1, Seq: 9})
	in.Put(Message{Sender: "a", Epoch: 2, Seq: 1}) // new epoch: newer
	select {
	case <-in.Ready():
	default:
		t.Fatal("not ready")
	}
	got := in.Take()
	if len(got) != 2 || got[0].Sender != "a" || got[0].Epoch != 2 || got[1].Sender != "b" || got[1].Seq != 5 {
		t.Errorf("Take = %+v", got)
	}
	if len(in.Take()) != 0 {
		t.Error("Take did not empty the inbox")
	}
}

func TestFixedRole(t *testing.T) {
	var src RoleSource = NewFixedRole(Active)
	if src.Role() != Active || Active.String() != "active" || Standby.String() != "standby" {
		t.Error("fixed role")
	}
	select {
	case r := <-src.Changes():
		t.Errorf("a fixed role changed to %v", r)
	default:
	}
}

// TestSplitBrainOverLoopback: both directors get the VIP at the same time
// and start writing, pulling weights in opposite directions. Over real
// sockets they settle on one writer and stay there; when the winner dies
// (without the loser's VIP changing), the loser takes over after the
// winner's claim lapses.
func TestSplitBrainOverLoopback(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	now := time.Now()
	const interval = 50 * time.Millisecond
	mk := func(id string, step float64) *liveDirector {
		sd := newSimDirector(t, id, 1, step, now)
		// A peer timeout well above the interval: on a loaded machine a
		// few late messages must not look like a dead winner.
		n, err := NewNode(NodeConfig{Self: id, PeerTimeout: 20 * interval}, 1, now)
		if err != nil {
			t.Fatal(err)
		}
		sd.node = n
		return newLiveDirector(t, sd, k, nil)
	}
	a, b := mk("a", +1), mk("b", -1)
	a.start(t, k, []string{b.ln.Addr().String()}, interval, nil)
	b.start(t, k, []string{a.ln.Addr().String()}, interval, nil)
	a.setRole(Active)
	b.setRole(Active)
	// Settled: the same single writer for five intervals in a row (right
	// after both start, one may not have begun writing yet).
	stable, aWrote := 0, false
	waitFor(t, 5*time.Second, "one writer", func() bool {
		aw, bw := a.writer(), b.writer()
		if aw != bw && (stable == 0 || aw == aWrote) {
			stable++
		} else {
			stable = 0
		}
		aWrote = aw
		time.Sleep(interval)
		return stable >= 5
	})
	winner, loser := a, b
	if b.writer() {
		winner, loser = b, a
	}
	loserOwn := func() int { loser.mu.Lock(); defer loser.mu.Unlock(); return loser.ownWrites }
	own := loserOwn()
	for range 20 {
		time.Sleep(interval)
		if !winner.writer() || loser.writer() {
			t.Fatalf("the writer changed: %s %v, %s %v", winner.id, winner.writer(), loser.id, loser.writer())
		}
	}
	if loserOwn() != own {
		t.Errorf("the loser wrote its own weights %d times after yielding", loserOwn()-own)
	}
	waitFor(t, 2*time.Second, "tables in step", func() bool { return mapsEqual(winner.snapshotWeights(), loser.snapshotWeights()) })
	t.Logf("split brain: %s writes, %s follows", winner.id, loser.id)
	winner.stop()
	took := waitFor(t, 3*time.Second, "the loser takes over", loser.writer)
	t.Logf("the winner died: %s took over after %v (peer timeout %v)", loser.id, took, 20*interval)
}

// TestPusherInvalidMessage: a message that cannot be sealed is logged as
// the sender's error, not retried, and does not make the peer unreachable.
func TestPusherInvalidMessage(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	in := NewInbox()
	l := startListener(t, ListenerConfig{Self: "b", Key: k}, in.Put)
	var logs logBuf
	p := startPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{l.Addr().String()}, Logger: logs.logger(), RetryInterval: 10 * time.Millisecond})
	p.Publish(Message{Epoch: 1, Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: simKeys[0], State: "bogus"}}}})
	waitFor(t, 2*time.Second, "the error log", func() bool { return strings.Contains(logs.String(), "sync message not sent") })
	time.Sleep(100 * time.Millisecond)
	if s := p.Status()[0]; s.Failed != 0 || s.LastError != "" {
		t.Errorf("status after an invalid message: %+v", s)
	}
	if n := strings.Count(logs.String(), "sync message not sent"); n != 1 {
		t.Errorf("logged %d times", n)
	}
	p.Publish(Message{Epoch: 1})
	waitFor(t, 2*time.Second, "a valid message", func() bool { return len(in.Take()) == 1 })
}

// TestPusherRestartSameEpoch: a director that restarts into the epoch of
// its previous run (its epoch file lost and re-created, and as many
// restarts since) is not refused as a replay: its sequence numbers
// continue from the clock, above the previous run's.
func TestPusherRestartSameEpoch(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	in := NewInbox()
	l := startListener(t, ListenerConfig{Self: "b", Key: k}, in.Put)
	run := func(n int) {
		t.Helper()
		p, stop := runPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{l.Addr().String()}, RetryInterval: 50 * time.Millisecond})
		defer stop()
		for i := range n {
			p.Publish(Message{Epoch: 1, Writer: true, Snapshot: replica.Snapshot{Dests: sampleSnapshot().Dests[:1+i%3]}})
			waitFor(t, 5*time.Second, "the frame", func() bool { return len(in.Take()) == 1 })
		}
	}
	run(5)
	run(1)
	if n := l.Counters().Rejected(ErrReplay); n != 0 {
		t.Errorf("%d frames of the restarted pusher refused as replays", n)
	}
}
