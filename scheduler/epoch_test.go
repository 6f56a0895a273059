package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestEpochStore(t *testing.T) {
	p := filepath.Join(t.TempDir(), "epoch")
	s := NewEpochStore(p)
	if e, err := s.Load(); err != nil || e != 0 {
		t.Fatalf("missing file: %d, %v", e, err)
	}
	for want := uint64(1); want <= 3; want++ {
		e, err := s.Bump()
		if err != nil || e != want {
			t.Fatalf("Bump = %d, %v; want %d", e, err, want)
		}
	}
	if err := s.Save(10); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(9); err == nil {
		t.Error("the epoch moved backwards")
	}
	// A restart (a new store on the same file) continues above it.
	if e, err := NewEpochStore(p).Bump(); err != nil || e != 11 {
		t.Errorf("after restart: %d, %v", e, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o", fi.Mode().Perm())
	}
	if err := os.WriteFile(p, []byte("eleven\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bump(); !errors.Is(err, ErrCorruptEpoch) {
		t.Errorf("corrupt file: %v", err)
	}
}

// TestEpochSurvivesRestartInNode: a director that restarts never reuses
// an epoch, so its peers accept its new messages (sequence back at 1) and
// its new claim beats its old one.
func TestEpochSurvivesRestartInNode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "epoch")
	store := NewEpochStore(p)
	k := testKey(t, 1)
	v, _ := NewVerifier(VerifierConfig{Key: k, Self: "b"})
	now := time.Unix(1000, 0)
	var claims []Claim
	for run := range 3 {
		e, err := store.Bump()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := NewNode(NodeConfig{Self: "a", PeerTimeout: time.Second, SaveEpoch: store.Save}, e, now)
		n.SetRole(Active)
		st, err := n.Step(now)
		if err != nil || !st.Writer {
			t.Fatalf("run %d: %+v %v", run, st, err)
		}
		claims = append(claims, Claim{"a", st.Epoch})
		for seq := uint64(1); seq <= 3; seq++ {
			if _, err := v.Verify(frameFor(t, k, Message{Sender: "a", Epoch: n.Epoch(), Seq: seq, Writer: true}), fresh()); err != nil {
				t.Fatalf("run %d seq %d: %v", run, seq, err)
			}
		}
	}
	for i := 1; i < len(claims); i++ {
		if !claims[i].Beats(claims[i-1]) {
			t.Errorf("claim %v after a restart does not beat %v", claims[i], claims[i-1])
		}
	}
}

func TestEpochStoreConcurrentBumps(t *testing.T) {
	s := NewEpochStore(filepath.Join(t.TempDir(), "epoch"))
	var wg sync.WaitGroup
	seen := make(chan uint64, 20)
	for range 20 {
		wg.Go(func() {
			e, err := s.Bump()
			if err != nil {
				t.Error(err)
			}
			seen <- e
		})
	}
	wg.Wait()
	close(seen)
	got := map[uint64]bool{}
	for e := range seen {
		if got[e] {
			t.Errorf("epoch %d handed out twice", e)
		}
		got[e] = true
	}
}

// TestStoresRefuseSymlinks: an epoch or applied-edits file that is a
// symbolic link is refused, not read through (a planted link would choose
// the director's epoch or its record of applied edits), and a save
// replaces the link without writing through it.
func TestStoresRefuseSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("41\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"epoch", "applied"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := NewEpochStore(filepath.Join(dir, "epoch")).Load(); err == nil {
		t.Errorf("epoch through a link: %d, nil error; want a refusal", e)
	}
	if _, err := NewAppliedStore(filepath.Join(dir, "applied")).Load(); err == nil {
		t.Error("applied edits through a link: nil error; want a refusal")
	}
	if err := writeDurably(filepath.Join(dir, "epoch"), []byte("7\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "41\n" {
		t.Errorf("the link's target now holds %q; want it untouched", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "epoch")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("epoch after a save: %v, %v; want a regular file", fi, err)
	}
}
