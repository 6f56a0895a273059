package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
	"lvs-feedback/scheduler"
)

// formatVersion is written into every stored value; a reader refuses
// other versions rather than guess.
const formatVersion = 1

// maxValueBytes bounds what a reader decodes (etcd's default request
// limit is 1.5 MiB; a document for 10,000 destinations is well under it).
const maxValueBytes = 4 << 20

// DestCounters is one destination's connection figures as one director's
// table shows them.
type DestCounters struct {
	Key scheduler.DestKey
	// NewTotal is the new connections this director's table scheduled to
	// the destination since the director started (sum of its counter
	// deltas): a reader takes differences, so that reading a publication
	// twice or missing one counts every connection once.
	NewTotal uint64
	// New is the last cycle's new connections (-1: not known yet), for a
	// reader without an earlier reading of this director.
	New int64
	// Active and Inactive are the table's connection counts at the last
	// cycle.
	Active, Inactive int
}

// Counters is what one director publishes every cycle under its lease.
type Counters struct {
	Director string
	// Start identifies the director's run (its edit epoch): a restarted
	// director's totals start again from zero.
	Start uint64
	Cycle uint64
	Dests []DestCounters
	// Edits are the operator changes made on this director (lvsctl drain,
	// ipvsadm) that the leader has not acknowledged yet.
	Edits []scheduler.Edit
}

// Document is the leader's desired state for the whole fleet.
type Document struct {
	Leader string
	// Term is the leader's election key creation revision: a document
	// from a later leader has a higher term.
	Term  int64
	Cycle uint64 // the leader's cycle count in its term
	// Snapshot is every destination's weight, ownership and controller
	// state.
	Snapshot scheduler.Snapshot
	// Acks say up to which edit of each director the leader applied.
	Acks []scheduler.Ack
	// Revision is etcd's modification revision of the document as read
	// (not stored in the value).
	Revision int64 `json:"-"`
}

type wireKey struct {
	Service string `json:"svc"`
	Dest    string `json:"dst"`
}

type wireCounters struct {
	Version  int           `json:"v"`
	Director string        `json:"id"`
	Start    uint64        `json:"start"`
	Cycle    uint64        `json:"cycle"`
	Dests    []wireDestCtr `json:"dests"`
	Edits    []wireEdit    `json:"edits,omitempty"`
}

type wireDestCtr struct {
	wireKey
	NewTotal uint64 `json:"nt"`
	New      int64  `json:"n"`
	Active   int    `json:"a"`
	Inactive int    `json:"i"`
}

type wireEdit struct {
	wireKey
	Epoch  uint64 `json:"e"`
	ID     uint64 `json:"n"`
	Weight int    `json:"w"`
}

type wireDoc struct {
	Version int        `json:"v"`
	Leader  string     `json:"leader"`
	Term    int64      `json:"term"`
	Cycle   uint64     `json:"cycle"`
	Dests   []wireDest `json:"dests"`
	Acks    []wireAck  `json:"acks,omitempty"`
}

type wireDest struct {
	wireKey
	State            string        `json:"s"`
	Weight           int           `json:"w"`
	DefaultWeight    int           `json:"dw"`
	DefaultOverride  int           `json:"do,omitempty"`
	OverriddenConfig int           `json:"oc,omitempty"`
	RestoreWeight    int           `json:"rw,omitempty"`
	SetBy            string        `json:"by,omitempty"`
	Ctrl             float64       `json:"c,omitempty"`
	CtrlSet          bool          `json:"cs,omitempty"`
	Ramping          bool          `json:"r,omitempty"`
	RampElapsed      time.Duration `json:"re,omitempty"`
}

type wireAck struct {
	Director string `json:"id"`
	Epoch    uint64 `json:"e"`
	ID       uint64 `json:"n"`
}

func toWireKey(k scheduler.DestKey) wireKey {
	return wireKey{Service: k.Service.String(), Dest: k.Dest.String()}
}

func (w wireKey) key() (scheduler.DestKey, error) {
	svc, err := ipvs.ParseServiceKey(w.Service)
	if err != nil {
		return scheduler.DestKey{}, err
	}
	dst, err := netip.ParseAddrPort(w.Dest)
	if err != nil {
		return scheduler.DestKey{}, fmt.Errorf("destination %q: %w", w.Dest, err)
	}
	return scheduler.DestKey{Service: svc, Dest: dst}, nil
}

func validWeight(w int) bool { return w >= 0 && w <= ipvs.MaxWeight }

// EncodeCounters returns c's stored form.
func EncodeCounters(c Counters) ([]byte, error) {
	w := wireCounters{Version: formatVersion, Director: c.Director, Start: c.Start, Cycle: c.Cycle,
		Dests: make([]wireDestCtr, 0, len(c.Dests))}
	for _, d := range c.Dests {
		w.Dests = append(w.Dests, wireDestCtr{wireKey: toWireKey(d.Key), NewTotal: d.NewTotal, New: d.New, Active: d.Active, Inactive: d.Inactive})
	}
	for _, e := range c.Edits {
		w.Edits = append(w.Edits, wireEdit{wireKey: toWireKey(e.Key), Epoch: e.Pos.Epoch, ID: e.Pos.ID, Weight: e.Weight})
	}
	return json.Marshal(w)
}

// DecodeCounters reads a stored Counters and checks it.
func DecodeCounters(b []byte) (Counters, error) {
	if len(b) > maxValueBytes {
		return Counters{}, fmt.Errorf("counters: %d bytes, over the %d-byte limit", len(b), maxValueBytes)
	}
	var w wireCounters
	if err := json.Unmarshal(b, &w); err != nil {
		return Counters{}, fmt.Errorf("counters: %w", err)
	}
	if w.Version != formatVersion {
		return Counters{}, fmt.Errorf("counters: format version %d, want %d", w.Version, formatVersion)
	}
	if !scheduler.ValidSender(w.Director) {
		return Counters{}, fmt.Errorf("counters: invalid director id %q", w.Director)
	}
	c := Counters{Director: w.Director, Start: w.Start, Cycle: w.Cycle, Dests: make([]DestCounters, 0, len(w.Dests))}
	for _, d := range w.Dests {
		k, err := d.key()
		if err != nil {
			return Counters{}, fmt.Errorf("counters of %s: %w", w.Director, err)
		}
		if d.New < -1 || d.Active < 0 || d.Inactive < 0 {
			return Counters{}, fmt.Errorf("counters of %s: %s: negative connection count", w.Director, k)
		}
		c.Dests = append(c.Dests, DestCounters{Key: k, NewTotal: d.NewTotal, New: d.New, Active: d.Active, Inactive: d.Inactive})
	}
	for _, e := range w.Edits {
		k, err := e.key()
		if err != nil {
			return Counters{}, fmt.Errorf("edits of %s: %w", w.Director, err)
		}
		if !validWeight(e.Weight) {
			return Counters{}, fmt.Errorf("edits of %s: %s: weight %d out of range", w.Director, k, e.Weight)
		}
		c.Edits = append(c.Edits, scheduler.Edit{Pos: scheduler.EditPos{Epoch: e.Epoch, ID: e.ID}, Key: k, Weight: e.Weight})
	}
	return c, nil
}

// EncodeDocument returns d's stored form.
func EncodeDocument(d Document) ([]byte, error) {
	w := wireDoc{Version: formatVersion, Leader: d.Leader, Term: d.Term, Cycle: d.Cycle, Dests: make([]wireDest, 0, len(d.Snapshot.Dests))}
	for _, s := range d.Snapshot.Dests {
		w.Dests = append(w.Dests, wireDest{wireKey: toWireKey(s.Key), State: s.State, Weight: s.Weight, DefaultWeight: s.DefaultWeight,
			DefaultOverride: s.DefaultOverride, OverriddenConfig: s.OverriddenConfig, RestoreWeight: s.RestoreWeight, SetBy: string(s.SetBy),
			Ctrl: s.Ctrl, CtrlSet: s.CtrlSet, Ramping: s.Ramping, RampElapsed: s.RampElapsed})
	}
	for _, a := range d.Acks {
		w.Acks = append(w.Acks, wireAck{Director: a.Peer, Epoch: a.Pos.Epoch, ID: a.Pos.ID})
	}
	return json.Marshal(w)
}

// ErrMalformed marks a stored value that does not decode or fails its
// checks; nothing of it is used.
var ErrMalformed = errors.New("malformed value in etcd")

// DecodeDocument reads a stored Document and checks every field a
// director would apply.
func DecodeDocument(b []byte) (Document, error) {
	if len(b) > maxValueBytes {
		return Document{}, fmt.Errorf("document: %d bytes, over the %d-byte limit", len(b), maxValueBytes)
	}
	var w wireDoc
	if err := json.Unmarshal(b, &w); err != nil {
		return Document{}, fmt.Errorf("document: %w", err)
	}
	if w.Version != formatVersion {
		return Document{}, fmt.Errorf("document: format version %d, want %d", w.Version, formatVersion)
	}
	if !scheduler.ValidSender(w.Leader) || w.Term <= 0 {
		return Document{}, fmt.Errorf("document: invalid leader %q or term %d", w.Leader, w.Term)
	}
	d := Document{Leader: w.Leader, Term: w.Term, Cycle: w.Cycle, Snapshot: scheduler.Snapshot{Dests: make([]scheduler.DestState, 0, len(w.Dests))}}
	seen := make(map[scheduler.DestKey]bool, len(w.Dests))
	for _, x := range w.Dests {
		k, err := x.key()
		if err != nil {
			return Document{}, fmt.Errorf("document: %w", err)
		}
		if seen[k] {
			return Document{}, fmt.Errorf("document: %s listed twice", k)
		}
		seen[k] = true
		switch policy.Ownership(x.State) {
		case policy.Managed, policy.DrainedByOperator, policy.Down:
		default:
			return Document{}, fmt.Errorf("document: %s: unknown state %q", k, x.State)
		}
		for _, v := range []int{x.Weight, x.DefaultWeight, x.DefaultOverride, x.OverriddenConfig, x.RestoreWeight} {
			if !validWeight(v) {
				return Document{}, fmt.Errorf("document: %s: weight %d out of range", k, v)
			}
		}
		if x.Ctrl < 0 || x.Ctrl > ipvs.MaxWeight || x.RampElapsed < 0 {
			return Document{}, fmt.Errorf("document: %s: controller state out of range", k)
		}
		d.Snapshot.Dests = append(d.Snapshot.Dests, scheduler.DestState{Key: k, State: x.State, Weight: x.Weight, DefaultWeight: x.DefaultWeight,
			DefaultOverride: x.DefaultOverride, OverriddenConfig: x.OverriddenConfig, RestoreWeight: x.RestoreWeight, SetBy: policy.Origin(x.SetBy),
			Carried: policy.Carried{Ctrl: x.Ctrl, CtrlSet: x.CtrlSet, Ramping: x.Ramping, RampElapsed: x.RampElapsed}})
	}
	for _, a := range w.Acks {
		if !scheduler.ValidSender(a.Director) {
			return Document{}, fmt.Errorf("document: ack for invalid director id %q", a.Director)
		}
		d.Acks = append(d.Acks, scheduler.Ack{Peer: a.Director, Pos: scheduler.EditPos{Epoch: a.Epoch, ID: a.ID}})
	}
	return d, nil
}
