// Package replica holds what the directors of a group replicate to each
// other: a writer's desired state (Snapshot, DestState), the operator edits
// a follower forwards (Edit, EditPos) and their acknowledgements (Ack,
// Adoption), and Plan, which says what a follower writes to make its table
// match a snapshot. Both sides import it: the monitor, which produces and
// adopts these values for one director, and the director group
// (package scheduler and its etcd edge), which carries them. It imports
// only ipvs, policy and the standard library.
package replica

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// MaxSenderLen bounds a director id.
const MaxSenderLen = 64

// ValidSender reports whether id can name a director: 1 to 64 characters
// from A-Z, a-z, 0-9, '.', '_', '-'.
func ValidSender(id string) bool {
	if len(id) == 0 || len(id) > MaxSenderLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Ownership states of a destination; the same strings as the monitor's
// persisted ownership (monitor.Managed, DrainedByOperator, Down).
const (
	StateManaged = "managed"
	StateDrained = "drained"
	StateDown    = "down"
)

// DestKey names one destination of one service. It has the same shape as
// monitor.DestKey, so the two convert with a plain type conversion.
type DestKey struct {
	Service ipvs.ServiceKey
	Dest    netip.AddrPort
}

func (k DestKey) String() string { return k.Service.String() + " " + k.Dest.String() }

// CompareKeys orders keys by service (firewall mark, family, protocol,
// address) then destination: a total order that keeps each service's
// destinations together.
func CompareKeys(a, b DestKey) int {
	x, y := a.Service, b.Service
	if c := cmp.Compare(x.FWMark, y.FWMark); c != 0 {
		return c
	}
	if c := cmp.Compare(x.Family, y.Family); c != 0 {
		return c
	}
	if c := cmp.Compare(x.Protocol, y.Protocol); c != 0 {
		return c
	}
	if c := x.Addr.Compare(y.Addr); c != 0 {
		return c
	}
	return a.Dest.Compare(b.Dest)
}

// DestState is the replicated state of one destination: everything a
// director needs to carry on controlling it from where the sender left off.
type DestState struct {
	Key DestKey
	// State is the ownership: StateManaged, StateDrained or StateDown.
	State string
	// Weight is the weight the kernel should hold (monitor DestRecord.Written).
	Weight int
	// DefaultWeight is the sender's effective default weight (informational:
	// the receiver derives its own from DefaultOverride and its configuration).
	DefaultWeight int
	// DefaultOverride and OverriddenConfig: an operator's default weight and
	// the configured weight it replaced (monitor DestRecord fields).
	DefaultOverride  int
	OverriddenConfig int
	// RestoreWeight is the weight a Down server gets back.
	RestoreWeight int
	// SetBy says who set the weight that stands (monitor DestRecord.SetBy;
	// "" from a peer that does not send it).
	SetBy policy.Origin
	// Held: an lvsctl drain, which only lvsctl undrain ends (monitor
	// DestRecord.Held); false from a peer that does not send it.
	Held bool
	// Carried is the controller's state a new writer takes over (the
	// slow-start time as of when the message was sent).
	policy.Carried
}

// Snapshot is a full desired state: every destination the sender controls.
type Snapshot struct {
	Dests []DestState
}

// Index returns the snapshot's destinations by key.
func (s Snapshot) Index() map[DestKey]DestState {
	m := make(map[DestKey]DestState, len(s.Dests))
	for _, d := range s.Dests {
		m[d.Key] = d
	}
	return m
}

// Clone returns a deep copy.
func (s Snapshot) Clone() Snapshot { return Snapshot{Dests: slices.Clone(s.Dests)} }

// EditPos orders the edits of one director: by its epoch, then by ID.
type EditPos struct {
	Epoch uint64
	ID    uint64
}

// After reports whether p comes after q.
func (p EditPos) After(q EditPos) bool {
	if p.Epoch != q.Epoch {
		return p.Epoch > q.Epoch
	}
	return p.ID > q.ID
}

// Edit is an operator's weight change found on a follower (ipvsadm or
// lvsctl on the standby): the writer replays it on its own table so that it
// reaches every director. Weight 0 is a drain.
type Edit struct {
	Pos    EditPos
	Key    DestKey
	Weight int
	// Op names an lvsctl request (OpDrain, OpUndrain), which the writer
	// carries out as such; "" for a weight found changed in the table.
	Op string
}

// The lvsctl requests an Edit can carry.
const (
	OpDrain   = "drain"
	OpUndrain = "undrain"
)

// Adoption names the writer's message whose snapshot a follower last
// applied and persisted: the writer learns from it that its peers hold
// an operator's drain (scheduler.Message.Adopted).
type Adoption struct {
	Writer string // "" when none
	Epoch  uint64
	Gen    uint64
}

// Ack tells a follower up to which of its edits the writer has applied.
type Ack struct {
	Peer string
	Pos  EditPos
}

func validState(s string) bool {
	return s == StateManaged || s == StateDrained || s == StateDown
}

func validWeight(w int) bool { return w >= 0 && w <= ipvs.MaxWeight }

// Validate checks one destination's replicated state, whatever carried
// it (a sync frame, an etcd fleet's document): a complete key, a known
// state and origin, every weight within 0..ipvs.MaxWeight, the
// controller's state in range.
func (d DestState) Validate() error {
	if !d.Key.Dest.IsValid() || (!d.Key.Service.IsFWMark() && !d.Key.Service.Addr.IsValid()) {
		return fmt.Errorf("destination %s: incomplete key", d.Key)
	}
	if !validState(d.State) {
		return fmt.Errorf("destination %s: unknown state %q", d.Key, d.State)
	}
	if !d.SetBy.Valid() {
		return fmt.Errorf("destination %s: unknown set_by %q", d.Key, d.SetBy)
	}
	for _, w := range []int{d.Weight, d.DefaultWeight, d.DefaultOverride, d.OverriddenConfig, d.RestoreWeight} {
		if !validWeight(w) {
			return fmt.Errorf("destination %s: weight %d out of range 0..%d", d.Key, w, ipvs.MaxWeight)
		}
	}
	if d.CtrlSet && (math.IsNaN(d.Ctrl) || d.Ctrl < 0 || d.Ctrl > ipvs.MaxWeight) {
		return fmt.Errorf("destination %s: controller weight %v out of range", d.Key, d.Ctrl)
	}
	if d.Ramping && d.RampElapsed < 0 {
		return fmt.Errorf("destination %s: negative slow-start time", d.Key)
	}
	return nil
}

// Validate checks an operator edit: a destination and a weight within
// 0..ipvs.MaxWeight.
func (e Edit) Validate() error {
	if !e.Key.Dest.IsValid() || !validWeight(e.Weight) {
		return fmt.Errorf("edit %s: invalid (weight %d, 0..%d)", e.Key, e.Weight, ipvs.MaxWeight)
	}
	switch {
	case e.Op == OpDrain && e.Weight != 0:
		return fmt.Errorf("edit %s: a drain to weight %d", e.Key, e.Weight)
	case e.Op != "" && e.Op != OpDrain && e.Op != OpUndrain:
		return fmt.Errorf("edit %s: unknown request %q", e.Key, e.Op)
	}
	return nil
}

// CurrentWeight is a follower's own view of one destination.
type CurrentWeight struct {
	Key DestKey
	// Weight is the weight in this director's table now.
	Weight int
	// Expected is the weight this director last wrote or adopted (monitor
	// DestRecord.Written); Known says whether it has one.
	Expected int
	Known    bool
}

// Write is one weight write: a compare-and-set from From to To
// (ipvs.Table.SetWeight).
type Write struct {
	Key      DestKey
	From, To int
}

// Changes is what a follower does with a snapshot.
type Changes struct {
	// Writes make this director's table match the snapshot: only the
	// destinations whose weight differs.
	Writes []Write
	// LocalEdits are weights changed here by someone else (an operator on
	// this director) since it last wrote them: they are not overwritten;
	// queue them in the scheduler.Outbox so that they reach the writer.
	LocalEdits []Edit
	// Held are destinations left alone because a local edit is pending.
	Held []DestKey
	// Missing are destinations of the snapshot not in this table.
	Missing []DestKey
}

// Plan computes what a follower writes to make its table match snap:
// the minimal set of writes, leaving alone every destination with a local
// edit (pending in the scheduler.Outbox, or found now: the table no longer holds the
// weight this director last wrote). Destinations of own that are not in
// snap are not touched. The result is sorted by key.
func Plan(own []CurrentWeight, snap Snapshot, pending []Edit) Changes {
	want := snap.Index()
	held := make(map[DestKey]bool, len(pending))
	for _, e := range pending {
		held[e.Key] = true
	}
	var ch Changes
	seen := make(map[DestKey]bool, len(own))
	for _, c := range own {
		seen[c.Key] = true
		d, ok := want[c.Key]
		if !ok {
			continue
		}
		switch {
		case held[c.Key]:
			ch.Held = append(ch.Held, c.Key)
		case c.Known && c.Weight != c.Expected:
			ch.LocalEdits = append(ch.LocalEdits, Edit{Key: c.Key, Weight: c.Weight})
			ch.Held = append(ch.Held, c.Key)
		case c.Weight != d.Weight:
			ch.Writes = append(ch.Writes, Write{Key: c.Key, From: c.Weight, To: d.Weight})
		}
	}
	for k := range want {
		if !seen[k] {
			ch.Missing = append(ch.Missing, k)
		}
	}
	slices.SortFunc(ch.Writes, func(a, b Write) int { return CompareKeys(a.Key, b.Key) })
	slices.SortFunc(ch.LocalEdits, func(a, b Edit) int { return CompareKeys(a.Key, b.Key) })
	slices.SortFunc(ch.Held, CompareKeys)
	slices.SortFunc(ch.Missing, CompareKeys)
	return ch
}
