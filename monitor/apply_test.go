package monitor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lvs-feedback/scheduler"
)

// TestDryRunWritesNothingAnywhere: under -dry-run no path writes to the
// table or the state file — not the cycle, not an operator's drain or
// undrain, not a follower taking its writer's weights, not a writer
// replaying a follower's edit — and each says why. The same requests on a
// monitor that is not a dry run write (the test can fail).
func TestDryRunWritesNothingAnywhere(t *testing.T) {
	for _, dry := range []bool{true, false} {
		r := newRig(t)
		m := r.monitor(dry)
		cycle(t, m) // adopt A, B, C at 10
		wantDry := func(what string, err error) {
			t.Helper()
			if dry != errors.Is(err, ErrDryRun) {
				t.Errorf("dry run %v: %s: error %v", dry, what, err)
			}
			if !dry && err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}

		err := m.Drain(svcKey, rsA)
		wantDry("drain", err)
		if got, want := r.weight(rsA), map[bool]int{true: 10, false: 0}[dry]; got != want {
			t.Errorf("dry run %v: drain left A at %d, want %d", dry, got, want)
		}

		r.operatorSets(rsB, 0) // drained with ipvsadm
		cycle(t, m)
		err = m.Undrain(svcKey, rsB)
		wantDry("undrain", err)
		if got, want := r.weight(rsB), map[bool]int{true: 0, false: 1}[dry]; got != want {
			t.Errorf("dry run %v: undrain left B at %d, want %d", dry, got, want)
		}

		// A writer's snapshot says C is at 4.
		m.setFollower(true)
		snap := m.snapshot()
		for i := range snap.Dests {
			if snap.Dests[i].Key == scheduler.DestKey(DestKey{Service: svcKey, Dest: rsC}) {
				snap.Dests[i].Weight = 4
			}
		}
		if _, err := m.adopt(snap, nil); err != nil {
			t.Fatalf("adopt: %v", err)
		}
		if got, want := r.weight(rsC), map[bool]int{true: 10, false: 4}[dry]; got != want {
			t.Errorf("dry run %v: mirroring left C at %d, want %d", dry, got, want)
		}
		m.setFollower(false)

		err = m.replayEdit(DestKey{Service: svcKey, Dest: rsC}, 7)
		wantDry("replay", err)
		if got, want := r.weight(rsC), map[bool]int{true: 10, false: 7}[dry]; got != want {
			t.Errorf("dry run %v: replay left C at %d, want %d", dry, got, want)
		}

		_, err = os.Stat(filepath.Join(r.dir, "state.json"))
		if dry && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dry run wrote the state file: %v", err)
		}
		if !dry && err != nil {
			t.Errorf("no state file without dry run: %v", err)
		}
	}
}

// TestRecordShowsTheWeightAsRead: after an ipvsadm edit between cycles,
// the cycle's record compares with the weight it read, not the weight the
// previous cycle wrote.
func TestRecordShowsTheWeightAsRead(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	r.agents.set(agentOf(rsA), 0.825) // 10 → 12.5 → 13
	cycle(t, m)
	r.operatorSets(rsA, 4) // new default weight 4
	r.agents.set(agentOf(rsA), 1.95)
	rep := cycle(t, m) // 4 + 5·∛(0.95 − 1.95) = −1 → min 1
	d := statusOf(t, rep, rsA)
	f, c := d.Decision.Trace.Formula, d.Decision.Trace.Compare
	if d.Decision.Before != 4 || f == nil || c == nil || f.Before != 4 || f.Next != 1 || c.Kernel != 4 || !c.Passes || !d.Outcome.Wrote || d.KernelWeight != 1 {
		t.Fatalf("record: before %d, formula %+v, compare %+v, wrote %v, kernel %d; want 4 → 1 compared with 4, written",
			d.Decision.Before, f, c, d.Outcome.Wrote, d.KernelWeight)
	}
	e, err := m.Explain(svcKey, rsA)
	must(t, err)
	if !strings.HasPrefix(e.Decision, "written: load 1.950") {
		t.Errorf("explain: %q", e.Decision)
	}
}
