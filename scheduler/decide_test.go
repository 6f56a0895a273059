package scheduler

import (
	"errors"
	"lvs-feedback/replica"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestClaimBeats(t *testing.T) {
	cases := []struct {
		a, b Claim
		want bool
	}{
		{Claim{"b", 6}, Claim{"a", 5}, true},  // higher epoch wins
		{Claim{"a", 5}, Claim{"b", 6}, false}, // lower epoch loses, whatever the id
		{Claim{"a", 6}, Claim{"b", 6}, true},  // tie: lower id wins
		{Claim{"b", 6}, Claim{"a", 6}, false},
		{Claim{"a", 6}, Claim{"a", 6}, false}, // nothing beats itself
		{Claim{"dir-10", 3}, Claim{"dir-9", 3}, true},
	}
	for _, c := range cases {
		if got := c.a.Beats(c.b); got != c.want {
			t.Errorf("%v beats %v = %v, want %v", c.a, c.b, got, c.want)
		}
		if c.a != c.b && c.a.Beats(c.b) == c.b.Beats(c.a) {
			t.Errorf("%v and %v: the rule is not antisymmetric", c.a, c.b)
		}
	}
}

// nodeStep is one event in a Node scenario.
type nodeStep struct {
	at      time.Duration // since start
	role    *Role
	msg     *Message // observed
	adopt   *bool    // expected ShouldAdopt(msg), checked before Step
	phase   Phase
	writer  bool
	epoch   uint64
	leader  Claim
	saveErr error
}

func rolePtr(r Role) *Role { return &r }
func boolPtr(b bool) *bool { return &b }
func writerMsg(id string, epoch uint64) *Message {
	return &Message{Sender: id, Epoch: epoch, Writer: true}
}
func followerMsg(id string, epoch uint64) *Message { return &Message{Sender: id, Epoch: epoch} }

func TestNodeScenarios(t *testing.T) {
	sec := time.Second
	scenarios := []struct {
		name   string
		self   string
		epoch  uint64
		expect int
		steps  []nodeStep
	}{
		{
			name: "alone: the VIP makes a writer with a new epoch", self: "a", epoch: 3,
			steps: []nodeStep{
				{at: 0, phase: PhaseStandby, epoch: 3},
				{at: sec, role: rolePtr(Active), phase: PhaseWriter, writer: true, epoch: 4},
				{at: 2 * sec, phase: PhaseWriter, writer: true, epoch: 4}, // no bump without a change
				{at: 3 * sec, role: rolePtr(Standby), phase: PhaseStandby, epoch: 4},
				{at: 4 * sec, role: rolePtr(Active), phase: PhaseWriter, writer: true, epoch: 5},
			},
		},
		{
			name: "standby follows the winning writer only", self: "b", epoch: 2,
			steps: []nodeStep{
				{at: 0, msg: writerMsg("a", 5), adopt: boolPtr(true), phase: PhaseStandby, epoch: 2, leader: Claim{"a", 5}},
				{at: sec, msg: followerMsg("c", 9), adopt: boolPtr(false), phase: PhaseStandby, epoch: 2, leader: Claim{"a", 5}},
				{at: 2 * sec, msg: writerMsg("c", 4), adopt: boolPtr(false), phase: PhaseStandby, epoch: 2, leader: Claim{"a", 5}},
				// the writer's claim lapses after PeerTimeout (3 s): c is the only writer left
				{at: 5 * sec, msg: writerMsg("c", 4), adopt: boolPtr(true), phase: PhaseStandby, epoch: 2, leader: Claim{"c", 4}},
			},
		},
		{
			name: "split brain: the higher epoch wins, the loser yields without ping-pong", self: "a", epoch: 4,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), phase: PhaseWriter, writer: true, epoch: 5},
				{at: sec, msg: writerMsg("b", 6), adopt: boolPtr(true), phase: PhaseYielded, epoch: 5, leader: Claim{"b", 6}},
				{at: 2 * sec, msg: writerMsg("b", 6), adopt: boolPtr(true), phase: PhaseYielded, epoch: 5, leader: Claim{"b", 6}},
				{at: 3 * sec, msg: writerMsg("b", 6), adopt: boolPtr(true), phase: PhaseYielded, epoch: 5, leader: Claim{"b", 6}},
				// b stops writing (it lost the VIP): a takes over above every epoch seen
				{at: 4 * sec, msg: followerMsg("b", 6), adopt: boolPtr(false), phase: PhaseWriter, writer: true, epoch: 7},
				{at: 5 * sec, msg: followerMsg("b", 6), phase: PhaseWriter, writer: true, epoch: 7},
			},
		},
		{
			name: "split brain: the winner ignores the loser", self: "b", epoch: 5,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), phase: PhaseWriter, writer: true, epoch: 6},
				{at: sec, msg: writerMsg("a", 5), adopt: boolPtr(false), phase: PhaseWriter, writer: true, epoch: 6},
				{at: 2 * sec, msg: writerMsg("a", 5), adopt: boolPtr(false), phase: PhaseWriter, writer: true, epoch: 6},
			},
		},
		{
			name: "split brain: equal epochs, the lower id wins", self: "b", epoch: 5,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), phase: PhaseWriter, writer: true, epoch: 6},
				{at: sec, msg: writerMsg("a", 6), adopt: boolPtr(true), phase: PhaseYielded, epoch: 6, leader: Claim{"a", 6}},
				{at: 2 * sec, msg: writerMsg("a", 6), adopt: boolPtr(true), phase: PhaseYielded, epoch: 6, leader: Claim{"a", 6}},
			},
		},
		{
			name: "the winner goes silent: the yielded director takes over after PeerTimeout", self: "a", epoch: 4,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), phase: PhaseWriter, writer: true, epoch: 5},
				{at: sec, msg: writerMsg("b", 8), adopt: boolPtr(true), phase: PhaseYielded, epoch: 5, leader: Claim{"b", 8}},
				{at: 3 * sec, phase: PhaseYielded, epoch: 5, leader: Claim{"b", 8}},
				{at: 4*sec + 1, phase: PhaseWriter, writer: true, epoch: 9},
			},
		},
		{
			name: "the VIP moves here: the newest VIP holder wins", self: "b", epoch: 2,
			steps: []nodeStep{
				{at: 0, msg: writerMsg("a", 5), adopt: boolPtr(true), phase: PhaseStandby, epoch: 2, leader: Claim{"a", 5}},
				{at: sec, role: rolePtr(Active), msg: writerMsg("a", 5), adopt: boolPtr(true), phase: PhaseWriter, writer: true, epoch: 6},
				{at: 2 * sec, msg: writerMsg("a", 5), adopt: boolPtr(false), phase: PhaseWriter, writer: true, epoch: 6},
			},
		},
		{
			name: "an old active returns with a lower epoch: it adopts the newer state", self: "a", epoch: 4,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), phase: PhaseWriter, writer: true, epoch: 5},
				// partitioned; meanwhile b took over at 6 and wrote; the partition heals
				{at: 10 * sec, msg: writerMsg("b", 6), adopt: boolPtr(true), phase: PhaseYielded, epoch: 5, leader: Claim{"b", 6}},
			},
		},
		{
			name: "start-up grace: adopt the writer's state first, then take over", self: "a", epoch: 7, expect: 1,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), phase: PhaseStarting, epoch: 7},
				{at: sec, phase: PhaseStarting, epoch: 7},
				{at: 2 * sec, msg: writerMsg("b", 9), adopt: boolPtr(true), phase: PhaseWriter, writer: true, epoch: 10},
			},
		},
		{
			name: "start-up grace ends after StartupGrace when no peer answers", self: "a", epoch: 7, expect: 1,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), phase: PhaseStarting, epoch: 7},
				{at: 3 * sec, phase: PhaseWriter, writer: true, epoch: 8},
			},
		},
		{
			name: "a new epoch that cannot be persisted is not used", self: "a", epoch: 1,
			steps: []nodeStep{
				{at: 0, role: rolePtr(Active), saveErr: errors.New("disk full"), phase: PhaseStandby, epoch: 1},
				{at: sec, phase: PhaseWriter, writer: true, epoch: 2},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			var saveErr error
			var saved []uint64
			n, err := NewNode(NodeConfig{Self: sc.self, PeerTimeout: 3 * time.Second, ExpectPeers: sc.expect,
				SaveEpoch: func(e uint64) error {
					if saveErr != nil {
						return saveErr
					}
					saved = append(saved, e)
					return nil
				}}, sc.epoch, start)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range sc.steps {
				now := start.Add(s.at)
				saveErr = s.saveErr
				if s.role != nil {
					n.SetRole(*s.role)
				}
				if s.msg != nil {
					n.Observe(*s.msg, now)
					if s.adopt != nil {
						if got := n.ShouldAdopt(*s.msg, now); got != *s.adopt {
							t.Errorf("step %d: ShouldAdopt = %v, want %v", i, got, *s.adopt)
						}
					}
				}
				st, err := n.Step(now)
				if (err != nil) != (s.saveErr != nil) {
					t.Errorf("step %d: err = %v", i, err)
				}
				if st.Phase != s.phase || st.Writer != s.writer || st.Epoch != s.epoch || st.Leader != s.leader {
					t.Errorf("step %d: got phase %s writer %v epoch %d leader %v; want %s %v %d %v (%s)",
						i, st.Phase, st.Writer, st.Epoch, st.Leader, s.phase, s.writer, s.epoch, s.leader, st.Reason)
				}
				if st.EpochChanged && (len(saved) == 0 || saved[len(saved)-1] != st.Epoch) {
					t.Errorf("step %d: epoch %d used but not persisted (saved %v)", i, st.Epoch, saved)
				}
			}
		})
	}
}

func TestNodeEditsAndAcks(t *testing.T) {
	now := time.Unix(1000, 0)
	n, _ := NewNode(NodeConfig{Self: "a", PeerTimeout: time.Minute}, 1, now)
	k1, k2 := key(svcWeb, "198.51.100.1:80"), key(svcWeb, "198.51.100.2:80")
	m := Message{Sender: "b", Epoch: 3, Edits: []replica.Edit{
		{Pos: replica.EditPos{Epoch: 3, ID: 2}, Key: k2, Weight: 5},
		{Pos: replica.EditPos{Epoch: 3, ID: 1}, Key: k1, Weight: 0},
	}}
	if got := n.NewEdits(m); got != nil {
		t.Errorf("a follower applies edits: %v", got)
	}
	n.SetRole(Active)
	n.Step(now)
	got := n.NewEdits(m)
	if len(got) != 2 || got[0].Pos.ID != 1 || got[1].Pos.ID != 2 {
		t.Fatalf("NewEdits = %+v, want both in order", got)
	}
	mustApply := func(pos replica.EditPos) {
		t.Helper()
		if err := n.Applied("b", pos); err != nil {
			t.Fatal(err)
		}
	}
	mustApply(got[0].Pos)
	if got := n.NewEdits(m); len(got) != 1 || got[0].Pos.ID != 2 {
		t.Errorf("after applying the first: %+v", got)
	}
	mustApply(replica.EditPos{Epoch: 3, ID: 2})
	mustApply(replica.EditPos{Epoch: 3, ID: 1}) // never backwards
	if got := n.NewEdits(m); len(got) != 0 {
		t.Errorf("after applying both: %+v", got)
	}
	if acks := n.Acks(); len(acks) != 0 {
		t.Errorf("acknowledged before the state was read back: %+v", acks)
	}
	n.ConfirmEdits()
	if acks := n.Acks(); !reflect.DeepEqual(acks, []replica.Ack{{Peer: "b", Pos: replica.EditPos{Epoch: 3, ID: 2}}}) {
		t.Errorf("Acks = %+v", acks)
	}
	// A restarted follower numbers its edits in a higher epoch.
	m2 := Message{Sender: "b", Epoch: 4, Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 4, ID: 1}, Key: k1, Weight: 7}}}
	if got := n.NewEdits(m2); len(got) != 1 {
		t.Errorf("edit after the follower's restart: %+v", got)
	}
}

func TestPlan(t *testing.T) {
	k1 := key(svcWeb, "198.51.100.1:80")
	k2 := key(svcWeb, "198.51.100.2:80")
	k3 := key(svcWeb, "198.51.100.3:80")
	k4 := key(svcDNS, "[2001:db8::1]:53")
	kOnlyHere := key(svcWeb, "198.51.100.99:80")
	snap := replica.Snapshot{Dests: []replica.DestState{
		{Key: k1, State: replica.StateManaged, Weight: 12},
		{Key: k2, State: replica.StateDrained, Weight: 0},
		{Key: k3, State: replica.StateManaged, Weight: 30},
		{Key: k4, State: replica.StateDown, Weight: 0},
	}}
	cases := []struct {
		name    string
		own     []replica.CurrentWeight
		pending []replica.Edit
		want    replica.Changes
	}{
		{
			name: "in step: nothing to write",
			own: []replica.CurrentWeight{
				{Key: k1, Weight: 12, Expected: 12, Known: true}, {Key: k2, Weight: 0, Expected: 0, Known: true},
				{Key: k3, Weight: 30, Expected: 30, Known: true}, {Key: k4, Weight: 0, Expected: 0, Known: true},
			},
			want: replica.Changes{},
		},
		{
			name: "only what changed is written",
			own: []replica.CurrentWeight{
				{Key: k1, Weight: 10, Expected: 10, Known: true}, {Key: k2, Weight: 8, Expected: 8, Known: true},
				{Key: k3, Weight: 30, Expected: 30, Known: true}, {Key: k4, Weight: 5, Expected: 5, Known: true},
			},
			want: replica.Changes{Writes: []replica.Write{{Key: k1, From: 10, To: 12}, {Key: k2, From: 8, To: 0}, {Key: k4, From: 5, To: 0}}},
		},
		{
			name: "unknown destinations converge to the snapshot",
			own:  []replica.CurrentWeight{{Key: k1, Weight: 1}, {Key: k3, Weight: 30}},
			want: replica.Changes{Writes: []replica.Write{{Key: k1, From: 1, To: 12}}, Missing: []replica.DestKey{k2, k4}},
		},
		{
			name: "an operator's change here is not overwritten: it is forwarded",
			own: []replica.CurrentWeight{
				{Key: k1, Weight: 0, Expected: 12, Known: true},  // drained here by ipvsadm
				{Key: k3, Weight: 50, Expected: 30, Known: true}, // new weight set here
			},
			want: replica.Changes{
				LocalEdits: []replica.Edit{{Key: k1, Weight: 0}, {Key: k3, Weight: 50}},
				Held:       []replica.DestKey{k1, k3},
				Missing:    []replica.DestKey{k2, k4},
			},
		},
		{
			name:    "a pending edit holds its destination until acknowledged",
			own:     []replica.CurrentWeight{{Key: k1, Weight: 0, Expected: 0, Known: true}, {Key: k2, Weight: 0, Expected: 0, Known: true}},
			pending: []replica.Edit{{Pos: replica.EditPos{Epoch: 1, ID: 1}, Key: k1, Weight: 0}},
			want:    replica.Changes{Held: []replica.DestKey{k1}, Missing: []replica.DestKey{k3, k4}},
		},
		{
			name: "destinations only in this table are left alone",
			own:  []replica.CurrentWeight{{Key: kOnlyHere, Weight: 3, Expected: 9, Known: true}},
			want: replica.Changes{Missing: []replica.DestKey{k1, k2, k3, k4}},
		},
	}
	for _, c := range cases {
		got := replica.Plan(c.own, snap, c.pending)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestOutbox(t *testing.T) {
	k1, k2 := key(svcWeb, "198.51.100.1:80"), key(svcWeb, "198.51.100.2:80")
	o := NewOutbox(4)
	e1 := o.Add(k1, 0)
	if again := o.Add(k1, 0); again != e1 {
		t.Errorf("an identical edit was queued again: %+v", again)
	}
	e2 := o.Add(k2, 5)
	e3 := o.Add(k1, 9) // the operator changed their mind: coalesced
	if o.Len() != 2 {
		t.Fatalf("Len = %d", o.Len())
	}
	if p := o.Pending(); !reflect.DeepEqual(p, []replica.Edit{e2, e3}) {
		t.Errorf("Pending = %+v", p)
	}
	o.Ack("b", []replica.Ack{{Peer: "x", Pos: e3.Pos}, {Peer: "b", Pos: e2.Pos}})
	if p := o.Pending(); !reflect.DeepEqual(p, []replica.Edit{e3}) {
		t.Errorf("after ack of e2: %+v", p)
	}
	o.Ack("b", []replica.Ack{{Peer: "b", Pos: e3.Pos}})
	if o.Len() != 0 {
		t.Errorf("after ack of e3: %+v", o.Pending())
	}
	if e1.Pos.Epoch != 4 || e3.Pos.ID <= e2.Pos.ID {
		t.Errorf("positions %+v %+v %+v", e1.Pos, e2.Pos, e3.Pos)
	}
}

// TestAppliedEditsSurviveRestart: the writer records an edit before it
// applies it, durably; a restarted writer restores the record and does not
// apply the edit again. When the record cannot be written, the edit is
// not recorded (and must not be applied).
func TestAppliedEditsSurviveRestart(t *testing.T) {
	now := time.Unix(1000, 0)
	store := NewAppliedStore(filepath.Join(t.TempDir(), "sync-applied"))
	writer := func() *Node {
		t.Helper()
		rec, err := store.Load()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := NewNode(NodeConfig{Self: "a", PeerTimeout: time.Minute, SaveApplied: store.Save}, 1, now)
		n.RestoreApplied(rec)
		n.SetRole(Active)
		n.Step(now)
		return n
	}
	drain := Message{Sender: "b", Epoch: 3, Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 3, ID: 1}, Key: simKeys[2], Weight: 0}}}
	n := writer()
	got := n.NewEdits(drain)
	if len(got) != 1 {
		t.Fatalf("NewEdits = %+v", got)
	}
	if err := n.Applied("b", got[0].Pos); err != nil {
		t.Fatal(err)
	}
	// The writer restarts before the follower heard the acknowledgement:
	// the follower sends the same edit again.
	n = writer()
	if got := n.NewEdits(drain); len(got) != 0 {
		t.Errorf("a restarted writer applies the edit again: %+v", got)
	}
	next := Message{Sender: "b", Epoch: 3, Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 3, ID: 2}, Key: simKeys[2], Weight: 10}}}
	if got := n.NewEdits(next); len(got) != 1 {
		t.Errorf("the follower's next edit: %+v", got)
	}

	// A record that cannot be written records nothing.
	failing, _ := NewNode(NodeConfig{Self: "a", PeerTimeout: time.Minute, SaveApplied: func(map[string]replica.EditPos) error { return errors.New("disk full") }}, 1, now)
	failing.SetRole(Active)
	failing.Step(now)
	if err := failing.Applied("b", replica.EditPos{Epoch: 3, ID: 1}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Applied with a failing store: %v", err)
	}
	if got := failing.NewEdits(drain); len(got) != 1 {
		t.Errorf("an edit not recorded is not offered again: %+v", got)
	}

	// A corrupt file is an error, not an empty record.
	if err := os.WriteFile(store.path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load(); !errors.Is(err, ErrCorruptApplied) {
		t.Errorf("corrupt file: %v", err)
	}
}

// TestNodeMovesPastEpochHeldByPeer: a director whose epoch file was lost
// restarts at epoch 1 while the writer last accepted its epoch 4. The
// writer's messages say so (Heard); the director takes epoch 5, persisted
// first, and its pending edits move to it so the writer takes them as new.
func TestNodeMovesPastEpochHeldByPeer(t *testing.T) {
	now := time.Unix(1000, 0)
	var saved []uint64
	fail := false
	save := func(e uint64) error {
		if fail {
			return errors.New("read-only file system")
		}
		saved = append(saved, e)
		return nil
	}
	b, _ := NewNode(NodeConfig{Self: "b", PeerTimeout: time.Minute, SaveEpoch: save}, 1, now)
	b.SetRole(Standby)
	out := NewOutbox(1)
	drain := out.Add(simKeys[2], 0)

	// The writer's record: it accepted b's epoch 4 before b restarted.
	w, _ := NewNode(NodeConfig{Self: "a", PeerTimeout: time.Minute}, 6, now)
	w.Observe(Message{Sender: "b", Epoch: 4}, now)
	w.Observe(Message{Sender: "c", Epoch: 2}, now)
	if got := w.Heard(); !reflect.DeepEqual(got, []PeerEpoch{{"b", 4}, {"c", 2}}) {
		t.Fatalf("Heard = %+v", got)
	}
	if err := w.Applied("b", replica.EditPos{Epoch: 4, ID: 3}); err != nil {
		t.Fatal(err)
	}

	// Persisting fails: the epoch stays, the error says why, and the next
	// Step tries again.
	fail = true
	b.Observe(Message{Sender: "a", Epoch: 6, Writer: true, Heard: w.Heard()}, now)
	st, err := b.Step(now)
	if err == nil || !strings.Contains(err.Error(), "read-only") || st.Epoch != 1 || st.EpochChanged {
		t.Errorf("failing store: %+v, %v", st, err)
	}
	fail = false
	st, err = b.Step(now)
	if err != nil || st.Epoch != 5 || !st.EpochChanged || !strings.Contains(st.Reason, "epoch 4") || !reflect.DeepEqual(saved, []uint64{5}) {
		t.Fatalf("after the writer's message: %+v, %v, saved %v", st, err, saved)
	}
	out.Renumber(st.Epoch)
	moved := out.Pending()
	if len(moved) != 1 || moved[0].Pos != (replica.EditPos{Epoch: 5, ID: 1}) || moved[0].Key != drain.Key || moved[0].Weight != 0 {
		t.Errorf("pending after Renumber: %+v", moved)
	}
	w.SetRole(Active)
	w.Step(now)
	if got := w.NewEdits(Message{Sender: "b", Epoch: 5, Edits: moved}); len(got) != 1 {
		t.Errorf("the writer does not take the renumbered drain: %+v", got)
	}
	if got := w.NewEdits(Message{Sender: "b", Epoch: 1, Edits: []replica.Edit{drain}}); len(got) != 0 {
		t.Errorf("the old numbering would have looked applied already, got %+v", got)
	}

	// Once the writer accepted epoch 5 it says 5: nothing moves any more,
	// nor for another peer's epoch.
	b.Observe(Message{Sender: "a", Epoch: 6, Writer: true, Heard: []PeerEpoch{{"b", 5}, {"c", 9}}}, now)
	if st, err := b.Step(now); err != nil || st.Epoch != 5 || st.EpochChanged {
		t.Errorf("after the writer accepted epoch 5: %+v, %v", st, err)
	}

	// A writer moves past too, and keeps writing at the new epoch.
	a, _ := NewNode(NodeConfig{Self: "a", PeerTimeout: time.Minute}, 2, now)
	a.SetRole(Active)
	if st, _ := a.Step(now); !st.Writer {
		t.Fatalf("a does not write: %+v", st)
	}
	a.Observe(Message{Sender: "b", Epoch: 5, Heard: []PeerEpoch{{"a", 7}}}, now)
	if st, err := a.Step(now); err != nil || !st.Writer || st.Epoch != 8 || !st.EpochChanged {
		t.Errorf("writer behind its peer's record: %+v, %v", st, err)
	}
}
