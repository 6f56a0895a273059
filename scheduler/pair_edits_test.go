package scheduler

import (
	"testing"
	"time"

	"lvs-feedback/policy"
)

// TestDirectorPairEditNotReappliedAfterRestart: the writer applies a drain
// made on the standby, but its acknowledgement cannot reach the standby
// (the link from the writer is cut), so the standby keeps sending the
// edit. An operator then undrains the server on the writer itself, and
// the writer restarts. It must not apply the standby's drain a second
// time: the record of the edits it applied survives the restart.
func TestDirectorPairEditNotReappliedAfterRestart(t *testing.T) {
	key := writeKey(t, 1)
	a, b := newPair(t, key)
	dirA, dirB := t.TempDir(), t.TempDir()
	toB := newSyncRelay(t, b.ln.Addr().String()) // a → b goes through it
	a.run(t, key, dirA, [2]string{b.id, toB.addr()})
	b.run(t, key, dirB, a.addr())
	eventually(t, 10*time.Second, "a writes, b mirrors", func() bool { return a.writer() && sameWeights(a.weights(t), b.weights(t)) })

	toB.setCut(true) // b hears nothing from a from now on: no acknowledgement
	must(t, b.table.SetWeight(svcKey, rsC, b.weights(t)[rsC], 0))
	eventually(t, 10*time.Second, "the drain on b reaches a", func() bool {
		st, w := a.stateOf(t, rsC)
		return st == policy.DrainedByOperator && w == 0
	})
	// The operator undrains C on a.
	must(t, a.table.SetWeight(svcKey, rsC, 0, 10))
	eventually(t, 10*time.Second, "a takes the undrain", func() bool {
		st, w := a.stateOf(t, rsC)
		return st != policy.DrainedByOperator && w == 10
	})
	a.cycles(t, 3) // b's frames, still carrying its drain, keep coming
	if st, w := a.stateOf(t, rsC); st == policy.DrainedByOperator || w != 10 {
		t.Fatalf("the running writer applied the standby's drain twice: C %s at %d", st, w)
	}

	a.restart(t, key, dirA, [2]string{b.id, toB.addr()})
	eventually(t, 10*time.Second, "a writes again", a.writer)
	a.cycles(t, 5)
	if st, w := a.stateOf(t, rsC); st == policy.DrainedByOperator || w != 10 {
		t.Errorf("after a restart the writer applied the standby's drain again: C %s at %d, want undrained at 10", st, w)
	}

	// The link heals: the acknowledgement reaches b, which follows a again.
	toB.setCut(false)
	eventually(t, 10*time.Second, "b follows a's undrain", func() bool { return b.weights(t)[rsC] == 10 && sameWeights(a.weights(t), b.weights(t)) })
}
