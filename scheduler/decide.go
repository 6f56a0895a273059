package scheduler

import (
	"errors"
	"fmt"
	"lvs-feedback/replica"
	"math"
	"slices"
	"strings"
	"time"
)

// Claim is a director's claim to be the one writing weights: its id and
// the epoch it took when it started writing.
type Claim struct {
	Sender string
	Epoch  uint64
}

// Beats is the split-brain rule: when two directors both claim to write,
// the higher epoch wins; on equal epochs the lower id (byte-wise) wins.
// Every director evaluates the same rule on the same two claims, so they
// agree on the winner without talking further. The loser stops writing
// and adopts the winner's state.
func (a Claim) Beats(b Claim) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	return a.Sender < b.Sender
}

func (a Claim) String() string { return fmt.Sprintf("%s@%d", a.Sender, a.Epoch) }

// Phase is what a director is doing with its weights.
type Phase string

// The phases.
const (
	// PhaseStandby: the role is Standby; the director follows the writer.
	PhaseStandby Phase = "standby"
	// PhaseStarting: the role is Active but the director has just started
	// and is waiting (StartupGrace) to hear the current writer's state
	// before it takes over, so that it does not overwrite newer state with
	// what it had persisted.
	PhaseStarting Phase = "starting"
	// PhaseWriter: the director computes and writes weights and publishes
	// them.
	PhaseWriter Phase = "writer"
	// PhaseYielded: the role is Active but another active director's claim
	// beats this one (split brain): it follows that director until it
	// stops writing.
	PhaseYielded Phase = "yielded"
)

// NodeConfig configures a Node.
type NodeConfig struct {
	Self string
	// PeerTimeout: a peer not heard from for this long no longer counts;
	// in particular its claim to write lapses. Three monitor intervals is
	// a good value.
	PeerTimeout time.Duration
	// StartupGrace: after start, an Active director waits this long, or
	// until it has heard from ExpectPeers peers, before it writes
	// (default: PeerTimeout).
	StartupGrace time.Duration
	ExpectPeers  int
	// SaveEpoch persists a new epoch; it is called before the epoch is
	// used and the director does not write if it fails (EpochStore.Save).
	SaveEpoch func(uint64) error
	// SaveApplied persists the record of the followers' edits applied
	// (AppliedStore.Save); Applied calls it before the edit is replayed.
	SaveApplied func(map[string]replica.EditPos) error
}

// PeerView is what a Node knows about one peer.
type PeerView struct {
	ID        string
	Epoch     uint64
	Writer    bool // the peer's latest message claimed to write
	LastHeard time.Time
	Stale     bool // not heard from within PeerTimeout
}

// NodeStatus is the outcome of a Step.
type NodeStatus struct {
	Phase  Phase
	Role   Role
	Writer bool // this director writes weights
	Epoch  uint64
	// Leader is the writer this director follows (zero when it writes
	// itself or knows of none).
	Leader Claim
	// EpochChanged says this Step took a new epoch (already persisted).
	EpochChanged bool
	// Reason explains a phase change; empty when nothing changed.
	Reason string
	Peers  []PeerView
}

// Node decides who writes weights. It is a state machine with no I/O
// except SaveEpoch and no clock of its own (every call takes now), so it
// can be driven by tests and simulators. It is not safe for concurrent use.
//
// The rules:
//   - a Standby director never writes; it adopts the snapshots of the
//     writer whose claim wins (Beats);
//   - a director whose role becomes Active takes a new epoch, higher than
//     every epoch it has seen, and writes: the newest VIP holder wins, and
//     the previous writer, on hearing it, yields;
//   - a writer that hears a claim that beats its own yields (PhaseYielded)
//     and adopts that writer's state; it takes over again (new epoch) only
//     when no winning claim has been heard for PeerTimeout or the winner
//     says it no longer writes — never while the winner goes on, so two
//     actives never take turns;
//   - after start, an Active director first waits StartupGrace to adopt
//     the current writer's state.
type Node struct {
	cfg        NodeConfig
	epoch      uint64
	maxSeen    uint64
	behind     uint64 // the highest epoch a peer says it accepted from this director
	role       Role
	activation bool // the role became Active and the director has not taken over yet
	writing    bool
	phase      Phase
	leader     Claim
	started    time.Time
	peers      map[string]*PeerView
	applied    map[string]replica.EditPos // edits applied to the table
	confirmed  map[string]replica.EditPos // of which read back into the state: acknowledged
}

// NewNode returns a Node in the Standby role. epoch is the director's
// current epoch; take it with EpochStore.Bump at start, so that a restarted
// director never reuses an epoch (its sequence numbers start again at 1).
func NewNode(cfg NodeConfig, epoch uint64, now time.Time) (*Node, error) {
	if !replica.ValidSender(cfg.Self) {
		return nil, fmt.Errorf("scheduler: director id %q: use 1 to %d letters, digits, '.', '_' or '-'", cfg.Self, replica.MaxSenderLen)
	}
	if cfg.PeerTimeout <= 0 {
		return nil, errors.New("scheduler: PeerTimeout must be positive")
	}
	if cfg.StartupGrace <= 0 {
		cfg.StartupGrace = cfg.PeerTimeout
	}
	if cfg.SaveEpoch == nil {
		cfg.SaveEpoch = func(uint64) error { return nil }
	}
	if cfg.SaveApplied == nil {
		cfg.SaveApplied = func(map[string]replica.EditPos) error { return nil }
	}
	return &Node{cfg: cfg, epoch: epoch, maxSeen: epoch, phase: PhaseStandby, started: now, peers: map[string]*PeerView{},
		applied: map[string]replica.EditPos{}, confirmed: map[string]replica.EditPos{}}, nil
}

// Epoch returns the director's current epoch (put it in every message).
func (n *Node) Epoch() uint64 { return n.epoch }

// Writer reports whether this director writes weights (as of the last Step).
func (n *Node) Writer() bool { return n.writing }

// SetRole records the role from the RoleSource. Call Step afterwards.
func (n *Node) SetRole(r Role) {
	if r == n.role {
		return
	}
	n.role = r
	n.activation = r == Active
}

// Observe records a verified message from a peer. Call Step afterwards.
func (n *Node) Observe(m Message, now time.Time) {
	if m.Sender == n.cfg.Self {
		return
	}
	p := n.peers[m.Sender]
	if p == nil {
		p = &PeerView{ID: m.Sender}
		n.peers[m.Sender] = p
	}
	p.Epoch, p.Writer, p.LastHeard = m.Epoch, m.Writer, now
	n.maxSeen = max(n.maxSeen, m.Epoch)
	for _, h := range m.Heard {
		if h.Peer == n.cfg.Self {
			n.behind = max(n.behind, h.Epoch)
		}
	}
}

// Heard returns the epoch of the latest message from each peer, sorted by
// id, for Message.Heard: a peer that finds its own id there with an epoch
// above its own has lost its epoch, and moves past it.
func (n *Node) Heard() []PeerEpoch {
	out := make([]PeerEpoch, 0, len(n.peers))
	for _, p := range n.peers {
		out = append(out, PeerEpoch{Peer: p.ID, Epoch: p.Epoch})
	}
	slices.SortFunc(out, func(a, b PeerEpoch) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}

// bestWriter returns the winning claim among the peers that claim to
// write and were heard from within PeerTimeout.
func (n *Node) bestWriter(now time.Time) (Claim, bool) {
	var best Claim
	found := false
	for _, p := range n.peers {
		if !p.Writer || now.Sub(p.LastHeard) > n.cfg.PeerTimeout {
			continue
		}
		c := Claim{Sender: p.ID, Epoch: p.Epoch}
		if !found || c.Beats(best) {
			best, found = c, true
		}
	}
	return best, found
}

func (n *Node) starting(now time.Time) bool {
	if now.Sub(n.started) >= n.cfg.StartupGrace {
		return false
	}
	heard := 0
	for _, p := range n.peers {
		if !p.LastHeard.IsZero() {
			heard++
		}
	}
	return heard < n.cfg.ExpectPeers
}

// Step applies the rules and returns the director's status. It returns an
// error only when a new epoch could not be persisted; the director then
// does not take it (nor write, for a takeover), and the next Step tries
// again.
func (n *Node) Step(now time.Time) (NodeStatus, error) {
	moved, moveErr := n.movePast()
	best, hasBest := n.bestWriter(now)
	own := Claim{Sender: n.cfg.Self, Epoch: n.epoch}
	before := n.phase
	var reason string
	var err error
	changed := false
	switch {
	case n.role == Standby:
		n.writing, n.activation = false, false
		n.phase = PhaseStandby
		reason = "role is standby: following the writer"
	case n.writing:
		if hasBest && best.Beats(own) {
			n.writing = false
			n.phase = PhaseYielded
			reason = fmt.Sprintf("split brain: %s beats this director's %s; following it", best, own)
		}
	case n.starting(now):
		n.phase = PhaseStarting
		reason = "role is active; waiting to hear the peers before writing"
	case n.activation || !hasBest:
		var next uint64
		next, err = n.takeOver()
		if err != nil {
			break
		}
		n.epoch, n.writing, n.activation, changed = next, true, false, true
		n.phase = PhaseWriter
		if hasBest {
			reason = fmt.Sprintf("took over at epoch %d (the VIP came here; %s yields)", next, best)
		} else {
			reason = fmt.Sprintf("took over at epoch %d", next)
		}
	default:
		n.phase = PhaseYielded
		reason = fmt.Sprintf("%s writes; following it", best)
	}
	n.leader = Claim{}
	if !n.writing && hasBest {
		n.leader = best
	}
	st := n.status(now)
	st.EpochChanged = changed || moved != ""
	switch {
	case (n.phase != before || changed) && moved != "":
		st.Reason = moved + "; " + reason
	case n.phase != before || changed:
		st.Reason = reason
	case moved != "":
		st.Reason = moved
	}
	return st, errors.Join(moveErr, err)
}

// movePast takes an epoch above the one a peer last accepted from this
// director, when that is above its own: this director lost its epoch (its
// epoch file was lost, or restored from an old copy), and the peers would
// refuse its frames as stale for ever. It returns the reason, or "" when
// the epoch stays.
func (n *Node) movePast() (string, error) {
	if n.behind <= n.epoch {
		return "", nil
	}
	if n.behind == math.MaxUint64 {
		return "", errors.New("scheduler: epoch space exhausted")
	}
	next := n.behind + 1
	if err := n.cfg.SaveEpoch(next); err != nil {
		return "", fmt.Errorf("scheduler: persist epoch %d: %w", next, err)
	}
	reason := fmt.Sprintf("a peer last accepted epoch %d from this director, above its own %d (its epoch file was lost or restored): moved to epoch %d", n.behind, n.epoch, next)
	n.epoch = next
	n.maxSeen = max(n.maxSeen, next)
	return reason, nil
}

// takeOver persists and returns an epoch above every epoch seen.
func (n *Node) takeOver() (uint64, error) {
	top := max(n.epoch, n.maxSeen)
	if top == math.MaxUint64 {
		return 0, errors.New("scheduler: epoch space exhausted")
	}
	next := top + 1
	if err := n.cfg.SaveEpoch(next); err != nil {
		return 0, fmt.Errorf("scheduler: persist epoch %d: %w", next, err)
	}
	return next, nil
}

// Status returns the status as of the last Step, with peers judged at now.
func (n *Node) Status(now time.Time) NodeStatus { return n.status(now) }

func (n *Node) status(now time.Time) NodeStatus {
	st := NodeStatus{Phase: n.phase, Role: n.role, Writer: n.writing, Epoch: n.epoch, Leader: n.leader}
	for _, p := range n.peers {
		v := *p
		v.Stale = now.Sub(p.LastHeard) > n.cfg.PeerTimeout
		st.Peers = append(st.Peers, v)
	}
	slices.SortFunc(st.Peers, func(a, b PeerView) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// ShouldAdopt reports whether this director should apply the snapshot in
// m, a message just recorded with Observe: m comes from the writer whose
// claim wins, and this director does not write — or writes but is beaten
// by m's claim and will yield at the next Step. Call it after Observe and
// before Step, so that a director about to take over (or to yield) first
// adopts the latest state.
func (n *Node) ShouldAdopt(m Message, now time.Time) bool {
	if !m.Writer || m.Sender == n.cfg.Self {
		return false
	}
	best, ok := n.bestWriter(now)
	if !ok || best != m.Claim() {
		return false
	}
	return !n.writing || best.Beats(Claim{Sender: n.cfg.Self, Epoch: n.epoch})
}

// NewEdits returns the edits in m that this director, if it writes, has not
// applied yet, in order. For each, call Applied, then apply it to the table
// (as an operator's write) if Applied succeeded.
func (n *Node) NewEdits(m Message) []replica.Edit {
	if !n.writing || m.Sender == n.cfg.Self {
		return nil
	}
	last := n.applied[m.Sender]
	var out []replica.Edit
	for _, e := range m.Edits {
		if e.Pos.After(last) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b replica.Edit) int {
		if a.Pos == b.Pos {
			return 0
		}
		if a.Pos.After(b.Pos) {
			return 1
		}
		return -1
	})
	return out
}

// Applied records, durably (SaveApplied), that the edit at pos from sender
// is being applied to the table, before it is: an edit is applied at most
// once, even across a restart of this director (see RestoreApplied). When
// persisting fails nothing is recorded and the edit must not be applied;
// it comes again with the sender's next message. The edit is acknowledged
// once ConfirmEdits says the state read back from the table reflects it.
func (n *Node) Applied(sender string, pos replica.EditPos) error {
	if !pos.After(n.applied[sender]) {
		return nil
	}
	next := make(map[string]replica.EditPos, len(n.applied)+1)
	for p, q := range n.applied {
		next[p] = q
	}
	next[sender] = pos
	if err := n.cfg.SaveApplied(next); err != nil {
		return fmt.Errorf("scheduler: record the edit %d/%d from %s: %w", pos.Epoch, pos.ID, sender, err)
	}
	n.applied = next
	return nil
}

// RestoreApplied seeds the record of applied edits with the persisted one
// (AppliedStore.Load), at start. A position never moves backwards.
func (n *Node) RestoreApplied(applied map[string]replica.EditPos) {
	for p, pos := range applied {
		if pos.After(n.applied[p]) {
			n.applied[p] = pos
		}
	}
}

// ConfirmEdits acknowledges every applied edit. Call it after a cycle has
// read the table back (reconciled the edits into the state), so that an
// acknowledgement never travels in a snapshot that does not show the edit
// yet — the follower would otherwise stop holding its edit and briefly
// write the old weight back.
func (n *Node) ConfirmEdits() {
	for p, pos := range n.applied {
		n.confirmed[p] = pos
	}
}

// Acks returns the acknowledgements to put in the writer's messages.
func (n *Node) Acks() []replica.Ack {
	out := make([]replica.Ack, 0, len(n.confirmed))
	for p, pos := range n.confirmed {
		out = append(out, replica.Ack{Peer: p, Pos: pos})
	}
	slices.SortFunc(out, func(a, b replica.Ack) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}

// Outbox holds a follower's local operator edits until the writer
// acknowledges them. Edits of one destination coalesce: only the latest
// is sent. Not safe for concurrent use.
type Outbox struct {
	epoch   uint64
	next    uint64
	pending map[replica.DestKey]replica.Edit
}

// NewOutbox returns an empty outbox; epoch is the director's epoch at
// start (its edits are numbered within it).
func NewOutbox(epoch uint64) *Outbox {
	return &Outbox{epoch: epoch, pending: map[replica.DestKey]replica.Edit{}}
}

// Add queues an edit of key to weight and returns it. An identical pending
// edit is kept as it is; a different one is replaced.
func (o *Outbox) Add(key replica.DestKey, weight int) replica.Edit { return o.AddOp(key, weight, "") }

// AddOp is Add for an lvsctl request op (Edit.Op).
func (o *Outbox) AddOp(key replica.DestKey, weight int, op string) replica.Edit {
	if e, ok := o.pending[key]; ok && e.Weight == weight && e.Op == op {
		return e
	}
	o.next++
	e := replica.Edit{Pos: replica.EditPos{Epoch: o.epoch, ID: o.next}, Key: key, Weight: weight, Op: op}
	o.pending[key] = e
	return e
}

// Renumber moves the pending edits, in their order, to a new epoch: the
// director took an epoch above one a peer already holds for it, and the
// writer would take edits numbered in the old one for applied already.
func (o *Outbox) Renumber(epoch uint64) {
	pending := o.Pending()
	o.epoch, o.next = epoch, 0
	for _, e := range pending {
		o.next++
		e.Pos = replica.EditPos{Epoch: epoch, ID: o.next}
		o.pending[e.Key] = e
	}
}

// Pending returns the unacknowledged edits in order.
func (o *Outbox) Pending() []replica.Edit {
	out := make([]replica.Edit, 0, len(o.pending))
	for _, e := range o.pending {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b replica.Edit) int {
		if a.Pos.After(b.Pos) {
			return 1
		}
		if b.Pos.After(a.Pos) {
			return -1
		}
		return 0
	})
	return out
}

// Ack drops the edits the writer acknowledged for self.
func (o *Outbox) Ack(self string, acks []replica.Ack) {
	for _, a := range acks {
		if a.Peer != self {
			continue
		}
		for k, e := range o.pending {
			if !e.Pos.After(a.Pos) {
				delete(o.pending, k)
			}
		}
	}
}

// Holds reports whether an edit of key is pending.
func (o *Outbox) Holds(key replica.DestKey) bool {
	_, ok := o.pending[key]
	return ok
}

// Len returns the number of pending edits.
func (o *Outbox) Len() int { return len(o.pending) }
