package scheduler

// simDirector is a miniature lvs-monitor wired to this package exactly as
// the integration recipe in docs/director-pair.md says, with an in-memory
// IPVS table and a toy controller (each writer moves every managed weight
// by its own step per round, so two writers would visibly fight). The
// tests drive several of them, with or without sockets.

import (
	"errors"
	"fmt"
	"lvs-feedback/replica"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

type simDirector struct {
	mu    sync.Mutex
	id    string
	node  *Node
	table *ipvs.Mem
	rec   map[replica.DestKey]replica.DestState // the monitor's records (+ controller state)
	out   *Outbox
	step  float64 // the toy controller's step per round
	dead  bool

	kernelWrites int // SetWeight calls that changed the table
	ownWrites    int // of which by its own controller
	onApply      func(replica.Write, time.Time)
}

var simKeys = []replica.DestKey{
	key(svcWeb, "198.51.100.1:80"),
	key(svcWeb, "198.51.100.2:80"),
	key(svcWeb, "198.51.100.3:80"),
	key(svcDNS, "[2001:db8::1]:53"),
}

func newSimDirector(t testing.TB, id string, epoch uint64, step float64, now time.Time) *simDirector {
	t.Helper()
	tab := ipvs.NewMem()
	for _, svc := range []ipvs.ServiceKey{svcWeb, svcDNS} {
		if err := tab.AddService(svc, "wrr"); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range simKeys {
		if err := tab.AddDestination(k.Service, k.Dest, 10); err != nil {
			t.Fatal(err)
		}
	}
	n, err := NewNode(NodeConfig{Self: id, PeerTimeout: 3 * time.Second}, epoch, now)
	if err != nil {
		t.Fatal(err)
	}
	return &simDirector{id: id, node: n, table: tab, rec: map[replica.DestKey]replica.DestState{}, out: NewOutbox(epoch), step: step}
}

func (d *simDirector) weight(k replica.DestKey) int {
	w, err := d.table.Weight(k.Service, k.Dest)
	if err != nil {
		panic(err)
	}
	return w
}

func (d *simDirector) weights() map[replica.DestKey]int {
	m := map[replica.DestKey]int{}
	for _, k := range simKeys {
		m[k] = d.weight(k)
	}
	return m
}

// operator sets a weight on this director's table, as ipvsadm would.
func (d *simDirector) operator(k replica.DestKey, w int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.table.SetWeight(k.Service, k.Dest, d.weight(k), w); err != nil {
		panic(err)
	}
}

// reconcile is the monitor's ownership step, reduced: a table weight that
// differs from the record was set by an operator. On a follower the edit
// is also queued for the writer.
func (d *simDirector) reconcile() {
	for _, k := range simKeys {
		w := d.weight(k)
		r, known := d.rec[k]
		if !known {
			st := replica.StateManaged
			if w == 0 {
				st = replica.StateDrained
			}
			d.rec[k] = replica.DestState{Key: k, State: st, Weight: w, DefaultWeight: 10, Carried: policy.Carried{Ctrl: float64(w), CtrlSet: w > 0}}
			continue
		}
		if w == r.Weight {
			continue
		}
		if w == 0 {
			r.State, r.Weight = replica.StateDrained, 0
		} else {
			r.State, r.Weight, r.DefaultOverride, r.Ctrl, r.CtrlSet = replica.StateManaged, w, w, float64(w), true
		}
		d.rec[k] = r
		if !d.node.Writer() {
			d.out.Add(k, w)
		}
	}
}

// cycle is one monitor interval: reconcile, and if this director writes,
// run the controller and write.
func (d *simDirector) cycle() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return
	}
	d.reconcile()
	if !d.node.Writer() {
		return
	}
	d.node.ConfirmEdits() // the reconcile read the applied edits back
	for _, k := range simKeys {
		r := d.rec[k]
		if r.State != replica.StateManaged {
			continue
		}
		if !r.CtrlSet {
			r.Ctrl, r.CtrlSet = float64(r.Weight), true
		}
		r.Ctrl = math.Max(1, math.Min(100, r.Ctrl+d.step))
		to := int(math.Round(r.Ctrl))
		if to != d.weight(k) {
			if err := d.table.SetWeight(k.Service, k.Dest, d.weight(k), to); err != nil {
				panic(err)
			}
			d.kernelWrites++
			d.ownWrites++
		}
		r.Weight = to
		d.rec[k] = r
	}
}

// message is what the director publishes after its cycle.
func (d *simDirector) message() Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := Message{Sender: d.id, Epoch: d.node.Epoch(), Writer: d.node.Writer(), Heard: d.node.Heard()}
	if m.Writer {
		for _, k := range simKeys {
			m.Snapshot.Dests = append(m.Snapshot.Dests, d.rec[k])
		}
		m.Acks = d.node.Acks()
	} else {
		m.Edits = d.out.Pending()
	}
	return m
}

// handle processes received messages: Observe → adopt → edits → Step.
func (d *simDirector) handle(msgs []Message, now time.Time) NodeStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range msgs {
		d.node.Observe(m, now)
		if d.node.ShouldAdopt(m, now) {
			// Acks first: the writer's snapshot already reflects the
			// edits it acknowledges.
			d.out.Ack(d.id, m.Acks)
			d.adopt(m, now)
		}
		for _, e := range d.node.NewEdits(m) {
			// Record it, then replay the operator's write here; the next
			// reconcile classifies it exactly like a local ipvsadm.
			if err := d.node.Applied(m.Sender, e.Pos); err != nil {
				panic(err)
			}
			if err := d.table.SetWeight(e.Key.Service, e.Key.Dest, d.weight(e.Key), e.Weight); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
				panic(err)
			}
		}
	}
	st, err := d.node.Step(now)
	if err != nil {
		panic(err)
	}
	switch {
	case st.Writer:
		// Pending edits are moot for a writer: its table holds them.
		d.out = NewOutbox(d.node.Epoch())
	case st.EpochChanged:
		d.out.Renumber(st.Epoch)
	}
	return st
}

// adopt applies a writer's snapshot: Plan, write, take over the records.
func (d *simDirector) adopt(m Message, now time.Time) {
	own := make([]replica.CurrentWeight, 0, len(simKeys))
	for _, k := range simKeys {
		r, known := d.rec[k]
		own = append(own, replica.CurrentWeight{Key: k, Weight: d.weight(k), Expected: r.Weight, Known: known})
	}
	ch := replica.Plan(own, m.Snapshot, d.out.Pending())
	for _, e := range ch.LocalEdits {
		d.out.Add(e.Key, e.Weight)
	}
	failed := map[replica.DestKey]bool{}
	for _, w := range ch.Writes {
		if err := d.table.SetWeight(w.Key.Service, w.Key.Dest, w.From, w.To); err != nil {
			failed[w.Key] = true
			continue
		}
		d.kernelWrites++
		if d.onApply != nil {
			d.onApply(w, now)
		}
	}
	held := map[replica.DestKey]bool{}
	for _, k := range ch.Held {
		held[k] = true
	}
	for _, s := range m.Snapshot.Dests {
		if held[s.Key] || failed[s.Key] {
			continue
		}
		if _, ok := d.rec[s.Key]; !ok && !slices.Contains(simKeys, s.Key) {
			continue
		}
		d.rec[s.Key] = s
	}
}

// round runs one interval on every live director and delivers every
// message to every other live one (links says who hears whom; nil: all).
func simRound(ds []*simDirector, now time.Time, links func(from, to string) bool) {
	for _, d := range ds {
		d.cycle()
	}
	var msgs []Message
	for _, d := range ds {
		if !d.dead {
			msgs = append(msgs, d.message())
		}
	}
	for _, d := range ds {
		if d.dead {
			continue
		}
		var in []Message
		for _, m := range msgs {
			if m.Sender != d.id && (links == nil || links(m.Sender, d.id)) {
				in = append(in, m)
			}
		}
		d.handle(in, now)
	}
}

func writers(ds []*simDirector) []string {
	var w []string
	for _, d := range ds {
		if !d.dead && d.node.Writer() {
			w = append(w, d.id)
		}
	}
	return w
}

func sameTables(t *testing.T, when string, a, b *simDirector) {
	t.Helper()
	wa, wb := a.weights(), b.weights()
	for _, k := range simKeys {
		if wa[k] != wb[k] {
			t.Errorf("%s: %s: %s has %d, %s has %d", when, k, a.id, wa[k], b.id, wb[k])
		}
	}
}

// TestTwoActivesConverge: both directors hold the VIP from the start and
// both begin writing; their controllers pull in opposite directions. After
// one exchange exactly one writes, it stays the same one, and the loser's
// table follows the winner's — no weight ping-pong.
func TestTwoActivesConverge(t *testing.T) {
	for _, c := range []struct {
		name            string
		epochA, epochB  uint64
		winner, loserID string
	}{
		{"equal epochs: lower id wins", 1, 1, "a", "b"},
		{"higher epoch wins", 1, 4, "b", "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			a := newSimDirector(t, "a", c.epochA, +1, now)
			b := newSimDirector(t, "b", c.epochB, -1, now)
			ds := []*simDirector{a, b}
			for _, d := range ds {
				d.node.SetRole(Active)
				d.handle(nil, now)
			}
			if w := writers(ds); len(w) != 2 {
				t.Fatalf("setup: writers %v", w)
			}
			byID := map[string]*simDirector{"a": a, "b": b}
			win, lose := byID[c.winner], byID[c.loserID]
			const rounds = 40
			for r := 1; r <= rounds; r++ {
				now = now.Add(time.Second)
				loserOwn := lose.ownWrites
				simRound(ds, now, nil)
				w := writers(ds)
				if len(w) != 1 || w[0] != c.winner {
					t.Fatalf("round %d: writers %v, want only %s", r, w, c.winner)
				}
				if r > 1 && lose.ownWrites != loserOwn {
					t.Errorf("round %d: the loser wrote its own weights", r)
				}
				sameTables(t, fmt.Sprintf("round %d", r), win, lose)
			}
			// The weights moved one way only: the winner's.
			for _, k := range simKeys {
				want := 10 + rounds*int(win.step)
				want = max(1, min(100, want))
				if got := win.weight(k); got != want {
					t.Errorf("%s: weight %d, want %d (monotonic in the winner's direction)", k, got, want)
				}
			}
			// One write per destination per round on the follower, no more.
			if lose.kernelWrites > (rounds+1)*len(simKeys) {
				t.Errorf("the follower made %d writes in %d rounds", lose.kernelWrites, rounds)
			}
		})
	}
}

// TestFailoverCarriesOn: the standby mirrors the active (weights, drains,
// controller state); a drain on either director reaches both; when the
// active dies and the VIP moves, the new writer starts from the
// replicated weights — no reset, no drain forgotten.
func TestFailoverCarriesOn(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newSimDirector(t, "a", 3, +1, now)
	b := newSimDirector(t, "b", 1, +1, now)
	ds := []*simDirector{a, b}
	a.node.SetRole(Active)
	a.handle(nil, now)
	for r := 1; r <= 12; r++ {
		now = now.Add(time.Second)
		switch r {
		case 3:
			a.operator(simKeys[1], 0) // ipvsadm -w 0 on the active
		case 5:
			b.operator(simKeys[2], 0) // drained on the standby
		case 7:
			b.operator(simKeys[3], 55) // new weight set on the standby
		}
		simRound(ds, now, nil)
		if r >= 2 {
			sameTables(t, fmt.Sprintf("round %d", r), a, b)
		}
	}
	for _, d := range ds {
		if s := d.rec[simKeys[1]].State; s != replica.StateDrained {
			t.Errorf("%s: drain on the active: state %s", d.id, s)
		}
		if s := d.rec[simKeys[2]].State; s != replica.StateDrained {
			t.Errorf("%s: drain on the standby: state %s", d.id, s)
		}
		if r := d.rec[simKeys[3]]; r.State != replica.StateManaged || r.DefaultOverride != 55 {
			t.Errorf("%s: weight set on the standby: %+v", d.id, r)
		}
		if d.out.Len() != 0 {
			t.Errorf("%s: edits still pending: %+v", d.id, d.out.Pending())
		}
	}
	before := a.weights()
	ctrlBefore := a.rec[simKeys[0]].Ctrl
	if got := b.rec[simKeys[0]].Ctrl; got != ctrlBefore {
		t.Errorf("controller state not replicated: %v, want %v", got, ctrlBefore)
	}
	// The active dies; keepalived moves the VIP to b.
	a.dead = true
	b.mu.Lock()
	b.node.SetRole(Active)
	b.mu.Unlock()
	st := b.handle(nil, now)
	if !st.Writer || st.Epoch <= a.node.Epoch() {
		t.Fatalf("takeover: %+v", st)
	}
	if got := b.weights(); !mapsEqual(got, before) {
		t.Errorf("weights right after failover %v, want %v", got, before)
	}
	now = now.Add(time.Second)
	simRound(ds, now, nil)
	if got, want := b.weight(simKeys[0]), int(math.Round(ctrlBefore+1)); got != want {
		t.Errorf("the new writer did not continue from the replicated controller state: %d, want %d", got, want)
	}
	if b.weight(simKeys[1]) != 0 || b.weight(simKeys[2]) != 0 {
		t.Error("a drain was forgotten at failover")
	}
}

func mapsEqual(a, b map[replica.DestKey]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestOldActiveReturnsAdopts: a partition makes both directors write; when
// it heals, the old active (lower epoch) adopts the new one's state in one
// exchange instead of overwriting it.
func TestOldActiveReturnsAdopts(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newSimDirector(t, "a", 1, +1, now)
	b := newSimDirector(t, "b", 1, -1, now)
	ds := []*simDirector{a, b}
	a.node.SetRole(Active)
	a.handle(nil, now)
	for r := 0; r < 3; r++ {
		now = now.Add(time.Second)
		simRound(ds, now, nil)
	}
	cut := func(from, to string) bool { return false }
	// Partition: b's keepalived no longer hears a and takes the VIP.
	b.mu.Lock()
	b.node.SetRole(Active)
	b.mu.Unlock()
	for r := 0; r < 5; r++ {
		now = now.Add(time.Second)
		simRound(ds, now, cut)
	}
	if w := writers(ds); len(w) != 2 {
		t.Fatalf("during the partition: writers %v (each carries on alone)", w)
	}
	if b.node.Epoch() <= a.node.Epoch() {
		t.Fatalf("b took over at epoch %d, not above a's %d", b.node.Epoch(), a.node.Epoch())
	}
	bBefore := b.weights()
	// Heal: one exchange.
	now = now.Add(time.Second)
	simRound(ds, now, nil)
	if w := writers(ds); len(w) != 1 || w[0] != "b" {
		t.Fatalf("after healing: writers %v, want b", w)
	}
	sameTables(t, "after healing", a, b)
	for _, k := range simKeys {
		if b.weight(k) != bBefore[k]-1 && b.weight(k) != 1 {
			t.Errorf("%s: b's weight %d did not continue from its own %d: it was overwritten", k, b.weight(k), bBefore[k])
		}
	}
	st := a.node.Status(now)
	if st.Phase != PhaseYielded || st.Leader.Sender != "b" {
		t.Errorf("a: %+v", st)
	}
}

// TestThreeDirectors: one writer, two followers; the writer dies and the
// VIP moves to one follower, which takes over; the other follows it.
func TestThreeDirectors(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newSimDirector(t, "a", 5, +1, now)
	b := newSimDirector(t, "b", 2, +1, now)
	c := newSimDirector(t, "c", 9, +1, now)
	ds := []*simDirector{a, b, c}
	a.node.SetRole(Active)
	a.handle(nil, now)
	for r := 0; r < 4; r++ {
		now = now.Add(time.Second)
		simRound(ds, now, nil)
	}
	sameTables(t, "before", a, b)
	sameTables(t, "before", a, c)
	a.dead = true
	c.mu.Lock()
	c.node.SetRole(Active)
	c.mu.Unlock()
	for r := 0; r < 3; r++ {
		now = now.Add(time.Second)
		simRound(ds, now, nil)
		if w := writers(ds); len(w) != 1 || w[0] != "c" {
			t.Fatalf("round %d: writers %v", r, w)
		}
	}
	if l := b.node.Status(now).Leader; l.Sender != "c" {
		t.Errorf("b follows %v", l)
	}
	sameTables(t, "after", b, c)
}
