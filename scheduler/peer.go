package scheduler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"lvs-feedback/replica"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The transport is TCP. On a new connection the listener speaks first,
// with a hello carrying a fresh challenge:
//
//	0  4  "LVSC"
//	4  2  protocol version
//	6  16 challenge nonce
//
// The sender answers with a frame (message.go) that carries the nonce under
// its MACs. The receiver answers every complete frame with an
// acknowledgement, which also brings the challenge for the next frame:
//
//	0  1  verdict: 0 accepted, else 1 + the index of the rejection reason
//	1  8  epoch of the frame (as read from its header)
//	9  8  sequence of the frame
//	17 16 the next challenge nonce (zero after a rejection)
//	33 32 HMAC-SHA256 over "LVSA", verdict, epoch, sequence, next nonce
//
// so that the sender knows whether the peer accepted its state (and,
// when the acknowledgement does not verify, that the keys differ). Any
// rejection closes the connection.
const (
	helloMagic = "LVSC"
	helloLen   = 4 + 2 + ChallengeLen
	ackLen     = 1 + 8 + 8 + ChallengeLen + macLen
)

// Transport defaults.
const (
	DefaultDialTimeout   = 2 * time.Second
	DefaultIOTimeout     = 2 * time.Second
	DefaultRetryInterval = time.Second
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultFrameTimeout  = 5 * time.Second
	DefaultMaxConns      = 16
	// A connection has this long to deliver a frame header that
	// authenticates; until then it is unauthenticated.
	DefaultHandshakeTimeout = 3 * time.Second
	// Unauthenticated connections open at once, in all and per source
	// address (an IPv6 source counts by its /64).
	DefaultMaxUnauthenticated          = 32
	DefaultMaxUnauthenticatedPerSource = 4
)

// maxKnownSources bounds the source addresses a Listener remembers a peer
// authenticating from: enough for a few peers, each on more than one
// address or family.
const maxKnownSources = 8

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

func appendHello(b []byte, n Nonce) []byte {
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint16(b, Version)
	return append(b, n[:]...)
}

// parseHello returns the challenge nonce of a listener's hello.
func parseHello(b []byte) (Nonce, error) {
	var n Nonce
	if len(b) != helloLen || string(b[:4]) != helloMagic {
		return n, errors.New("the peer did not send a sync challenge: not an lvs-monitor, or one older than protocol version 2 (upgrade it)")
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != Version {
		return n, fmt.Errorf("the peer speaks sync protocol version %d, this director %d", v, Version)
	}
	copy(n[:], b[6:])
	return n, nil
}

func makeAck(key *Key, code byte, epoch, seq uint64, next Nonce) []byte {
	b := make([]byte, 0, ackLen)
	b = append(b, code)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, next[:]...)
	return key.macAppend(b, ackParts(code, epoch, seq, next))
}

// ackFields is a verified acknowledgement.
type ackFields struct {
	code       byte
	epoch, seq uint64
	next       Nonce
}

// parseAck checks an acknowledgement's MAC and returns its fields.
func parseAck(key *Key, b []byte) (ackFields, error) {
	if len(b) != ackLen {
		return ackFields{}, fmt.Errorf("acknowledgement of %d bytes, want %d", len(b), ackLen)
	}
	a := ackFields{code: b[0], epoch: binary.BigEndian.Uint64(b[1:9]), seq: binary.BigEndian.Uint64(b[9:17])}
	copy(a.next[:], b[17:17+ChallengeLen])
	if !key.equalMAC(b[17+ChallengeLen:], ackParts(a.code, a.epoch, a.seq, a.next)) {
		return ackFields{}, errors.New("the peer's acknowledgement failed authentication: do both directors use the same key file?")
	}
	return a, nil
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
	if !replica.ValidSender(cfg.Self) {
		return nil, fmt.Errorf("scheduler: director id %q: use 1 to %d letters, digits, '.', '_' or '-'", cfg.Self, replica.MaxSenderLen)
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
	// Sequence numbers continue from the clock, not from 1: a director
	// that restarted into the epoch of its previous run (its epoch file
	// lost and re-created) still sends above that run's numbers.
	if now := cfg.Now().UnixNano(); now > 0 {
		p.seq.Store(uint64(now))
	}
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
	var conn *pushConn
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

// pushConn is a connection to a peer's listener and the challenge its next
// frame must answer.
type pushConn struct {
	net.Conn
	greeted bool // the listener's hello has been read
	nonce   Nonce
}

// send delivers one message over *conn, dialling when there is no
// connection; a reused connection that fails is replaced once at once (the
// peer may have closed it while idle, or its challenge may have expired).
func (p *Pusher) send(ctx context.Context, conn **pushConn, pr *pushPeer, out *outgoing) error {
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
			*conn, fresh = &pushConn{Conn: c}, true
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
		c.Close()
		*conn = nil
		var rej rejectedError
		if errors.As(err, &rej) && rej.code != verdictCode(ErrExpired) {
			return err
		}
		if fresh || attempt > 0 || ctx.Err() != nil {
			return err
		}
	}
}

// rejectedError is a peer's authenticated verdict against a frame.
type rejectedError struct{ code byte }

func (e rejectedError) Error() string { return "peer rejected the frame: " + verdictText(e.code) }

// exchange reads the listener's hello on a new connection, then writes one
// frame answering the current challenge and reads its acknowledgement,
// which brings the next challenge — all within the deadline the caller set
// on c.
func (p *Pusher) exchange(c *pushConn, out *outgoing, payload []byte) error {
	if !c.greeted {
		var hello [helloLen]byte
		if _, err := io.ReadFull(c, hello[:]); err != nil {
			if isTimeout(err) {
				return fmt.Errorf("no challenge from the peer (an lvs-monitor of protocol version 1 sends none: upgrade it): %w", err)
			}
			return fmt.Errorf("read the peer's challenge (the peer closes connections over its bounds, see its log): %w", err)
		}
		n, err := parseHello(hello[:])
		if err != nil {
			return err
		}
		c.nonce, c.greeted = n, true
	}
	m := out.msg
	m.Version = Version
	m.Sender = p.cfg.Self
	m.Seq = p.seq.Add(1)
	m.SentAt = p.cfg.Now()
	frame, err := sealPayload(p.cfg.Key, &m, c.nonce, payload)
	if err != nil {
		return err
	}
	if _, err := c.Write(frame); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	var buf [ackLen]byte
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		return fmt.Errorf("read acknowledgement: %w", err)
	}
	ack, err := parseAck(p.cfg.Key, buf[:])
	if err != nil {
		return err
	}
	if ack.epoch != m.Epoch || ack.seq != m.Seq {
		return fmt.Errorf("acknowledgement for epoch %d sequence %d, sent %d/%d", ack.epoch, ack.seq, m.Epoch, m.Seq)
	}
	if ack.code != 0 {
		return rejectedError{code: ack.code}
	}
	c.nonce = ack.next
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
	// Senders, ChallengeLifetime, MaxAge, Now: see VerifierConfig.
	Senders           []string
	ChallengeLifetime time.Duration
	MaxAge            time.Duration
	Now               func() time.Time
	// A connection is unauthenticated until a frame header answering its
	// challenge has authenticated, which must happen within
	// HandshakeTimeout. At most MaxUnauthenticatedPerSource such
	// connections are open at once from one source address (an IPv6
	// source counts by its /64).
	//
	// A source is a peer's once a connection from it has authenticated
	// (the latest maxKnownSources such sources are kept), or when it is
	// in PeerSources. Its connections have slots of their own: others
	// cannot take them. The connections of all other sources share
	// MaxUnauthenticated slots. A new connection over a bound closes the
	// oldest unauthenticated one of its source, or else of the source
	// holding the most; that one must be older than a quarter of
	// HandshakeTimeout (else the new one is closed), so that a flood of
	// new connections cannot push out a peer in the middle of its
	// handshake — except when its source holds at least two more than
	// the new one's: then it goes at once, so that a few sources
	// reconnecting in a loop cannot keep a new source out.
	HandshakeTimeout            time.Duration
	MaxUnauthenticated          int
	MaxUnauthenticatedPerSource int
	// PeerSources are addresses the peers are expected to connect from
	// (the hosts of their listener addresses, usually): they are peers'
	// sources from the start, before any has authenticated.
	PeerSources []netip.Addr
	// MaxConns bounds authenticated connections; more are closed. A
	// sender's new connection replaces its older ones.
	MaxConns int
	// IdleTimeout closes an authenticated connection that sends nothing
	// for this long (or for ChallengeLifetime, if shorter); FrameTimeout
	// bounds the arrival of one frame once it has begun.
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

// ConnStats counts what a Listener did with connections.
type ConnStats struct {
	// Open now.
	Unauthenticated, Authenticated int
	// Of Unauthenticated, those from peers' sources (their own slots).
	FromPeerSources int
	// Evicted: unauthenticated connections closed to make room for newer
	// ones (MaxUnauthenticated, MaxUnauthenticatedPerSource).
	Evicted uint64
	// TurnedAway: new connections closed at once, over those bounds, when
	// the unauthenticated connections in the way were all too young to go.
	TurnedAway uint64
	// HandshakeTimeouts: connections closed because no authenticated
	// frame header came within HandshakeTimeout.
	HandshakeTimeouts uint64
	// OverMaxConns: authenticated connections closed over MaxConns.
	OverMaxConns uint64
}

// Listener receives peers' frames, verifies them and delivers the
// accepted messages.
type Listener struct {
	cfg ListenerConfig
	ln  net.Listener
	v   *Verifier
	log *slog.Logger
	lim logLimiter

	mu     sync.Mutex
	closed bool
	conns  map[*lconn]struct{}
	// slots bounds the connection goroutines: every unauthenticated and
	// authenticated connection the bounds allow, and as many again as
	// MaxUnauthenticated for closed ones whose goroutine is finishing.
	slots chan struct{}
	// Unauthenticated connections: of other sources, and of peers'.
	pending [2]pendingPool
	// Peers' sources: configured, and where a connection authenticated
	// (with when).
	peerSources map[netip.Prefix]bool
	known       map[netip.Prefix]time.Time
	nauth       int
	stats       ConnStats
	// live counts connections whose goroutine has not finished (closed
	// ones included, until their goroutine sees it); peakLive and
	// peakPend are the most there have been at once.
	live, peakLive, peakPend int
	senders                  map[string]SenderStatus
}

// pendingPool holds unauthenticated connections by source, oldest first.
type pendingPool struct {
	bySrc map[netip.Prefix][]*lconn
	n     int
}

// The pools of unauthenticated connections.
const (
	poolOthers = iota
	poolPeers
)

// lconn is one connection to the listener.
type lconn struct {
	c      net.Conn
	src    netip.Prefix
	since  time.Time
	pool   int       // while unauthenticated
	state  connState // guarded by Listener.mu
	sender string    // once authenticated
}

type connState int

const (
	connPending connState = iota // not authenticated yet
	connAuthed
	connGone
)

// NewListener verifies the configuration and opens the listening socket.
func NewListener(cfg ListenerConfig) (*Listener, error) {
	v, err := NewVerifier(VerifierConfig{Key: cfg.Key, Self: cfg.Self, Senders: cfg.Senders, ChallengeLifetime: cfg.ChallengeLifetime,
		MaxAge: cfg.MaxAge, Now: cfg.Now, Counters: cfg.Counters})
	if err != nil {
		return nil, err
	}
	cfg.ChallengeLifetime = v.cfg.ChallengeLifetime
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxUnauthenticated <= 0 {
		cfg.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if cfg.MaxUnauthenticatedPerSource <= 0 {
		cfg.MaxUnauthenticatedPerSource = DefaultMaxUnauthenticatedPerSource
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = DefaultFrameTimeout
	}
	peerSources := map[netip.Prefix]bool{}
	for _, a := range cfg.PeerSources {
		if !a.IsValid() {
			return nil, errors.New("scheduler: listener: an empty peer source address")
		}
		peerSources[sourceOfAddr(a)] = true
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
	maxGoroutines := 2*cfg.MaxUnauthenticated + (len(peerSources)+maxKnownSources)*cfg.MaxUnauthenticatedPerSource + cfg.MaxConns
	l := &Listener{cfg: cfg, ln: ln, v: v, log: log, conns: map[*lconn]struct{}{}, slots: make(chan struct{}, maxGoroutines),
		peerSources: peerSources, known: map[netip.Prefix]time.Time{}, senders: map[string]SenderStatus{}}
	for i := range l.pending {
		l.pending[i].bySrc = map[netip.Prefix][]*lconn{}
	}
	return l, nil
}

// Addr returns the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Verifier returns the listener's verifier.
func (l *Listener) Verifier() *Verifier { return l.v }

// Counters returns the accepted/rejected counters.
func (l *Listener) Counters() *Counters { return l.v.Counters() }

// Refused returns how many connections were closed over a bound
// (ConnStats: Evicted, TurnedAway and OverMaxConns).
func (l *Listener) Refused() uint64 {
	s := l.ConnStats()
	return s.Evicted + s.TurnedAway + s.OverMaxConns
}

// ConnStats returns the connection counts.
func (l *Listener) ConnStats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Unauthenticated, s.Authenticated = l.pending[poolOthers].n+l.pending[poolPeers].n, l.nauth
	s.FromPeerSources = l.pending[poolPeers].n
	return s
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
	for lc := range l.conns {
		lc.c.Close()
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
		// A slot for the connection's goroutine first: when closed
		// connections' goroutines have not finished yet, new connections
		// wait in the kernel's backlog rather than in this process.
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := l.ln.Accept()
		if err != nil {
			<-l.slots
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
		lc := l.track(c)
		if lc == nil {
			c.Close()
			<-l.slots
			continue
		}
		wg.Go(func() {
			defer func() { <-l.slots }()
			defer l.untrack(lc)
			l.serve(lc, deliver)
		})
	}
}

// sourceOf returns the source a connection counts against: its address,
// or the /64 of an IPv6 address.
func sourceOf(a net.Addr) netip.Prefix {
	var ip netip.Addr
	if t, ok := a.(*net.TCPAddr); ok {
		ip, _ = netip.AddrFromSlice(t.IP)
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr()
	}
	return sourceOfAddr(ip)
}

// sourceOfAddr returns the source of address ip (see sourceOf).
func sourceOfAddr(ip netip.Addr) netip.Prefix {
	ip = ip.WithZone("").Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits) // an invalid address gives the zero prefix: one shared source
	return p
}

// track registers a new, unauthenticated connection, closing an older
// unauthenticated one when a bound is reached. It returns nil when c must
// be closed instead: the listener is closed, or a bound is reached and the
// connections in the way are still in their first moments.
func (l *Listener) track(c net.Conn) *lconn {
	lc := &lconn{c: c, src: sourceOf(c.RemoteAddr()), since: l.cfg.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if l.isPeerSource(lc.src) {
		lc.pool = poolPeers
	}
	p := &l.pending[lc.pool]
	q := p.bySrc[lc.src]
	var victim *lconn
	fair := false
	switch {
	case len(q) >= l.cfg.MaxUnauthenticatedPerSource:
		victim = q[0]
	case lc.pool == poolOthers && p.n >= l.cfg.MaxUnauthenticated:
		// The oldest of the source holding the most: a peer with its one
		// connection is the last to go.
		for _, vq := range p.bySrc {
			if victim == nil || len(vq) > len(p.bySrc[victim.src]) ||
				len(vq) == len(p.bySrc[victim.src]) && vq[0].since.Before(victim.since) {
				victim = vq[0]
			}
		}
		fair = len(p.bySrc[victim.src]) > len(q)+1
	}
	if victim != nil && !fair && lc.since.Sub(victim.since) < l.cfg.HandshakeTimeout/4 {
		l.stats.TurnedAway++
		if l.lim.allow("evict") {
			l.log.Warn("sync listener: too many unauthenticated connections; closing a new one", "remote", c.RemoteAddr().String(),
				"max", l.cfg.MaxUnauthenticated, "max_per_source", l.cfg.MaxUnauthenticatedPerSource)
		}
		return nil
	}
	if victim != nil {
		l.evict(victim)
	}
	l.conns[lc] = struct{}{}
	p.bySrc[lc.src] = append(p.bySrc[lc.src], lc)
	p.n++
	l.live++
	npend := l.pending[poolOthers].n + l.pending[poolPeers].n
	l.peakPend, l.peakLive = max(l.peakPend, npend), max(l.peakLive, l.live)
	return lc
}

// evict closes an unauthenticated connection over a bound. Call with l.mu
// held.
func (l *Listener) evict(lc *lconn) {
	l.remove(lc)
	lc.c.Close()
	l.stats.Evicted++
	if l.lim.allow("evict") {
		l.log.Warn("sync listener: too many unauthenticated connections; closing the oldest", "remote", lc.c.RemoteAddr().String(),
			"max", l.cfg.MaxUnauthenticated, "max_per_source", l.cfg.MaxUnauthenticatedPerSource)
	}
}

func (l *Listener) isPeerSource(src netip.Prefix) bool {
	_, ok := l.known[src]
	return ok || l.peerSources[src]
}

// learn makes src, where a connection has just authenticated, a peer's
// source. Over maxKnownSources, the one that authenticated longest ago is
// forgotten, and its unauthenticated connections closed (they were
// admitted to slots it no longer has). Call with l.mu held.
func (l *Listener) learn(src netip.Prefix, sender string) {
	if l.peerSources[src] {
		return
	}
	_, ok := l.known[src]
	l.known[src] = l.cfg.Now()
	if ok {
		return
	}
	l.log.Info("sync listener: a peer authenticated from a new address; its connections get slots of their own", "source", src.String(), "sender", sender)
	if len(l.known) <= maxKnownSources {
		return
	}
	var oldest netip.Prefix
	for s, t := range l.known {
		if !oldest.IsValid() || t.Before(l.known[oldest]) {
			oldest = s
		}
	}
	delete(l.known, oldest)
	for _, o := range slices.Clone(l.pending[poolPeers].bySrc[oldest]) {
		l.evict(o)
	}
}

// remove takes lc out of the counts. Call with l.mu held; it is
// idempotent.
func (l *Listener) remove(lc *lconn) {
	switch lc.state {
	case connPending:
		p := &l.pending[lc.pool]
		q := p.bySrc[lc.src]
		if i := slices.Index(q, lc); i >= 0 {
			q = slices.Delete(q, i, i+1)
		}
		if len(q) == 0 {
			delete(p.bySrc, lc.src)
		} else {
			p.bySrc[lc.src] = q
		}
		p.n--
	case connAuthed:
		l.nauth--
	}
	lc.state = connGone
	delete(l.conns, lc)
}

func (l *Listener) untrack(lc *lconn) {
	lc.c.Close()
	l.mu.Lock()
	l.remove(lc)
	l.live--
	l.mu.Unlock()
}

// promote moves lc, whose first frame header authenticated as sender, out
// of the unauthenticated pool. The sender's older connections are closed:
// a pusher uses one at a time. It returns false when lc must be closed
// (evicted meanwhile, or MaxConns reached).
func (l *Listener) promote(lc *lconn, sender string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.state != connPending {
		return false
	}
	for o := range l.conns {
		if o.state == connAuthed && o.sender == sender {
			l.remove(o)
			o.c.Close()
		}
	}
	if l.nauth >= l.cfg.MaxConns {
		l.stats.OverMaxConns++
		if l.lim.allow("maxconns") {
			l.log.Warn("sync listener: too many authenticated connections; closing a new one", "remote", lc.c.RemoteAddr().String(), "max", l.cfg.MaxConns)
		}
		return false
	}
	l.remove(lc)
	lc.state, lc.sender = connAuthed, sender
	l.conns[lc] = struct{}{}
	l.nauth++
	l.learn(lc.src, sender)
	return true
}

// serve greets a connection with a challenge and reads frames from it
// until it ends or a frame is rejected. Until a frame header
// authenticates, it reads at most maxHeader bytes, within
// HandshakeTimeout of the connection's arrival.
func (l *Listener) serve(lc *lconn, deliver func(Message)) {
	c := lc.c
	remote := c.RemoteAddr().String()
	handshake := time.Now().Add(l.cfg.HandshakeTimeout)
	ch := NewChallenge(l.cfg.Now())
	c.SetWriteDeadline(handshake)
	if _, err := c.Write(appendHello(nil, ch.Nonce)); err != nil {
		return
	}
	authed := false
	var hdr [maxHeader]byte
	for {
		// Waiting for a frame: the handshake deadline, then the idle
		// timeout (never past the challenge's lifetime); once a frame has
		// begun, it must arrive entirely within the frame timeout.
		if authed {
			c.SetReadDeadline(time.Now().Add(min(l.cfg.IdleTimeout, l.cfg.ChallengeLifetime)))
		} else {
			c.SetReadDeadline(handshake)
		}
		if _, err := io.ReadFull(c, hdr[:1]); err != nil {
			if !authed && isTimeout(err) {
				l.handshakeTimeout(remote)
			}
			return // closed, or idle: not an error
		}
		if authed {
			c.SetReadDeadline(time.Now().Add(l.cfg.FrameTimeout))
		}
		if _, err := io.ReadFull(c, hdr[1:fixedHeader]); err != nil {
			l.reject(remote, fmt.Errorf("%w: frame header: %w", ErrTruncated, err))
			return
		}
		n, err := headerSize(hdr[:fixedHeader])
		if err != nil {
			l.ack(c, hdr[:fixedHeader], err, Nonce{})
			l.reject(remote, err)
			return
		}
		if _, err := io.ReadFull(c, hdr[fixedHeader:n]); err != nil {
			l.reject(remote, fmt.Errorf("%w: frame header: %w", ErrTruncated, err))
			return
		}
		size, err := l.v.VerifyHeader(hdr[:n], ch)
		if err != nil {
			l.ack(c, hdr[:n], err, Nonce{})
			l.logReject(remote, err)
			return
		}
		if !authed {
			if !l.promote(lc, string(hdr[fixedHeader:n-macLen])) {
				return
			}
			authed = true
		}
		// The header authenticated: the rest of the frame is worth room.
		c.SetReadDeadline(time.Now().Add(l.cfg.FrameTimeout))
		frame := make([]byte, size)
		copy(frame, hdr[:n])
		if _, err := io.ReadFull(c, frame[n:]); err != nil {
			l.reject(remote, fmt.Errorf("%w: frame body: %w", ErrTruncated, err))
			return
		}
		m, err := l.v.Verify(frame, ch)
		var next Nonce
		if err == nil {
			ch = NewChallenge(l.cfg.Now())
			next = ch.Nonce
		}
		l.ack(c, frame, err, next)
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

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (l *Listener) handshakeTimeout(remote string) {
	l.mu.Lock()
	l.stats.HandshakeTimeouts++
	l.mu.Unlock()
	if l.lim.allow("handshake") {
		l.log.Warn("sync listener: connection closed: no authenticated frame within the handshake timeout", "remote", remote, "timeout", l.cfg.HandshakeTimeout)
	}
}

// reject counts and logs a frame rejected before it reached the verifier.
func (l *Listener) reject(remote string, err error) {
	l.v.Counters().count(err)
	l.logReject(remote, err)
}

// ack sends the verdict on a frame, echoing the epoch and sequence of its
// header when there is one, with the next challenge after an acceptance.
func (l *Listener) ack(c net.Conn, frame []byte, verdict error, next Nonce) {
	var epoch, seq uint64
	if len(frame) >= 38 {
		epoch = binary.BigEndian.Uint64(frame[22:30])
		seq = binary.BigEndian.Uint64(frame[30:38])
	}
	c.SetWriteDeadline(time.Now().Add(l.cfg.FrameTimeout))
	c.Write(makeAck(l.cfg.Key, verdictCode(verdict), epoch, seq, next))
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
