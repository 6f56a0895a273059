package scheduler

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	ErrExpired       = errors.New("frame sent too long ago (or in the future): check the clocks")
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
}

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
	rejected [10]atomic.Uint64 // indexed like reasons
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

// Seal returns m as a frame authenticated with key. It fills in Version and
// checks the content and the sender id; m.Sender, Epoch, Seq and SentAt are
// sent as they are.
func Seal(key *Key, m Message) ([]byte, error) {
	m.Version = Version
	payload, err := encodePayload(&m)
	if err != nil {
		return nil, err
	}
	return sealPayload(key, &m, payload)
}

// sealPayload frames an already encoded payload.
func sealPayload(key *Key, m *Message, payload []byte) ([]byte, error) {
	if !ValidSender(m.Sender) {
		return nil, fmt.Errorf("%w: sender id %q: use 1 to %d letters, digits, '.', '_' or '-'", ErrInvalid, m.Sender, MaxSenderLen)
	}
	size := headerLen + len(m.Sender) + len(payload) + macLen
	if size > MaxFrameSize {
		return nil, fmt.Errorf("%w: %w: %d bytes, the bound is %d", ErrInvalid, ErrTooLarge, size, MaxFrameSize)
	}
	b := make([]byte, 0, size)
	b = appendHeader(b, m)
	b = append(b, payload...)
	return key.macAppend(b, b), nil
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
	// MaxAge, if positive, rejects frames whose send time is further than
	// this from the local clock (ErrExpired), in either direction. It
	// bounds a replay against a receiver that lost its replay window (a
	// restart), at the price of needing synchronised clocks.
	MaxAge time.Duration
	Now    func() time.Time // default time.Now
	// Counters receives the outcome of every frame (default: a new one).
	Counters *Counters
}

// Verifier checks frames and keeps the replay window: the last accepted
// (epoch, sequence) per sender. It is safe for concurrent use.
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
	if !ValidSender(cfg.Self) {
		return nil, fmt.Errorf("scheduler: director id %q: use 1 to %d letters, digits, '.', '_' or '-'", cfg.Self, MaxSenderLen)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
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

// Verify checks one frame (without its stream length prefix) and returns
// the message it carries. The checks run in this order, each with its own
// error: size bound (ErrTooLarge) → frame structure (ErrTruncated,
// ErrMalformed) → HMAC, compared in constant time (ErrBadMAC) → version
// (ErrVersion) → sender (ErrOwnSender, ErrUnknownSender) → payload
// (ErrMalformed) → replay window (ErrStaleEpoch, ErrReplay) → age
// (ErrExpired). Nothing but the MAC check looks at the content before the
// MAC has been verified. An accepted frame advances the sender's window.
func (v *Verifier) Verify(frame []byte) (Message, error) {
	m, err := v.verify(frame)
	v.cfg.Counters.count(err)
	return m, err
}

func (v *Verifier) verify(frame []byte) (Message, error) {
	if len(frame) > MaxFrameSize {
		return Message{}, fmt.Errorf("%w: %d bytes, the bound is %d", ErrTooLarge, len(frame), MaxFrameSize)
	}
	p, err := splitFrame(frame)
	if err != nil {
		return Message{}, err
	}
	if !v.cfg.Key.equalMAC(p.mac, p.signed) {
		return Message{}, ErrBadMAC
	}
	if p.version != Version {
		return Message{}, fmt.Errorf("%w: peer %q speaks version %d, this director %d", ErrVersion, p.sender, p.version, Version)
	}
	if p.sender == v.cfg.Self {
		return Message{}, fmt.Errorf("%w (%q)", ErrOwnSender, p.sender)
	}
	if !ValidSender(p.sender) {
		return Message{}, fmt.Errorf("%w: sender id %q", ErrMalformed, p.sender)
	}
	if v.senders != nil && !v.senders[p.sender] {
		return Message{}, fmt.Errorf("%w: %q", ErrUnknownSender, p.sender)
	}
	m := Message{Version: p.version, Sender: p.sender, Epoch: p.epoch, Seq: p.seq, SentAt: time.Unix(0, p.sent)}
	if err := decodePayload(p.payload, &m); err != nil {
		return Message{}, fmt.Errorf("%w: from %q: %w", ErrMalformed, p.sender, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	last, seen := v.pos[p.sender]
	if seen {
		if p.epoch < last.Epoch {
			return Message{}, fmt.Errorf("%w: %q sent epoch %d, last accepted %d", ErrStaleEpoch, p.sender, p.epoch, last.Epoch)
		}
		if p.epoch == last.Epoch && p.seq <= last.Seq {
			return Message{}, fmt.Errorf("%w: %q epoch %d sequence %d, last accepted %d", ErrReplay, p.sender, p.epoch, p.seq, last.Seq)
		}
	}
	if v.cfg.MaxAge > 0 {
		age := v.cfg.Now().Sub(m.SentAt)
		if age > v.cfg.MaxAge || age < -v.cfg.MaxAge {
			return Message{}, fmt.Errorf("%w: %q sent it %v ago, the bound is %v", ErrExpired, p.sender, age.Round(time.Millisecond), v.cfg.MaxAge)
		}
	}
	v.pos[p.sender] = Position{Epoch: p.epoch, Seq: p.seq}
	return m, nil
}

// Positions returns the replay window, to be persisted with the state.
func (v *Verifier) Positions() map[string]Position {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]Position, len(v.pos))
	for k, p := range v.pos {
		out[k] = p
	}
	return out
}

// Restore seeds the replay window (e.g. from a persisted one at start-up),
// so that frames captured before a restart are still refused. A position
// never moves backwards.
func (v *Verifier) Restore(pos map[string]Position) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, p := range pos {
		last, ok := v.pos[k]
		if !ok || p.Epoch > last.Epoch || (p.Epoch == last.Epoch && p.Seq > last.Seq) {
			v.pos[k] = p
		}
	}
}

// ackParts returns the bytes an acknowledgement's MAC covers. The "LVSA"
// prefix keeps them apart from a frame's (which starts "LVSY").
func ackParts(code byte, epoch, seq uint64) []byte {
	b := make([]byte, 0, 4+1+16)
	b = append(b, "LVSA"...)
	b = append(b, code)
	b = binary.BigEndian.AppendUint64(b, epoch)
	return binary.BigEndian.AppendUint64(b, seq)
}
