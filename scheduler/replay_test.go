package scheduler

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"lvs-feedback/replica"
	"net"
	"sync"
	"testing"
	"time"
)

// relay is a TCP proxy between a pusher and a listener, as an attacker on
// the sync link would run one: it records what the pusher sends, connection
// by connection, and can withhold it (hold) to deliver it later (release).
type relay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   []*relayConn
	holding bool
}

type relayConn struct {
	client, server net.Conn

	mu   sync.Mutex
	rec  bytes.Buffer // everything the client sent
	held bytes.Buffer // sent while holding, not forwarded yet
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target}
	r.wg.Go(r.run)
	t.Cleanup(r.close)
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) run() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", r.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		rc := &relayConn{client: c, server: s}
		r.conns = append(r.conns, rc)
		r.mu.Unlock()
		r.wg.Go(func() { // listener → pusher, as it is
			io.Copy(c, s)
			c.Close()
		})
		r.wg.Go(func() { // pusher → listener, recorded, maybe withheld
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				r.mu.Lock()
				holding := r.holding
				r.mu.Unlock()
				rc.mu.Lock()
				rc.rec.Write(buf[:n])
				holding = holding || rc.held.Len() > 0
				if holding {
					rc.held.Write(buf[:n])
				} else if n > 0 {
					s.Write(buf[:n])
				}
				rc.mu.Unlock()
				if err != nil {
					if !holding {
						s.Close()
					}
					return
				}
			}
		})
	}
}

// hold makes the relay withhold what the pusher sends from now on.
func (r *relay) hold(on bool) {
	r.mu.Lock()
	r.holding = on
	r.mu.Unlock()
}

// wholeFrame reports whether b is one whole frame.
func wholeFrame(b []byte) bool {
	h, err := parseHeader(b)
	return err == nil && len(b) == h.frameSize()
}

// heldBytes returns what connection i withholds.
func (r *relay) heldBytes(i int) []byte {
	r.mu.Lock()
	rc := r.conns[i]
	r.mu.Unlock()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return bytes.Clone(rc.held.Bytes())
}

// release delivers what connection i withheld so far.
func (r *relay) release(i int) {
	r.mu.Lock()
	rc := r.conns[i]
	r.mu.Unlock()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.server.Write(rc.held.Bytes())
	rc.held.Reset()
}

// captures returns what the pusher sent on each connection so far.
func (r *relay) captures() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]byte, 0, len(r.conns))
	for _, rc := range r.conns {
		rc.mu.Lock()
		out = append(out, bytes.Clone(rc.rec.Bytes()))
		rc.mu.Unlock()
	}
	return out
}

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	for _, rc := range r.conns {
		rc.client.Close()
		rc.server.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// replayTo sends data on a fresh connection to addr, as an attacker
// replaying a capture, and reads whatever comes back until the listener
// closes the connection or a few seconds pass.
func replayTo(t *testing.T, addr string, data []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	go c.Write(data)
	io.Copy(io.Discard, c)
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// receiver is one run of a director's listener on a fixed address: a
// restart is a new receiver on the same address.
type receiver struct {
	l      *Listener
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	got []Message
}

func startReceiver(t *testing.T, addr string, clock *fakeClock) *receiver {
	t.Helper()
	var l *Listener
	var err error
	// The previous run's socket may take a moment to be released.
	for range 50 {
		if l, err = NewListener(ListenerConfig{Self: "b", Key: testKey(t, 7), Addr: addr, Senders: []string{"a"}, Now: clock.Now}); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &receiver{l: l, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		l.Run(ctx, func(m Message) {
			r.mu.Lock()
			r.got = append(r.got, m)
			r.mu.Unlock()
		})
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *receiver) stop() {
	r.cancel()
	<-r.done
}

func (r *receiver) delivered() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.got...)
}

// TestReplayAcrossRestarts records a follower's frames on the sync link —
// a drain of a server and its undrain — and replays them: to the running
// receiver, after the receiver restarted, after the sender restarted (new
// epoch), and a day later. None is delivered. A frame withheld by the
// relay and delivered once the bound has passed is refused too, while one
// delivered at once is accepted.
func TestReplayAcrossRestarts(t *testing.T) {
	leakCheck(t)
	k := testKey(t, 7)
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rcv := startReceiver(t, addr, clock)
	rel := newRelay(t, addr)

	drain := replica.Edit{Pos: replica.EditPos{Epoch: 3, ID: 1}, Key: simKeys[2], Weight: 0}
	undrain := replica.Edit{Pos: replica.EditPos{Epoch: 3, ID: 2}, Key: simKeys[2], Weight: 10}
	pusher := func(epoch uint64, msgs ...Message) {
		t.Helper()
		p, stop := runPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{rel.addr()}, IOTimeout: 2 * time.Second, RetryInterval: 50 * time.Millisecond})
		defer stop()
		for _, m := range msgs {
			m.Epoch = epoch
			n := len(rcv.delivered())
			p.Publish(m)
			waitFor(t, 10*time.Second, "the genuine frame", func() bool { return len(rcv.delivered()) > n })
		}
	}
	// A follower's run at epoch 3: the drain, then the undrain.
	pusher(3, Message{Edits: []replica.Edit{drain}}, Message{Edits: []replica.Edit{undrain}})
	captured := rel.captures()
	if len(captured) == 0 || len(captured[0]) == 0 {
		t.Fatal("nothing captured")
	}
	replayAll := func(when string) {
		t.Helper()
		for _, c := range rel.captures() {
			replayTo(t, addr, c)
		}
		if got := rcv.delivered(); len(got) != 0 {
			t.Errorf("%s: %d replayed frames delivered (first: epoch %d seq %d, edits %v)", when, len(got), got[0].Epoch, got[0].Seq, got[0].Edits)
		}
	}
	// 1. To the receiver that got them: refused.
	n := len(rcv.delivered())
	for _, c := range captured {
		replayTo(t, addr, c)
	}
	if got := len(rcv.delivered()); got != n {
		t.Errorf("replay to the running receiver: %d frames delivered", got-n)
	}
	// 2. The receiver restarts.
	rcv.stop()
	rcv = startReceiver(t, addr, clock)
	replayAll("after the receiver restarted")
	// 3. The sender restarts (a new epoch); its new frame is accepted, its
	// old ones are not — neither by this receiver nor after another restart.
	pusher(4, Message{Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 4, ID: 1}, Key: simKeys[1], Weight: 0}}})
	rcv.stop()
	rcv = startReceiver(t, addr, clock)
	replayAll("after the sender and the receiver restarted")
	// 4. A day later, after another restart of the receiver.
	clock.Add(24 * time.Hour)
	rcv.stop()
	rcv = startReceiver(t, addr, clock)
	replayAll("a day later")

	// 5. A frame the relay withholds is accepted when delivered at once...
	rcv.stop()
	rcv = startReceiver(t, addr, clock)
	first := len(rel.captures())
	rel.hold(true)
	p, stop := runPusher(t, PusherConfig{Self: "a", Key: k, Peers: []string{rel.addr()}, IOTimeout: 5 * time.Second, RetryInterval: time.Hour})
	defer stop()
	p.Publish(Message{Epoch: 5, Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 5, ID: 1}, Key: simKeys[0], Weight: 0}}})
	waitFor(t, 10*time.Second, "the relay holds a frame", func() bool { return len(rel.captures()) > first && wholeFrame(rel.heldBytes(first)) })
	rel.release(first)
	waitFor(t, 10*time.Second, "the promptly released frame", func() bool { return len(rcv.delivered()) == 1 })
	// ... but refused when delivered a day after the receiver's challenge.
	p.Publish(Message{Epoch: 5, Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 5, ID: 2}, Key: simKeys[0], Weight: 10}}})
	idx := -1
	waitFor(t, 10*time.Second, "the relay holds another whole frame", func() bool {
		for i := first; i < len(rel.captures()); i++ {
			if wholeFrame(rel.heldBytes(i)) {
				idx = i
				return true
			}
		}
		return false
	})
	withheld := rel.heldBytes(idx)
	seq := binary.BigEndian.Uint64(withheld[30:38])
	expired := rcv.l.Counters().Rejected(ErrExpired)
	clock.Add(24 * time.Hour)
	rel.release(idx)
	waitFor(t, 10*time.Second, "the withheld frame refused", func() bool { return rcv.l.Counters().Rejected(ErrExpired) > expired })
	// The pusher sends the same state again, in a new frame answering a
	// new challenge: that one is fine. The withheld one never arrives.
	for _, m := range rcv.delivered() {
		if m.Seq == seq {
			t.Errorf("the frame withheld for a day was delivered: epoch %d seq %d, edits %v", m.Epoch, m.Seq, m.Edits)
		}
	}
}
