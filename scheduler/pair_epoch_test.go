package scheduler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lvs-feedback/policy"
)

// TestDirectorPairLostEpochFile: the standby loses its epoch file and
// restarts at epoch 1, below the 4 the writer last accepted from it. It
// learns that from the writer's messages, moves past it (persisted), and
// its operator's drain reaches the writer.
func TestDirectorPairLostEpochFile(t *testing.T) {
	key := writeKey(t, 1)
	a, b := newPair(t, key)
	dirA, dirB := t.TempDir(), t.TempDir()
	epochFile := filepath.Join(dirB, "sync-epoch")
	must(t, os.WriteFile(epochFile, []byte("3\n"), 0o600)) // b starts at 4
	a.run(t, key, dirA, b.addr())
	b.run(t, key, dirB, a.addr())
	eventually(t, 10*time.Second, "a writes, b mirrors, a hears b", func() bool {
		return a.writer() && sameWeights(a.weights(t), b.weights(t)) && a.m.Status().Sync.Frames["accepted"] > 0
	})
	if e := b.m.Status().Sync.Epoch; e != 4 {
		t.Fatalf("b's epoch %d, want 4", e)
	}

	b.stop()
	must(t, os.Remove(epochFile))
	b.restart(t, key, dirB, a.addr())
	must(t, b.table.SetWeight(svcKey, rsC, b.weights(t)[rsC], 0))
	eventually(t, 20*time.Second, "the drain on the restarted b reaches a", func() bool {
		st, w := a.stateOf(t, rsC)
		return st == policy.DrainedByOperator && w == 0
	})
	if e := b.m.Status().Sync.Epoch; e <= 4 {
		t.Errorf("b's epoch %d: want above 4", e)
	}
	saved, err := os.ReadFile(epochFile)
	must(t, err)
	if got := strings.TrimSpace(string(saved)); got != "5" && got != "6" {
		t.Errorf("b's epoch file holds %q, want the epoch past 4", got)
	}
	t.Logf("a refused %d frames of b as stale before b moved to epoch %d", a.m.Status().Sync.Frames["stale_epoch"], b.m.Status().Sync.Epoch)
}
