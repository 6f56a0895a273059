package monitor

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"lvs-feedback/replica"
)

// The cycle reuses its report's storage (CycleReport): what Last, Status
// and Explain hand out, and a report within its promised life, must not
// change under later cycles and backlog checks.
func TestKeptReportsSurviveLaterCycles(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	r.agents.set(agentOf(rsA), 0.825) // 10 → 13 → 15 (TestCycleFollowsLoad)
	first := cycle(t, m)
	firstWant := slices.Clone(first.Dests)
	last, status := m.Last(), m.Status()
	explained, err := m.Explain(svcKey, rsA)
	must(t, err)
	lastWant, statusWant := slices.Clone(last.Dests), slices.Clone(status.LastCycle.Dests)

	second := cycle(t, m) // fills other storage: first stays
	if !reflect.DeepEqual(first.Dests, firstWant) {
		t.Errorf("the first report changed with the next cycle")
	}
	secondWant := slices.Clone(second.Dests)
	if _, err := m.Guard(context.Background()); err != nil { // overwrites first's storage, not second's
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second.Dests, secondWant) {
		t.Errorf("the second report changed with the next backlog check")
	}
	r.agents.set(agentOf(rsB), 1.95)
	cycle(t, m)
	cycle(t, m)

	if !reflect.DeepEqual(last.Dests, lastWant) {
		t.Errorf("Last() changed under later cycles")
	}
	if !reflect.DeepEqual(status.LastCycle.Dests, statusWant) {
		t.Errorf("Status() changed under later cycles")
	}
	if got := statusOf(t, last, rsA).KernelWeight; got != 13 {
		t.Errorf("Last() after the first cycle: A's weight %d, want 13", got)
	}
	if got := statusOf(t, last, rsB).KernelWeight; got != 10 {
		t.Errorf("Last() after the first cycle: B's weight %d, want 10", got)
	}
	if explained.Dest.KernelWeight != 13 {
		t.Errorf("Explain after the first cycle: A's weight %d, want 13", explained.Dest.KernelWeight)
	}
	if now := m.Last(); statusOf(t, now, rsA).KernelWeight != 20 || statusOf(t, now, rsB).KernelWeight != 1 {
		t.Errorf("Last() after four cycles: A %d B %d, want 20 (2.5 a cycle) and 1", statusOf(t, now, rsA).KernelWeight, statusOf(t, now, rsB).KernelWeight)
	}
}

// A history recorder reads each report on its own goroutine after the
// cycle has returned: the cycles after must not write into it (run with
// -race).
func TestRecorderKeepsEveryReport(t *testing.T) {
	r := newRig(t)
	store, err := NewFileStore(r.dir)
	must(t, err)
	rec, err := OpenRecorder(t.TempDir(), HistoryConfig{Enabled: true, FileMiB: 1, Files: 2}, nil, nil)
	must(t, err)
	defer rec.Close()
	m, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock, History: rec}, false)
	must(t, err)
	var reps []CycleReport
	var wants [][]DestStatus
	for i, load := range []float64{0.825, 1.95, 0, 0.5, 1.2} {
		r.agents.set(agentOf(rsA), load)
		rep := cycle(t, m)
		reps, wants = append(reps, rep), append(wants, slices.Clone(rep.Dests))
		if i%2 == 0 {
			_, err := m.Guard(context.Background())
			must(t, err)
		}
		r.advance(r.cfg.Interval)
	}
	rec.Flush()
	for i := range reps {
		if !reflect.DeepEqual(reps[i].Dests, wants[i]) {
			t.Errorf("cycle %d's report changed under later cycles", i+1)
		}
	}
	if a, b := statusOf(t, reps[0], rsA).KernelWeight, statusOf(t, reps[1], rsA).KernelWeight; a != 13 || b == 13 {
		t.Errorf("A's weight in the first two reports: %d and %d, want 13 and something else", a, b)
	}
}

// The capacity controller's step is kept in the record's own storage: a
// copy of the report (Last, Explain) must carry its own, not one the next
// cycles fill.
func TestKeptCapacityStepsSurviveLaterCycles(t *testing.T) {
	r, m := newCapacityRig(t, "")
	setAllCPU(r, 0.5)
	cycle(t, m)
	last := m.Last()
	explained, err := m.Explain(svcKey, rsB)
	must(t, err)
	step := statusOf(t, last, rsB).Decision.Trace.Capacity
	if step == nil || explained.Dest.Decision.Trace.Capacity == nil {
		t.Fatal("no capacity step in the first cycle's record")
	}
	want, wantExplained := *step, *explained.Dest.Decision.Trace.Capacity
	if want.CPU != 0.5 || wantExplained.CPU != 0.5 {
		t.Fatalf("B's step: CPU %g (explain %g), want 0.5", want.CPU, wantExplained.CPU)
	}
	r.agents.set(agentOf(rsB), 0.9)
	for range 3 {
		cycle(t, m)
	}
	if got := statusOf(t, m.Last(), rsB).Decision.Trace.Capacity; got == nil || got.CPU != 0.9 {
		t.Fatalf("B's step after the load changed: %+v, want CPU 0.9", got)
	}
	// Printed: Factor is NaN, which DeepEqual does not equal.
	if got := *statusOf(t, last, rsB).Decision.Trace.Capacity; fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("Last()'s capacity step changed under later cycles: %+v, want %+v", got, want)
	}
	if got := *explained.Dest.Decision.Trace.Capacity; fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", wantExplained) {
		t.Errorf("Explain's capacity step changed under later cycles: %+v, want %+v", got, wantExplained)
	}
}

// A destination's ownership record is cached between cycles; a record a
// writer's snapshot changes without any weight write (here the default
// weight an operator overrode there) must reach the next cycle.
func TestAdoptedRecordReachesTheNextCycle(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	cycle(t, m)
	if got := statusOf(t, cycle(t, m), rsA).DefaultWeight; got != 10 {
		t.Fatalf("A's default weight %d before the snapshot, want 10", got)
	}
	m.SetFollower(true)
	snap := m.Snapshot()
	for i := range snap.Dests {
		if snap.Dests[i].Key == replica.DestKey(DestKey{Service: svcKey, Dest: rsA}) {
			snap.Dests[i].DefaultOverride, snap.Dests[i].OverriddenConfig = 15, 10
		}
	}
	if _, err := m.Adopt(snap, nil); err != nil {
		t.Fatal(err)
	}
	if got := statusOf(t, cycle(t, m), rsA).DefaultWeight; got != 15 {
		t.Errorf("A's default weight %d after adopting the writer's override, want 15", got)
	}
}
