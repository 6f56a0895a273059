package scheduler

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"lvs-feedback/replica"
	"net/netip"
	"slices"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// Version is the protocol version this package speaks. A frame of another
// version is rejected (ErrVersion) after its header MAC has been checked.
// Version 2 added the receiver's challenge and the authenticated header.
const Version uint16 = 2

// MaxFrameSize bounds a frame (header, payload and MACs). A larger frame is
// refused on receipt before its payload is read, and never sent. A destination costs about 60–110 bytes of payload, so the
// bound holds tens of thousands of destinations.
const MaxFrameSize = 4 << 20

// PeerEpoch is the epoch a director last accepted from a peer. A director
// that sees its own id with an epoch above its own has lost its epoch (a
// lost or restored epoch file) and moves past it (Node.Observe).
type PeerEpoch struct {
	Peer  string
	Epoch uint64
}

// Message is what one director tells its peers every cycle.
type Message struct {
	// Filled in by the Pusher (and checked by the Verifier).
	Version uint16
	Sender  string
	Seq     uint64 // strictly increasing per Sender and Epoch
	SentAt  time.Time

	// Epoch is the sender's current epoch (see Node and EpochStore).
	Epoch uint64
	// Writer says the sender is the director writing weights (the active
	// one); its Snapshot is the desired state. A follower's Snapshot may be
	// empty: its messages carry Edits and serve as heartbeats.
	Writer   bool
	Snapshot replica.Snapshot
	Edits    []replica.Edit // from a follower: operator edits not yet acknowledged
	Acks     []replica.Ack  // from the writer: edits applied, per follower
	// Heard is the epoch this director last accepted from each peer
	// (Node.Heard).
	Heard []PeerEpoch
	// Gen numbers a writer's snapshots within its epoch, increasing with
	// every message it publishes.
	Gen uint64
	// Adopted, from a follower: the writer's message it last applied.
	Adopted replica.Adoption
}

// Claim is the sender's claim to be the writer.
func (m Message) Claim() Claim { return Claim{Sender: m.Sender, Epoch: m.Epoch} }

// Clone returns a copy that shares nothing mutable with m.
func (m Message) Clone() Message {
	m.Snapshot = m.Snapshot.Clone()
	m.Edits = slices.Clone(m.Edits)
	m.Acks = slices.Clone(m.Acks)
	m.Heard = slices.Clone(m.Heard)
	return m
}

// ErrInvalid wraps every reason a message cannot be sent (checked before
// sealing, so that a peer never has to reject our own bugs).
var ErrInvalid = errors.New("scheduler: invalid message")

// validate checks the content of a message (not the header fields the
// Pusher fills in).
func (m *Message) validate() error {
	seen := make(map[replica.DestKey]bool, len(m.Snapshot.Dests))
	for _, d := range m.Snapshot.Dests {
		if seen[d.Key] {
			return fmt.Errorf("destination %s listed twice", d.Key)
		}
		seen[d.Key] = true
		if err := d.Validate(); err != nil {
			return err
		}
	}
	for _, e := range m.Edits {
		if err := e.Validate(); err != nil {
			return err
		}
	}
	for _, a := range m.Acks {
		if !replica.ValidSender(a.Peer) {
			return fmt.Errorf("ack for invalid peer id %q", a.Peer)
		}
	}
	for _, h := range m.Heard {
		if !replica.ValidSender(h.Peer) {
			return fmt.Errorf("epoch heard from invalid peer id %q", h.Peer)
		}
	}
	if a := m.Adopted; a.Writer != "" && !replica.ValidSender(a.Writer) {
		return fmt.Errorf("adopted from invalid writer id %q", a.Writer)
	}
	return nil
}

// Frame layout (all integers big-endian):
//
//	0     4   magic "LVSY"
//	4     2   version
//	6     16  challenge: the receiver's nonce this frame answers
//	22    8   epoch
//	30    8   sequence
//	38    8   sent time, Unix nanoseconds
//	46    4   payload length L
//	50    1   sender id length n
//	51    n   sender id
//	51+n  32  header MAC: HMAC-SHA256 over "LVSH" and bytes 0 to 51+n
//	83+n  L   payload: JSON (wirePayload)
//	-32   32  frame MAC: HMAC-SHA256 over every preceding byte
//
// The header is at most maxHeader bytes and carries its own MAC, so a
// receiver reads and authenticates it before it reads (or allocates room
// for) the payload: a peer without the key costs it a few hundred bytes.
const (
	magic        = "LVSY"
	headerMACTag = "LVSH" // keeps the header MAC apart from the frame MAC
	fixedHeader  = 51
	macLen       = 32
	// maxHeader bounds what a receiver reads before a frame authenticates.
	maxHeader = fixedHeader + replica.MaxSenderLen + macLen
	minFrame  = fixedHeader + 1 + 2*macLen
)

// ChallengeLen is the size of a challenge nonce.
const ChallengeLen = 16

// Nonce is the random part of a challenge.
type Nonce [ChallengeLen]byte

type wirePayload struct {
	Writer   bool          `json:"writer,omitempty"`
	Services []wireService `json:"services,omitempty"`
	Edits    []wireEdit    `json:"edits,omitempty"`
	Acks     []wireAck     `json:"acks,omitempty"`
	Heard    []wireHeard   `json:"heard,omitempty"`
	Gen      uint64        `json:"gen,omitempty"`
	Adopted  *wireAdopted  `json:"adopted,omitempty"`
}

type wireAdopted struct {
	Writer string `json:"w"`
	Epoch  uint64 `json:"e"`
	Gen    uint64 `json:"g"`
}

type wireService struct {
	Service string     `json:"svc"`
	Dests   []wireDest `json:"dests"`
}

type wireDest struct {
	Addr             string   `json:"a"`
	State            string   `json:"s"`
	Weight           int      `json:"w"`
	DefaultWeight    int      `json:"d,omitempty"`
	DefaultOverride  int      `json:"o,omitempty"`
	OverriddenConfig int      `json:"oc,omitempty"`
	RestoreWeight    int      `json:"r,omitempty"`
	SetBy            string   `json:"by,omitempty"`
	Held             bool     `json:"held,omitempty"`
	Ctrl             *float64 `json:"c,omitempty"`
	RampNanos        *int64   `json:"ramp,omitempty"`
}

type wireEdit struct {
	Epoch   uint64 `json:"e"`
	ID      uint64 `json:"i"`
	Service string `json:"svc"`
	Addr    string `json:"a"`
	Weight  int    `json:"w"`
	Op      string `json:"op,omitempty"`
}

type wireAck struct {
	Peer  string `json:"peer"`
	Epoch uint64 `json:"e"`
	ID    uint64 `json:"i"`
}

type wireHeard struct {
	Peer  string `json:"peer"`
	Epoch uint64 `json:"e"`
}

// encodePayload returns the JSON payload of m, destinations grouped by
// service and sorted, so that equal states encode to equal bytes.
func encodePayload(m *Message) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	dests := slices.Clone(m.Snapshot.Dests)
	slices.SortFunc(dests, func(a, b replica.DestState) int { return replica.CompareKeys(a.Key, b.Key) })
	p := wirePayload{Writer: m.Writer, Gen: m.Gen}
	if a := m.Adopted; a.Writer != "" {
		p.Adopted = &wireAdopted{Writer: a.Writer, Epoch: a.Epoch, Gen: a.Gen}
	}
	for i, d := range dests {
		if i == 0 || d.Key.Service != dests[i-1].Key.Service {
			p.Services = append(p.Services, wireService{Service: d.Key.Service.String()})
		}
		w := wireDest{
			Addr: d.Key.Dest.String(), State: d.State, Weight: d.Weight, DefaultWeight: d.DefaultWeight,
			DefaultOverride: d.DefaultOverride, OverriddenConfig: d.OverriddenConfig, RestoreWeight: d.RestoreWeight,
			SetBy: string(d.SetBy), Held: d.Held,
		}
		if d.CtrlSet {
			c := d.Ctrl
			w.Ctrl = &c
		}
		if d.Ramping {
			r := int64(d.RampElapsed)
			w.RampNanos = &r
		}
		s := &p.Services[len(p.Services)-1]
		s.Dests = append(s.Dests, w)
	}
	for _, e := range m.Edits {
		p.Edits = append(p.Edits, wireEdit{Epoch: e.Pos.Epoch, ID: e.Pos.ID, Service: e.Key.Service.String(), Addr: e.Key.Dest.String(), Weight: e.Weight, Op: e.Op})
	}
	for _, a := range m.Acks {
		p.Acks = append(p.Acks, wireAck{Peer: a.Peer, Epoch: a.Pos.Epoch, ID: a.Pos.ID})
	}
	for _, h := range m.Heard {
		p.Heard = append(p.Heard, wireHeard(h))
	}
	return json.Marshal(p)
}

// decodePayload fills m's content from a JSON payload. Unknown JSON fields
// are ignored (a newer peer may add optional fields); everything present
// is checked.
func decodePayload(data []byte, m *Message) error {
	var p wirePayload
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	m.Writer, m.Gen = p.Writer, p.Gen
	if a := p.Adopted; a != nil {
		m.Adopted = replica.Adoption{Writer: a.Writer, Epoch: a.Epoch, Gen: a.Gen}
	}
	n := 0
	for _, s := range p.Services {
		n += len(s.Dests)
	}
	m.Snapshot.Dests = make([]replica.DestState, 0, n)
	for _, s := range p.Services {
		svc, err := ipvs.ParseServiceKey(s.Service)
		if err != nil {
			return err
		}
		for _, w := range s.Dests {
			addr, err := netip.ParseAddrPort(w.Addr)
			if err != nil {
				return fmt.Errorf("destination %q: %w", w.Addr, err)
			}
			d := replica.DestState{
				Key: replica.DestKey{Service: svc, Dest: addr}, State: w.State, Weight: w.Weight, DefaultWeight: w.DefaultWeight,
				DefaultOverride: w.DefaultOverride, OverriddenConfig: w.OverriddenConfig, RestoreWeight: w.RestoreWeight,
				SetBy: policy.Origin(w.SetBy), Held: w.Held,
			}
			if w.Ctrl != nil {
				d.Ctrl, d.CtrlSet = *w.Ctrl, true
			}
			if w.RampNanos != nil {
				d.RampElapsed, d.Ramping = time.Duration(*w.RampNanos), true
			}
			m.Snapshot.Dests = append(m.Snapshot.Dests, d)
		}
	}
	for _, w := range p.Edits {
		svc, err := ipvs.ParseServiceKey(w.Service)
		if err != nil {
			return err
		}
		addr, err := netip.ParseAddrPort(w.Addr)
		if err != nil {
			return fmt.Errorf("edit %q: %w", w.Addr, err)
		}
		m.Edits = append(m.Edits, replica.Edit{Pos: replica.EditPos{Epoch: w.Epoch, ID: w.ID}, Key: replica.DestKey{Service: svc, Dest: addr}, Weight: w.Weight, Op: w.Op})
	}
	for _, w := range p.Acks {
		m.Acks = append(m.Acks, replica.Ack{Peer: w.Peer, Pos: replica.EditPos{Epoch: w.Epoch, ID: w.ID}})
	}
	for _, w := range p.Heard {
		m.Heard = append(m.Heard, PeerEpoch(w))
	}
	return m.validate()
}

// appendHeader appends the frame header of m, answering nonce and
// announcing a payload of n bytes, to b (without the header MAC).
func appendHeader(b []byte, m *Message, nonce Nonce, n int) []byte {
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, m.Version)
	b = append(b, nonce[:]...)
	b = binary.BigEndian.AppendUint64(b, m.Epoch)
	b = binary.BigEndian.AppendUint64(b, m.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(m.SentAt.UnixNano()))
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, byte(len(m.Sender)))
	return append(b, m.Sender...)
}

// frameHeader is a parsed frame header, not yet authenticated.
type frameHeader struct {
	version    uint16
	nonce      Nonce
	epoch      uint64
	seq        uint64
	sent       int64
	payloadLen int
	sender     string
	signed     []byte // the bytes the header MAC covers
	mac        []byte
	size       int // the header's size, MAC included
}

// headerSize returns the size of the header (MAC included) that begins
// with the fixedHeader bytes b, checking only what is needed to find it.
func headerSize(b []byte) (int, error) {
	if len(b) < fixedHeader {
		return 0, fmt.Errorf("%w: %d bytes, a frame header has at least %d", ErrTruncated, len(b), fixedHeader)
	}
	if !bytes.Equal(b[:4], []byte(magic)) {
		// A peer of protocol version 1 sends a 4-byte length, then the magic.
		if bytes.Equal(b[4:8], []byte(magic)) && binary.BigEndian.Uint16(b[8:10]) < Version {
			return 0, fmt.Errorf("%w: the peer speaks protocol version %d, this director %d: upgrade it", ErrVersion, binary.BigEndian.Uint16(b[8:10]), Version)
		}
		return 0, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	n := int(b[50])
	if n == 0 || n > replica.MaxSenderLen {
		return 0, fmt.Errorf("%w: sender id length %d", ErrMalformed, n)
	}
	return fixedHeader + n + macLen, nil
}

// parseHeader parses the header at the start of b. Nothing in the result
// is trustworthy until its MAC is.
func parseHeader(b []byte) (frameHeader, error) {
	size, err := headerSize(b)
	if err != nil {
		return frameHeader{}, err
	}
	if len(b) < size {
		return frameHeader{}, fmt.Errorf("%w: the header needs %d bytes, got %d", ErrTruncated, size, len(b))
	}
	h := frameHeader{
		version:    binary.BigEndian.Uint16(b[4:6]),
		epoch:      binary.BigEndian.Uint64(b[22:30]),
		seq:        binary.BigEndian.Uint64(b[30:38]),
		sent:       int64(binary.BigEndian.Uint64(b[38:46])),
		payloadLen: int(binary.BigEndian.Uint32(b[46:50])),
		sender:     string(b[fixedHeader : size-macLen]),
		signed:     b[:size-macLen],
		mac:        b[size-macLen : size],
		size:       size,
	}
	copy(h.nonce[:], b[6:22])
	return h, nil
}

// frameSize returns the size of the whole frame the header announces.
func (h *frameHeader) frameSize() int { return h.size + h.payloadLen + macLen }
