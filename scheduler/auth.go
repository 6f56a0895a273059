package scheduler

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"lvs-feedback/replica"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MinKeyLen is the shortest accepted key, in bytes.
const MinKeyLen = 32

// maxKeyFile bounds the size of a key file.
const maxKeyFile = 4096

// Key is the shared secret of the directors. It never prints: every
// formatting verb, slog and text/JSON marshalling show "[redacted]".
type Key struct {
	b []byte
}

const redacted = "[redacted]"

// NewKey returns a key holding a copy of b, which must be at least
// MinKeyLen bytes long.
func NewKey(b []byte) (*Key, error) {
	if len(b) < MinKeyLen {
		return nil, fmt.Errorf("scheduler: key of %d bytes is too short: need at least %d", len(b), MinKeyLen)
	}
	return &Key{b: slices.Clone(b)}, nil
}

// LoadKey reads the key file at path. The file must be a regular file
// owned by the user running this process, readable by that user only (mode
// 0600 or stricter), and hold at least MinKeyLen bytes. Its bytes are the
// key, exactly: every director must have an identical file. Errors name the
// file and what is wrong with it, never its content.
func LoadKey(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sync key file: %w", err)
	}
	defer f.Close()
	// Check the file actually opened (not the path, which could be swapped).
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("sync key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("sync key file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("sync key file %s has mode %04o: it must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if euid := os.Geteuid(); int(st.Uid) != euid {
			return nil, fmt.Errorf("sync key file %s is owned by uid %d, not by the user running lvs-monitor (uid %d)", path, st.Uid, euid)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("sync key file %s: %w", path, err)
	}
	defer clear(b)
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("sync key file %s is larger than %d bytes: not a key file", path, maxKeyFile)
	}
	if len(b) < MinKeyLen {
		return nil, fmt.Errorf("sync key file %s holds %d bytes, need at least %d (create one with: head -c 32 /dev/urandom > %s)", path, len(b), MinKeyLen, path)
	}
	return &Key{b: slices.Clone(b)}, nil
}

// String, GoString, Format, LogValue and MarshalText all show "[redacted]".
func (k *Key) String() string               { return redacted }
func (k *Key) GoString() string             { return redacted }
func (k *Key) Format(f fmt.State, _ rune)   { io.WriteString(f, redacted) }
func (k *Key) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (k *Key) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (k *Key) mac(parts ...[]byte) []byte   { return k.macAppend(nil, parts...) }

// equalMAC compares got with the MAC of parts in constant time.
func (k *Key) equalMAC(got []byte, parts ...[]byte) bool {
	return hmac.Equal(got, k.mac(parts...))
}

func (k *Key) macAppend(dst []byte, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, k.b)
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(dst)
}

// Rejection reasons. Verify returns an error wrapping exactly one of them;
// test with errors.Is. Each is counted separately (Counters).
var (
	ErrTooLarge      = errors.New("frame larger than the maximum size")
	ErrTruncated     = errors.New("truncated frame")
	ErrMalformed     = errors.New("malformed frame")
	ErrBadMAC        = errors.New("authentication failed: wrong key or altered frame")
	ErrVersion       = errors.New("unsupported protocol version")
	ErrOwnSender     = errors.New("frame carries this director's own id: reflected, or two directors share an id")
	ErrUnknownSender = errors.New("sender is not a configured peer")
	ErrStaleEpoch    = errors.New("epoch older than the sender's last accepted epoch")
	ErrReplay        = errors.New("sequence number not above the sender's last accepted one: replayed or reordered")
	ErrExpired       = errors.New("frame too old (or from the future)")
	ErrChallenge     = errors.New("frame answers another challenge than this connection's: a replayed capture")
)

// reasons lists the rejection reasons with their metric label, in the
// order of the Counters fields.
var reasons = []struct {
	err   error
	label string
}{
	{ErrTooLarge, "too_large"},
	{ErrTruncated, "truncated"},
	{ErrMalformed, "malformed"},
	{ErrBadMAC, "bad_mac"},
	{ErrVersion, "version"},
	{ErrOwnSender, "own_sender"},
	{ErrUnknownSender, "unknown_sender"},
	{ErrStaleEpoch, "stale_epoch"},
	{ErrReplay, "replay"},
	{ErrExpired, "expired"},
	{ErrChallenge, "challenge"},
}

// numReasons is len(reasons).
const numReasons = 11

// RejectReason returns the metric label of a rejection error ("bad_mac",
// "replay", ...), or "" when err is not a rejection.
func RejectReason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return ""
}

// Counters counts accepted frames and rejected ones per reason. The zero
// value is ready; it is safe for concurrent use.
type Counters struct {
	accepted atomic.Uint64
	rejected [numReasons]atomic.Uint64 // indexed like reasons
}

// Accepted returns how many frames were accepted.
func (c *Counters) Accepted() uint64 { return c.accepted.Load() }

// Rejected returns how many frames were rejected for the reason err (one
// of the Err values above).
func (c *Counters) Rejected(err error) uint64 {
	for i, r := range reasons {
		if errors.Is(err, r.err) {
			return c.rejected[i].Load()
		}
	}
	return 0
}

// Snapshot returns every count by label: "accepted" and each reason's label.
func (c *Counters) Snapshot() map[string]uint64 {
	m := map[string]uint64{"accepted": c.accepted.Load()}
	for i, r := range reasons {
		m[r.label] = c.rejected[i].Load()
	}
	return m
}

// count records the outcome of one frame.
func (c *Counters) count(err error) {
	if err == nil {
		c.accepted.Add(1)
		return
	}
	for i, r := range reasons {
		if errors.Is(err, r.err) {
			c.rejected[i].Add(1)
			return
		}
	}
}

// Seal returns m as a frame answering the receiver's challenge nonce,
// authenticated with key. It fills in Version and checks the content and
// the sender id; m.Sender, Epoch, Seq and SentAt are sent as they are.
func Seal(key *Key, m Message, nonce Nonce) ([]byte, error) {
	m.Version = Version
	payload, err := encodePayload(&m)
	if err != nil {
		return nil, err
	}
	return sealPayload(key, &m, nonce, payload)
}

// sealPayload frames an already encoded payload.
func sealPayload(key *Key, m *Message, nonce Nonce, payload []byte) ([]byte, error) {
	if !replica.ValidSender(m.Sender) {
		return nil, fmt.Errorf("%w: sender id %q: use 1 to %d letters, digits, '.', '_' or '-'", ErrInvalid, m.Sender, replica.MaxSenderLen)
	}
	hdr := fixedHeader + len(m.Sender) + macLen
	size := hdr + len(payload) + macLen
	if size > MaxFrameSize {
		return nil, fmt.Errorf("%w: %w: %d bytes, the bound is %d", ErrInvalid, ErrTooLarge, size, MaxFrameSize)
	}
	b := make([]byte, 0, size)
	b = appendHeader(b, m, nonce, len(payload))
	b = key.macAppend(b, []byte(headerMACTag), b)
	b = append(b, payload...)
	return key.macAppend(b, b), nil
}

// Challenge is what a frame must answer: a random nonce the receiver sent
// on the connection, and when it did, on the receiver's clock. Both MACs of
// a frame cover the nonce, so a frame is accepted only on the connection
// it was made for, once, and within ChallengeLifetime of the challenge.
type Challenge struct {
	Nonce  Nonce
	Issued time.Time
}

// NewChallenge returns a fresh random challenge issued at now.
func NewChallenge(now time.Time) Challenge {
	c := Challenge{Issued: now}
	rand.Read(c.Nonce[:]) // never fails (it aborts the program instead)
	return c
}

// Position is the last accepted (epoch, sequence) of a sender.
type Position struct {
	Epoch uint64
	Seq   uint64
}

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	Key  *Key
	Self string // this director's id: frames carrying it are rejected
	// Senders, if not empty, lists the peer ids accepted; others are
	// rejected (ErrUnknownSender).
	Senders []string
	// ChallengeLifetime bounds the time between a challenge and the
	// arrival of the frame answering it, on this director's clock
	// (default DefaultChallengeLifetime): no older frame is accepted
	// (ErrExpired), whatever the sender's clock says.
	ChallengeLifetime time.Duration
	// MaxAge, if positive, also rejects frames whose send time is further
	// than this from the local clock (ErrExpired), in either direction.
	// It needs synchronised clocks; the challenge does not.
	MaxAge time.Duration
	Now    func() time.Time // default time.Now
	// Counters receives the outcome of every frame (default: a new one).
	Counters *Counters
}

// DefaultChallengeLifetime is the default VerifierConfig.ChallengeLifetime.
const DefaultChallengeLifetime = 30 * time.Second

// Verifier checks frames against the challenge they answer and keeps the
// last accepted (epoch, sequence) per sender, so that one sender's frames
// are applied in order. It is safe for concurrent use.
type Verifier struct {
	cfg     VerifierConfig
	senders map[string]bool

	mu  sync.Mutex
	pos map[string]Position
}

// NewVerifier returns a Verifier.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.Key == nil {
		return nil, errors.New("scheduler: verifier needs a key")
	}
	if !replica.ValidSender(cfg.Self) {
		return nil, fmt.Errorf("scheduler: director id %q: use 1 to %d letters, digits, '.', '_' or '-'", cfg.Self, replica.MaxSenderLen)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
	}
	if cfg.ChallengeLifetime <= 0 {
		cfg.ChallengeLifetime = DefaultChallengeLifetime
	}
	v := &Verifier{cfg: cfg, pos: map[string]Position{}}
	if len(cfg.Senders) > 0 {
		v.senders = map[string]bool{}
		for _, s := range cfg.Senders {
			v.senders[s] = true
		}
	}
	return v, nil
}

// Counters returns the verifier's counters.
func (v *Verifier) Counters() *Counters { return v.cfg.Counters }

// Verify checks one frame, answering the challenge ch, and returns the
// message it carries. The checks run in this order, each with its own
// error: size bound (ErrTooLarge) → header structure (ErrTruncated,
// ErrMalformed) → header MAC, compared in constant time (ErrBadMAC) →
// version (ErrVersion) → sender (ErrOwnSender, ErrUnknownSender) →
// challenge (ErrChallenge) → challenge lifetime (ErrExpired) → announced
// size (ErrTooLarge) → order (ErrStaleEpoch, ErrReplay) → send time, when
// MaxAge is set (ErrExpired) → frame length (ErrTruncated, ErrMalformed) →
// frame MAC (ErrBadMAC) → payload (ErrMalformed). Nothing but the MAC
// checks looks at the content before a MAC has been verified. An accepted
// frame advances the sender's position.
func (v *Verifier) Verify(frame []byte, ch Challenge) (Message, error) {
	m, err := v.verify(frame, ch)
	v.cfg.Counters.count(err)
	return m, err
}

// VerifyHeader runs Verify's checks up to the send time on a frame's
// header alone (the first bytes of the frame, its MAC included), and
// returns the size of the whole frame. A Listener calls it before it reads
// the payload. A rejection is counted; a header that passes is not (the
// frame is, by Verify).
func (v *Verifier) VerifyHeader(hdr []byte, ch Challenge) (frameSize int, err error) {
	h, err := v.checkHeader(hdr, ch)
	if err != nil {
		v.cfg.Counters.count(err)
		return 0, err
	}
	return h.frameSize(), nil
}

func (v *Verifier) checkHeader(b []byte, ch Challenge) (frameHeader, error) {
	h, err := parseHeader(b)
	if err != nil {
		return frameHeader{}, err
	}
	if !v.cfg.Key.equalMAC(h.mac, []byte(headerMACTag), h.signed) {
		return frameHeader{}, ErrBadMAC
	}
	if h.version != Version {
		return frameHeader{}, fmt.Errorf("%w: peer %q speaks version %d, this director %d", ErrVersion, h.sender, h.version, Version)
	}
	if h.sender == v.cfg.Self {
		return frameHeader{}, fmt.Errorf("%w (%q)", ErrOwnSender, h.sender)
	}
	if !replica.ValidSender(h.sender) {
		return frameHeader{}, fmt.Errorf("%w: sender id %q", ErrMalformed, h.sender)
	}
	if v.senders != nil && !v.senders[h.sender] {
		return frameHeader{}, fmt.Errorf("%w: %q", ErrUnknownSender, h.sender)
	}
	if h.nonce != ch.Nonce {
		return frameHeader{}, fmt.Errorf("%w: from %q, epoch %d sequence %d", ErrChallenge, h.sender, h.epoch, h.seq)
	}
	if age := v.cfg.Now().Sub(ch.Issued); age > v.cfg.ChallengeLifetime {
		return frameHeader{}, fmt.Errorf("%w: from %q: it answers a challenge issued %v ago, the bound is %v", ErrExpired, h.sender, age.Round(time.Millisecond), v.cfg.ChallengeLifetime)
	}
	if h.frameSize() > MaxFrameSize {
		return frameHeader{}, fmt.Errorf("%w: %q announces %d bytes, the bound is %d", ErrTooLarge, h.sender, h.frameSize(), MaxFrameSize)
	}
	v.mu.Lock()
	err = v.inOrder(&h)
	v.mu.Unlock()
	if err != nil {
		return frameHeader{}, err
	}
	if v.cfg.MaxAge > 0 {
		age := v.cfg.Now().Sub(time.Unix(0, h.sent))
		if age > v.cfg.MaxAge || age < -v.cfg.MaxAge {
			return frameHeader{}, fmt.Errorf("%w: %q sent it %v ago, the bound is %v: check the clocks", ErrExpired, h.sender, age.Round(time.Millisecond), v.cfg.MaxAge)
		}
	}
	return h, nil
}

// inOrder checks that h comes after the sender's last accepted frame.
// Call with v.mu held.
func (v *Verifier) inOrder(h *frameHeader) error {
	last, seen := v.pos[h.sender]
	if !seen {
		return nil
	}
	if h.epoch < last.Epoch {
		return fmt.Errorf("%w: %q sent epoch %d, last accepted %d", ErrStaleEpoch, h.sender, h.epoch, last.Epoch)
	}
	if h.epoch == last.Epoch && h.seq <= last.Seq {
		return fmt.Errorf("%w: %q epoch %d sequence %d, last accepted %d", ErrReplay, h.sender, h.epoch, h.seq, last.Seq)
	}
	return nil
}

func (v *Verifier) verify(frame []byte, ch Challenge) (Message, error) {
	if len(frame) > MaxFrameSize {
		return Message{}, fmt.Errorf("%w: %d bytes, the bound is %d", ErrTooLarge, len(frame), MaxFrameSize)
	}
	h, err := v.checkHeader(frame, ch)
	if err != nil {
		return Message{}, err
	}
	switch n := h.frameSize(); {
	case len(frame) < n:
		return Message{}, fmt.Errorf("%w: %d of %d bytes", ErrTruncated, len(frame), n)
	case len(frame) > n:
		return Message{}, fmt.Errorf("%w: %d bytes after the frame", ErrMalformed, len(frame)-n)
	}
	end := len(frame) - macLen
	if !v.cfg.Key.equalMAC(frame[end:], frame[:end]) {
		return Message{}, ErrBadMAC
	}
	m := Message{Version: h.version, Sender: h.sender, Epoch: h.epoch, Seq: h.seq, SentAt: time.Unix(0, h.sent)}
	if err := decodePayload(frame[h.size:end], &m); err != nil {
		return Message{}, fmt.Errorf("%w: from %q: %w", ErrMalformed, h.sender, err)
	}
	if age := v.cfg.Now().Sub(ch.Issued); age > v.cfg.ChallengeLifetime {
		return Message{}, fmt.Errorf("%w: from %q: it answers a challenge issued %v ago, the bound is %v", ErrExpired, h.sender, age.Round(time.Millisecond), v.cfg.ChallengeLifetime)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	// Again: another connection of the same sender may have been faster.
	if err := v.inOrder(&h); err != nil {
		return Message{}, err
	}
	v.pos[h.sender] = Position{Epoch: h.epoch, Seq: h.seq}
	return m, nil
}

// ackParts returns the bytes an acknowledgement's MAC covers. The "LVSA"
// prefix keeps them apart from a frame's (which starts "LVSY") and a
// header's ("LVSH").
func ackParts(code byte, epoch, seq uint64, next Nonce) []byte {
	b := make([]byte, 0, 4+1+16+ChallengeLen)
	b = append(b, "LVSA"...)
	b = append(b, code)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, next[:]...)
}
