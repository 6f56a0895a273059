package scheduler

import (
	"fmt"
	"lvs-feedback/monitor"
	"lvs-feedback/replica"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"lvs-feedback/policy"
)

// drainThenDie runs one trial on a new pair on real loopback sockets: the
// active writes, the standby mirrors it; an operator drains C on the active
// (lvsctl drain: the call returns when the reply would reach the
// operator); after delay the active's monitor stops dead — no handover —
// and the standby gets the VIP. It reports whether the new active keeps C
// drained at 0 over its first cycles as the writer.
func drainThenDie(t *testing.T, delay time.Duration) (kept bool, reply string) {
	t.Helper()
	key := writeKey(t, 1)
	a, b := newPair(t, key)
	a.start(t, key, b)
	b.start(t, key, a)
	eventually(t, 10*time.Second, "a writes, b mirrors", func() bool {
		return a.writer() && sameWeights(a.weights(t), b.weights(t)) && b.m.Status().Sync.Frames["accepted"] > 0
	})
	rep, err := a.m.DrainConfirmed(t.Context(), svcKey, rsC)
	must(t, err)
	time.Sleep(delay)
	a.stop()
	b.role.set(Active)
	eventually(t, 10*time.Second, "b writes", b.writer)
	b.cycles(t, 3)
	st, w := b.stateOf(t, rsC)
	return st == policy.DrainedByOperator && w == 0, rep.String()
}

// TestDrainSurvivesFailover: a drain acknowledged on the active survives
// the active's death 0, 50 and 150 ms later (the pair runs at 200 ms), and
// at random moments up to two intervals later.
func TestDrainSurvivesFailover(t *testing.T) {
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			kept, reply := drainThenDie(t, d)
			if !kept {
				t.Errorf("death %v after the drain (%s): the new active lost it", d, reply)
			}
			if reply != "drained on both directors" {
				t.Errorf("reply %q, want %q", reply, "drained on both directors")
			}
		})
	}
}

// TestDrainSurvivesFailoverSweep: the same at random delays in [0, 400 ms)
// (DRAIN_SWEEP_TRIALS, default 8; the seed is logged).
func TestDrainSurvivesFailoverSweep(t *testing.T) {
	n := 8
	if v, err := strconv.Atoi(os.Getenv("DRAIN_SWEEP_TRIALS")); err == nil && v > 0 {
		n = v
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d trials", seed, n)
	rng := rand.New(rand.NewPCG(seed, 0))
	lost := 0
	for i := range n {
		d := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
		var kept bool
		t.Run(strconv.Itoa(i), func(t *testing.T) { kept, _ = drainThenDie(t, d) })
		if !kept {
			lost++
			t.Logf("trial %d: death %v after the drain: lost", i, d)
		}
	}
	t.Logf("drains lost: %d of %d", lost, n)
	if lost > 0 {
		t.Errorf("drains lost: %d of %d", lost, n)
	}
}

// TestDrainRepliesSayWhere: lvsctl drain and undrain, on the writer and on
// the follower of a pair on real loopback sockets, answer "on both
// directors" once the peer holds the change, and "here only: peer
// unreachable (…)" when it cannot be told. A drain made on the follower
// is held on the writer too: a weight found on it there goes back to 0.
func TestDrainRepliesSayWhere(t *testing.T) {
	key := writeKey(t, 1)
	a, b := newPair(t, key)
	a.start(t, key, b)
	b.start(t, key, a)
	eventually(t, 10*time.Second, "a writes, b mirrors", func() bool {
		return a.writer() && sameWeights(a.weights(t), b.weights(t)) && b.m.Status().Sync.Frames["accepted"] > 0
	})
	held := func(d *director) bool {
		t.Helper()
		for _, rec := range d.m.Snapshot().Dests { // the records as they stand, not as of the last cycle
			if rec.Key == (replica.DestKey{Service: svcKey, Dest: rsC}) {
				return rec.State == string(policy.DrainedByOperator) && rec.Held
			}
		}
		return false
	}
	for _, tc := range []struct {
		on, other *director
		verb      string
	}{{b, a, "drained"}, {b, a, "undrained"}, {a, b, "drained"}, {a, b, "undrained"}} {
		op := tc.on.m.DrainConfirmed
		if tc.verb == "undrained" {
			op = tc.on.m.UndrainConfirmed
		}
		rep, err := op(t.Context(), svcKey, rsC)
		must(t, err)
		if got := rep.String(); got != tc.verb+" on both directors" {
			t.Errorf("%s on %s: reply %q", tc.verb, tc.on.id, got)
		}
		// The peer holds it when the reply comes: no waiting here.
		if h := held(tc.other); h != (tc.verb == "drained") {
			t.Errorf("%s on %s: %s holds a drain: %v", tc.verb, tc.on.id, tc.other.id, h)
		}
		if tc.verb == "drained" {
			if w := tc.other.weights(t)[rsC]; w != 0 {
				t.Errorf("drained on %s: %s's weight %d", tc.on.id, tc.other.id, w)
			}
			// Someone sets a weight on the writer's table: the drain holds.
			must(t, a.table.SetWeight(svcKey, rsC, 0, 9))
			a.cycles(t, 2)
			if st, w := a.stateOf(t, rsC); st != policy.DrainedByOperator || w != 0 {
				t.Errorf("drained on %s, then weight 9 on a: %s at %d, want drained at 0", tc.on.id, st, w)
			}
		}
	}

	// A held drain on the writer; a weight appears on it in the follower's
	// table (a rebuild there): the writer's 0 goes over it, and the
	// writer's table never takes the weight.
	rep, err := a.m.DrainConfirmed(t.Context(), svcKey, rsC)
	must(t, err)
	if !rep.Everywhere() || !held(b) {
		t.Fatalf("drain on a: %s; b holds it: %v", rep, held(b))
	}
	must(t, b.table.SetWeight(svcKey, rsC, 0, 9))
	stop := every(t, 5*time.Millisecond, func(int) error {
		if w := a.weights(t)[rsC]; w != 0 {
			return fmt.Errorf("the writer's C at %d after a weight on the follower's held drain", w)
		}
		return nil
	})
	eventually(t, 10*time.Second, "b's C back to 0", func() bool { return b.weights(t)[rsC] == 0 })
	a.cycles(t, 2)
	stop()

	// The peer is gone: the reply says so, and the drain holds here.
	b.stop()
	start := time.Now()
	rep, err = a.m.DrainConfirmed(t.Context(), svcKey, rsB)
	must(t, err)
	if got := rep.String(); !strings.HasPrefix(got, "drained here only: peer unreachable (dir-b, "+b.ln.Addr().String()+": ") || rep.Everywhere() {
		t.Errorf("peer stopped: reply %q", got)
	}
	t.Logf("reply with the peer gone, after %v: %s", time.Since(start).Round(time.Millisecond), rep)
	if w := a.weights(t)[rsB]; w != 0 {
		t.Errorf("drained here only: weight %d", w)
	}
}

// TestDrainDeathDuringWait: the active dies while its drain waits for the
// standby (0 to 5 ms after the request). The reply comes all the same, and
// whenever it says "on both directors" the new active keeps the drain.
func TestDrainDeathDuringWait(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			key := writeKey(t, 1)
			a, b := newPair(t, key)
			a.start(t, key, b)
			b.start(t, key, a)
			eventually(t, 10*time.Second, "a writes, b mirrors", func() bool {
				return a.writer() && sameWeights(a.weights(t), b.weights(t)) && b.m.Status().Sync.Frames["accepted"] > 0
			})
			replied := make(chan monitor.Replication, 1)
			go func() {
				rep, err := a.m.DrainConfirmed(t.Context(), svcKey, rsC)
				if err != nil {
					t.Error(err)
				}
				replied <- rep
			}()
			time.Sleep(d)
			a.stop()
			var rep monitor.Replication
			select {
			case rep = <-replied:
			case <-time.After(10 * time.Second):
				t.Fatal("no reply 10 s after the active stopped")
			}
			b.role.set(Active)
			eventually(t, 10*time.Second, "b writes", b.writer)
			b.cycles(t, 3)
			st, w := b.stateOf(t, rsC)
			kept := st == policy.DrainedByOperator && w == 0
			t.Logf("death %v into the drain: reply %q; the new active kept it: %v", d, rep, kept)
			if rep.Everywhere() && !kept {
				t.Errorf("reply %q, but the new active has C %s at %d", rep, st, w)
			}
		})
	}
}
