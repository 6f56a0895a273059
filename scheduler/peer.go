package scheduler

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The transport is TCP. Each frame is sent as a 4-byte big-endian length
// followed by the frame; the receiver answers every complete frame with an
// acknowledgement:
//
//	0  1  verdict: 0 accepted, else 1 + the index of the rejection reason
//	1  8  epoch of the frame (as read from its header)
//	9  8  sequence of the frame
//	17 32 HMAC-SHA256 over "LVSA", verdict, epoch, sequence
//
// so that the sender knows whether the peer accepted its state (and,
// when the acknowledgement does not verify, that the keys differ). Any
// rejection closes the connection.
const ackLen = 1 + 8 + 8 + macLen

// Transport defaults.
const (
	DefaultDialTimeout   = 2 * time.Second
	DefaultIOTimeout     = 2 * time.Second
	DefaultRetryInterval = time.Second
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultFrameTimeout  = 5 * time.Second
	DefaultMaxConns      = 16
)

func verdictCode(err error) byte {
	if err == nil {
		return 0
	}
	for i, r := range reasons {
		if errors.Is(err, r.err) {
			return byte(1 + i)
		}
	}
	return 255
}

func verdictText(code byte) string {
	if code == 0 {
		return "accepted"
	}
	if i := int(code) - 1; i < len(reasons) {
		return reasons[i].err.Error()
	}
	return "rejected"
}

func makeAck(key *Key, code byte, epoch, seq uint64) []byte {
	b := make([]byte, 0, ackLen)
	b = append(b, code)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = binary.BigEndian.AppendUint64(b, seq)
	return key.macAppend(b, ackParts(code, epoch, seq))
}

// PeerStatus is what a Pusher knows about one peer.
type PeerStatus struct {
	Addr string
	// LastOK is when the peer last acknowledged a frame as accepted.
	LastOK      time.Time
	LastAttempt time.Time
	// LastError is why the latest attempt failed; empty after a success.
	LastError string
	// Failures counts consecutive failed attempts.
	Failures int
	Sent     uint64 // frames accepted by the peer
	Failed   uint64 // attempts that failed
	// Superseded counts snapshots replaced by a newer one before they
	// could be sent (the mailbox holds only the latest).
	Superseded uint64
}

// Unreachable reports whether the peer has not accepted a frame for longer
// than after (or never has).
func (s PeerStatus) Unreachable(now time.Time, after time.Duration) bool {
	return s.LastOK.IsZero() || now.Sub(s.LastOK) > after
}

// PusherConfig configures a Pusher.
type PusherConfig struct {
	Self  string   // this director's id
	Key   *Key     // the shared key
	Peers []string // peer listener addresses, "host:port"
	// DialTimeout bounds a connection attempt, IOTimeout the write of one
	// frame and the read of its acknowledgement, RetryInterval the wait
	// before a failed push is tried again with the latest snapshot.
	DialTimeout   time.Duration
	IOTimeout     time.Duration
	RetryInterval time.Duration
	// Dial opens a connection (default: net.Dialer over TCP). Tests use it
	// to dial from inside a network namespace.
	Dial   func(ctx context.Context, addr string) (net.Conn, error)
	Logger *slog.Logger
	Now    func() time.Time
}

// Pusher sends this director's messages to every peer. Publish never
// blocks: each peer has its own goroutine and a one-slot mailbox holding
// the latest message; an older one not yet sent is dropped. A failed push
// is retried with the latest message every RetryInterval.
type Pusher struct {
	cfg   PusherConfig
	log   *slog.Logger
	seq   atomic.Uint64
	peers []*pushPeer
}

type pushPeer struct {
	addr   string
	notify chan struct{}

	mu     sync.Mutex
	latest *outgoing
	status PeerStatus
}

// outgoing is one published message, shared by the peers; its payload is
// encoded once, by the first peer that sends it.
type outgoing struct {
	msg     Message
	once    sync.Once
	payload []byte
	err     error
}

func (o *outgoing) encode() ([]byte, error) {
	o.once.Do(func() {
		m := o.msg
		m.Version = Version
		o.payload, o.err = encodePayload(&m)
	})
	return o.payload, o.err
}

// NewPusher returns a Pusher; call Run to start sending.
func NewPusher(cfg PusherConfig) (*Pusher, error) {
	if cfg.Key == nil {
		return nil, errors.New("scheduler: pusher needs a key")
	}
	if !ValidSender(cfg.Self) {
		return nil, fmt.Errorf("scheduler: director id %q: use 1 to %d letters, digits, '.', '_' or '-'", cfg.Self, MaxSenderLen)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IOTimeout <= 0 {
		cfg.IOTimeout = DefaultIOTimeout
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.Dial == nil {
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pusher{cfg: cfg, log: log}
	seen := map[string]bool{}
	for _, a := range cfg.Peers {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("scheduler: peer address %q: %w", a, err)
		}
		if seen[a] {
			return nil, fmt.Errorf("scheduler: peer %s listed twice", a)
		}
		seen[a] = true
		p.peers = append(p.peers, &pushPeer{addr: a, notify: make(chan struct{}, 1), status: PeerStatus{Addr: a}})
	}
	return p, nil
}

// Publish hands m to every peer's mailbox and returns at once: its cost
// does not depend on the size of the snapshot or on the peers. The Pusher
// fills in Sender, Version, Seq and SentAt. Publish takes ownership of m's
// slices: the caller must not modify them afterwards (build a new snapshot
// each time, or pass m.Clone()).
func (p *Pusher) Publish(m Message) {
	out := &outgoing{msg: m}
	for _, pr := range p.peers {
		pr.mu.Lock()
		if pr.latest != nil {
			pr.status.Superseded++
		}
		pr.latest = out
		pr.mu.Unlock()
		select {
		case pr.notify <- struct{}{}:
		default:
		}
	}
}

// Status returns each peer's status, in configuration order.
func (p *Pusher) Status() []PeerStatus {
	out := make([]PeerStatus, 0, len(p.peers))
	for _, pr := range p.peers {
		pr.mu.Lock()
		out = append(out, pr.status)
		pr.mu.Unlock()
	}
	return out
}

// Run sends until ctx ends, then closes its connections and returns.
func (p *Pusher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, pr := range p.peers {
		wg.Go(func() { p.runPeer(ctx, pr) })
	}
	wg.Wait()
	return nil
}

func (p *Pusher) runPeer(ctx context.Context, pr *pushPeer) {
	var conn net.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	wasDown := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-pr.notify:
		case <-retry.C:
		}
		pr.mu.Lock()
		out := pr.latest
		pr.latest = nil
		pr.mu.Unlock()
		if out == nil {
			continue
		}
		err := p.send(ctx, &conn, pr, out)
		if errors.Is(err, ErrInvalid) {
			// Our own bug, not the peer's: say so, and do not retry it.
			p.log.Error("sync message not sent", "peer", pr.addr, "error", err)
			continue
		}
		now := p.cfg.Now()
		pr.mu.Lock()
		pr.status.LastAttempt = now
		if err == nil {
			pr.status.LastOK, pr.status.LastError, pr.status.Failures = now, "", 0
			pr.status.Sent++
		} else {
			pr.status.LastError = err.Error()
			pr.status.Failures++
			pr.status.Failed++
			// Keep the message for the retry unless a newer one came.
			if pr.latest == nil {
				pr.latest = out
			}
		}
		pr.mu.Unlock()
		switch {
		case err == nil && wasDown:
			p.log.Info("sync peer reachable again", "peer", pr.addr)
			wasDown = false
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !wasDown:
			p.log.Warn("sync peer unreachable; retrying with the latest state", "peer", pr.addr, "error", err)
			wasDown = true
		case err != nil:
			p.log.Debug("sync push failed", "peer", pr.addr, "error", err)
		}
		if err != nil {
			retry.Reset(p.cfg.RetryInterval)
		}
	}
}

// send delivers one message over *conn, dialling when there is no
// connection; a reused connection that fails is replaced once at once (the
// peer may have closed it while idle).
func (p *Pusher) send(ctx context.Context, conn *net.Conn, pr *pushPeer, out *outgoing) error {
	payload, err := out.encode()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		fresh := false
		if *conn == nil {
			dctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
			c, err := p.cfg.Dial(dctx, pr.addr)
			cancel()
			if err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			*conn, fresh = c, true
		}
		// Shutting down interrupts an exchange in progress.
		c := *conn
		err := c.SetDeadline(time.Now().Add(p.cfg.IOTimeout))
		if err == nil {
			stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
			err = p.exchange(c, out, payload)
			stop()
		}
		if err == nil {
			return nil
		}
		(*conn).Close()
		*conn = nil
		var rej rejectedError
		if fresh || attempt > 0 || errors.As(err, &rej) || ctx.Err() != nil {
			return err
		}
	}
}

// rejectedError is a peer's authenticated verdict against a frame.
type rejectedError struct{ verdict string }

func (e rejectedError) Error() string { return "peer rejected the frame: " + e.verdict }

// exchange writes one frame and reads its acknowledgement, within the
// deadline the caller set on c.
func (p *Pusher) exchange(c net.Conn, out *outgoing, payload []byte) error {
	m := out.msg
	m.Version = Version
	m.Sender = p.cfg.Self
	m.Seq = p.seq.Add(1)
	m.SentAt = p.cfg.Now()
	frame, err := sealPayload(p.cfg.Key, &m, payload)
	if err != nil {
		return err
	}
	buf := make([]byte, prefixSize, prefixSize+len(frame))
	binary.BigEndian.PutUint32(buf, uint32(len(frame)))
	if _, err := c.Write(append(buf, frame...)); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	var ack [ackLen]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		return fmt.Errorf("read acknowledgement: %w", err)
	}
	code := ack[0]
	epoch := binary.BigEndian.Uint64(ack[1:9])
	seq := binary.BigEndian.Uint64(ack[9:17])
	if !p.cfg.Key.equalMAC(ack[17:], ackParts(code, epoch, seq)) {
		return errors.New("the peer's acknowledgement failed authentication: do both directors use the same key file?")
	}
	if epoch != m.Epoch || seq != m.Seq {
		return fmt.Errorf("acknowledgement for epoch %d sequence %d, sent %d/%d", epoch, seq, m.Epoch, m.Seq)
	}
	if code != 0 {
		return rejectedError{verdict: verdictText(code)}
	}
	return nil
}

// ListenerConfig configures a Listener.
type ListenerConfig struct {
	Self string // this director's id
	Key  *Key
	// Addr is the address to listen on, "host:port". Ignored when Listener
	// is set (tests pass one opened inside a network namespace).
	Addr     string
	Listener net.Listener
	// Senders, MaxAge, Now: see VerifierConfig.
	Senders []string
	MaxAge  time.Duration
	Now     func() time.Time
	// MaxConns bounds concurrent connections; more are closed at once.
	MaxConns int
	// IdleTimeout closes a connection that sends nothing for this long;
	// FrameTimeout bounds the arrival of one frame once it has begun.
	IdleTimeout  time.Duration
	FrameTimeout time.Duration
	Logger       *slog.Logger
	Counters     *Counters
}

// SenderStatus is what a Listener knows about one sender.
type SenderStatus struct {
	ID           string
	Remote       string // address of the latest accepted connection
	LastAccepted time.Time
	Epoch        uint64
	Seq          uint64
	Writer       bool
}

// Listener receives peers' frames, verifies them and delivers the
// accepted messages.
type Listener struct {
	cfg ListenerConfig
	ln  net.Listener
	v   *Verifier
	log *slog.Logger
	lim logLimiter

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{}
	senders map[string]SenderStatus
	refused uint64
}

// NewListener verifies the configuration and opens the listening socket.
func NewListener(cfg ListenerConfig) (*Listener, error) {
	v, err := NewVerifier(VerifierConfig{Key: cfg.Key, Self: cfg.Self, Senders: cfg.Senders, MaxAge: cfg.MaxAge, Now: cfg.Now, Counters: cfg.Counters})
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = DefaultFrameTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln := cfg.Listener
	if ln == nil {
		ln, err = net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("scheduler: listen for peers: %w", err)
		}
	}
	return &Listener{cfg: cfg, ln: ln, v: v, log: log, conns: map[net.Conn]struct{}{}, senders: map[string]SenderStatus{}}, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Verifier returns the listener's verifier (its replay window can be
// persisted and restored).
func (l *Listener) Verifier() *Verifier { return l.v }

// Counters returns the accepted/rejected counters.
func (l *Listener) Counters() *Counters { return l.v.Counters() }

// Refused returns how many connections were closed because MaxConns were
// already open.
func (l *Listener) Refused() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// Senders returns what is known of each sender that got a frame accepted,
// sorted by id.
func (l *Listener) Senders() []SenderStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SenderStatus, 0, len(l.senders))
	for _, s := range l.senders {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b SenderStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Close closes the listening socket and every connection. Run calls it
// when its context ends.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	err := l.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Run accepts connections until ctx ends, then closes everything and
// returns once every connection goroutine has finished. deliver is called
// for each accepted message, from the connection's goroutine, after the
// acknowledgement has been sent; it must not block (hand the message to an
// Inbox). Messages of one sender are delivered in (epoch, sequence) order.
func (l *Listener) Run(ctx context.Context, deliver func(Message)) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			l.log.Warn("sync listener: accept", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !l.track(c) {
			c.Close()
			continue
		}
		wg.Go(func() {
			defer l.untrack(c)
			l.serve(c, deliver)
		})
	}
}

// track registers c; it returns false when c must be closed at once.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if len(l.conns) >= l.cfg.MaxConns {
		l.refused++
		if l.lim.allow("maxconns") {
			l.log.Warn("sync listener: too many connections; closing a new one", "remote", c.RemoteAddr().String(), "max", l.cfg.MaxConns)
		}
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	c.Close()
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// serve reads frames from one connection until it ends or a frame is
// rejected.
func (l *Listener) serve(c net.Conn, deliver func(Message)) {
	remote := c.RemoteAddr().String()
	var prefix [prefixSize]byte
	for {
		// Waiting for a frame: the idle timeout; once one has begun, it
		// must arrive entirely within the frame timeout.
		c.SetReadDeadline(time.Now().Add(l.cfg.IdleTimeout))
		if _, err := io.ReadFull(c, prefix[:1]); err != nil {
			return // closed, or idle: not an error
		}
		c.SetReadDeadline(time.Now().Add(l.cfg.FrameTimeout))
		if _, err := io.ReadFull(c, prefix[1:]); err != nil {
			l.reject(c, remote, nil, fmt.Errorf("%w: length prefix: %w", ErrTruncated, err))
			return
		}
		n := binary.BigEndian.Uint32(prefix[:])
		if n > MaxFrameSize {
			l.reject(c, remote, nil, fmt.Errorf("%w: announced %d bytes, the bound is %d", ErrTooLarge, n, MaxFrameSize))
			return
		}
		// Grow the buffer as bytes arrive: an announced size costs nothing
		// until it is actually sent.
		var buf bytes.Buffer
		buf.Grow(int(min(n, 64<<10)))
		if _, err := io.CopyN(&buf, c, int64(n)); err != nil {
			l.reject(c, remote, buf.Bytes(), fmt.Errorf("%w: %d of %d bytes: %w", ErrTruncated, buf.Len(), n, err))
			return
		}
		frame := buf.Bytes()
		m, err := l.v.Verify(frame)
		l.ack(c, frame, err)
		if err != nil {
			l.logReject(remote, err)
			return
		}
		l.mu.Lock()
		l.senders[m.Sender] = SenderStatus{ID: m.Sender, Remote: remote, LastAccepted: l.cfg.Now(), Epoch: m.Epoch, Seq: m.Seq, Writer: m.Writer}
		l.mu.Unlock()
		deliver(m)
	}
}

// reject counts and logs a frame rejected before it reached the verifier.
func (l *Listener) reject(c net.Conn, remote string, frame []byte, err error) {
	l.v.Counters().count(err)
	if errors.Is(err, ErrTooLarge) {
		l.ack(c, frame, err)
	}
	l.logReject(remote, err)
}

// ack sends the verdict on a frame, echoing the epoch and sequence of its
// header when there is one.
func (l *Listener) ack(c net.Conn, frame []byte, verdict error) {
	var epoch, seq uint64
	if len(frame) >= 22 {
		epoch = binary.BigEndian.Uint64(frame[6:14])
		seq = binary.BigEndian.Uint64(frame[14:22])
	}
	c.SetWriteDeadline(time.Now().Add(l.cfg.FrameTimeout))
	c.Write(makeAck(l.cfg.Key, verdictCode(verdict), epoch, seq))
}

func (l *Listener) logReject(remote string, err error) {
	label := RejectReason(err)
	if n, ok := l.lim.allowCount(label); ok {
		l.log.Warn("sync frame rejected", "remote", remote, "reason", label, "error", err, "suppressed_since_last", n)
	}
}

// logLimiter lets one log line per key through per second, counting the
// others.
type logLimiter struct {
	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]uint64
}

func (l *logLimiter) allow(key string) bool {
	_, ok := l.allowCount(key)
	return ok
}

func (l *logLimiter) allowCount(key string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.suppressed = map[string]time.Time{}, map[string]uint64{}
	}
	now := time.Now()
	if t, ok := l.last[key]; ok && now.Sub(t) < time.Second {
		l.suppressed[key]++
		return 0, false
	}
	n := l.suppressed[key]
	l.last[key], l.suppressed[key] = now, 0
	return n, true
}

// Inbox keeps the latest accepted message of each sender until the monitor
// takes them: pass its Put as a Listener's deliver function and select on
// Ready in the monitor's loop.
type Inbox struct {
	mu    sync.Mutex
	msgs  map[string]Message
	ready chan struct{}
}

// NewInbox returns an empty inbox.
func NewInbox() *Inbox {
	return &Inbox{msgs: map[string]Message{}, ready: make(chan struct{}, 1)}
}

// Put stores m, replacing an older message of the same sender.
func (b *Inbox) Put(m Message) {
	b.mu.Lock()
	old, ok := b.msgs[m.Sender]
	if !ok || m.Epoch > old.Epoch || (m.Epoch == old.Epoch && m.Seq > old.Seq) {
		b.msgs[m.Sender] = m
	}
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled when a message has been put.
func (b *Inbox) Ready() <-chan struct{} { return b.ready }

// Take removes and returns the stored messages, sorted by sender.
func (b *Inbox) Take() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Message, 0, len(b.msgs))
	for _, m := range b.msgs {
		out = append(out, m)
	}
	clear(b.msgs)
	slices.SortFunc(out, func(a, b Message) int { return strings.Compare(a.Sender, b.Sender) })
	return out
}
