package monitor

import (
	"context"
	"errors"
	"log/slog"
	"lvs-feedback/replica"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lvs-feedback/policy"
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
		m.SetFollower(true)
		snap := m.Snapshot()
		for i := range snap.Dests {
			if snap.Dests[i].Key == replica.DestKey(DestKey{Service: svcKey, Dest: rsC}) {
				snap.Dests[i].Weight = 4
			}
		}
		if _, err := m.Adopt(snap, nil); err != nil {
			t.Fatalf("adopt: %v", err)
		}
		if got, want := r.weight(rsC), map[bool]int{true: 10, false: 4}[dry]; got != want {
			t.Errorf("dry run %v: mirroring left C at %d, want %d", dry, got, want)
		}
		m.SetFollower(false)

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

// TestDrainSurvivesARebuiltTable: a drained server stays drained when the
// table is built anew with it at its configured weight — after a restart
// of the monitor (its connection counter went back), while the monitor
// runs (the service was missing for a cycle), and when a health checker
// removes and re-adds it — and the log says why; an operator's undrain of
// the live destination afterwards is still an undrain.
func TestDrainSurvivesARebuiltTable(t *testing.T) {
	r := newRig(t)
	var logs strings.Builder
	m := r.monitor(false)
	must(t, r.table.AddConnections(svcKey, rsB, 500))
	cycle(t, m)
	r.operatorSets(rsB, 0) // ipvsadm -e … -w 0
	cycle(t, m)

	build := func() { // as the configuration management (or keepalived) would
		must(t, r.table.AddService(svcKey, "wrr"))
		for _, rs := range []netip.AddrPort{rsA, rsB, rsC, rsX} {
			must(t, r.table.AddDestination(svcKey, rs, 10))
		}
	}
	wantDrained := func(what string, m *Monitor) {
		t.Helper()
		for range 3 {
			cycle(t, m)
			if w := r.weight(rsB); w != 0 {
				t.Fatalf("%s: drained B at %d", what, w)
			}
		}
		if st := m.Status().LastCycle; statusOf(t, st, rsB).State != policy.DrainedByOperator {
			t.Fatalf("%s: B is %s", what, statusOf(t, st, rsB).State)
		}
	}

	// The monitor stops; the table is rebuilt (ipvsadm -C, then the
	// services again); a new monitor starts.
	must(t, r.table.RemoveService(svcKey))
	build()
	store, err := NewFileStore(r.dir)
	must(t, err)
	m2, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, false)
	must(t, err)
	wantDrained("restart over a rebuilt table", m2)
	if !strings.Contains(logs.String(), "connection counter went back from 500 to 0") {
		t.Errorf("the log does not say why the drain was kept:\n%s", logs.String())
	}

	// While the monitor runs: the service is gone for a cycle, then back.
	must(t, r.table.RemoveService(svcKey))
	if _, err := m2.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	build()
	wantDrained("service missing for a cycle", m2)

	// A health checker removes and re-adds the server.
	must(t, r.table.RemoveDestination(svcKey, rsB))
	cycle(t, m2)
	must(t, r.table.AddDestination(svcKey, rsB, 10))
	wantDrained("removed and re-added", m2)
	if !strings.Contains(logs.String(), "it was missing from the table") {
		t.Errorf("the log does not say the destination was missing:\n%s", logs.String())
	}

	// The operator undrains the live destination: that is an undrain.
	r.operatorSets(rsB, 10)
	cycle(t, m2)
	if st := statusOf(t, m2.Status().LastCycle, rsB); st.State != policy.Managed || r.weight(rsB) == 0 {
		t.Errorf("undrain after a rebuild: B is %s at %d", st.State, r.weight(rsB))
	}
}
