package monitor

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"lvs-feedback/history"
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

// recorderRig is newRig's monitor with a history recorder; the
// recorder's directory is returned for reading the records back.
func recorderRig(t *testing.T) (*rig, *Monitor, *Recorder, string) {
	t.Helper()
	r := newRig(t)
	store, err := NewFileStore(r.dir)
	must(t, err)
	dir := t.TempDir()
	rec, err := OpenRecorder(dir, HistoryConfig{Enabled: true, FileMiB: 1, Files: 2}, nil, nil)
	must(t, err)
	t.Cleanup(func() { _ = rec.Close() })
	m, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock, History: rec}, false)
	must(t, err)
	return r, m, rec, dir
}

// recordsByCycle reads the history in dir back: each cycle's records by
// its start, each by server.
func recordsByCycle(t *testing.T, dir string) map[time.Time]map[string]history.Record {
	t.Helper()
	out := map[time.Time]map[string]history.Record{}
	if _, err := history.Read(dir, history.Filter{}, func(rec history.Record) {
		if out[rec.Time] == nil {
			out[rec.Time] = map[string]history.Record{}
		}
		out[rec.Time][rec.Server] = rec
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A history recorder reads each report on its own goroutine after the
// cycle has returned, and gives it back once written: a report must not
// change before the next cycle, the records must be what each cycle
// decided, and a later cycle must not write into a report the recorder
// has not given back (run with -race).
func TestRecorderWritesEveryReportAsItWas(t *testing.T) {
	r, m, rec, dir := recorderRig(t)
	var wants [][]DestStatus
	for i, load := range []float64{0.825, 1.95, 0, 0.5, 1.2} {
		r.agents.set(agentOf(rsA), load)
		rep := cycle(t, m)
		want := slices.Clone(rep.Dests)
		wants = append(wants, want)
		if i%2 == 0 {
			_, err := m.Guard(context.Background())
			must(t, err)
		}
		if !reflect.DeepEqual(rep.Dests, want) {
			t.Errorf("cycle %d's report changed with the backlog check after it", i+1)
		}
		r.advance(r.cfg.Interval)
		next := cycle(t, m) // a cycle with no check between: rep stays
		if !reflect.DeepEqual(rep.Dests, want) {
			t.Errorf("cycle %d's report changed with the next cycle", i+1)
		}
		wants = append(wants, slices.Clone(next.Dests))
		r.advance(r.cfg.Interval)
	}
	rec.Flush()
	got := recordsByCycle(t, dir)
	if len(got) != len(wants) {
		t.Fatalf("%d cycles in the history, want %d", len(got), len(wants))
	}
	for i, want := range wants {
		start := r.now.Add(-time.Duration(len(wants)-i) * r.cfg.Interval).UTC()
		for _, d := range want {
			g, ok := got[start][d.Key.Dest.String()]
			switch {
			case !ok:
				t.Errorf("cycle %d: no record of %s", i+1, d.Key.Dest)
			case g.WeightAfter != d.KernelWeight || g.Agent == nil || g.Agent.CPU != d.Report.CPU:
				t.Errorf("cycle %d, %s: record's weight %d, agent %+v; the report's %d, CPU %g", i+1, d.Key.Dest, g.WeightAfter, g.Agent, d.KernelWeight, d.Report.CPU)
			}
		}
	}
	if a, b := statusOf(t, CycleReport{Dests: wants[0]}, rsA).KernelWeight, statusOf(t, CycleReport{Dests: wants[2]}, rsA).KernelWeight; a != 13 || b == 13 {
		t.Errorf("A's weight in the first and third reports: %d and %d, want 13 and something else", a, b)
	}
}

// Once written, the recorder gives a report's entries back and the cycles
// fill them again: with a recorder, as without, the steady cycles and the
// backlog checks between them take turns in two sets of entries instead
// of allocating a set per cycle.
func TestRecorderGivesEntriesBack(t *testing.T) {
	for _, guard := range []bool{false, true} {
		t.Run(fmt.Sprintf("guard=%t", guard), func(t *testing.T) {
			r, m, rec, _ := recorderRig(t)
			r.agents.set(agentOf(rsA), 0.5)
			r.agents.set(agentOf(rsB), 0.5)
			sets := map[*DestStatus]int{}
			for i := range 12 {
				rep := cycle(t, m)
				sets[&rep.Dests[0]]++
				rec.Flush() // the recorder keeps up, as it does at a 5 s interval
				if guard {
					_, err := m.Guard(context.Background())
					must(t, err)
				}
				if i == 0 {
					continue
				}
				r.advance(r.cfg.Interval)
			}
			if len(sets) != 2 {
				t.Errorf("12 cycles filled %d sets of entries, want 2", len(sets))
			}
		})
	}
}

// A configured server missing from the table leaves every report one
// entry short of the configuration: the cycles must still take turns in
// two sets of entries, with the history and without.
func TestEntriesReusedWithAServerMissing(t *testing.T) {
	for _, history := range []bool{false, true} {
		t.Run(fmt.Sprintf("history=%t", history), func(t *testing.T) {
			var r *rig
			var m *Monitor
			var rec *Recorder
			if history {
				r, m, rec, _ = recorderRig(t)
			} else {
				r = newRig(t)
				m = r.monitor(false)
			}
			must(t, r.table.RemoveDestination(svcKey, rsC))
			sets := map[*DestStatus]int{}
			for range 12 {
				rep := cycle(t, m)
				if len(rep.Dests) != 2 {
					t.Fatalf("%d entries, want A and B", len(rep.Dests))
				}
				sets[&rep.Dests[0]]++
				if rec != nil {
					rec.Flush()
				}
				r.advance(r.cfg.Interval)
			}
			if len(sets) != 2 {
				t.Errorf("12 cycles filled %d sets of entries, want 2", len(sets))
			}
		})
	}
}

// Status, Explain and Last read the latest report while cycles run and
// the recorder gives reports back: no reader may see entries a later
// cycle fills (run with -race, which sees the write; the values see it
// without). Each cycle's agents all report the same load, a different one
// every cycle, so a report mixing two cycles shows.
func TestReadersNeverSeeRecycledEntries(t *testing.T) {
	r, m, _, dir := recorderRig(t)
	var mu sync.Mutex
	loads := map[time.Time]float64{} // by the cycle's start
	loadAt := func(start time.Time) (float64, bool) {
		mu.Lock()
		defer mu.Unlock()
		l, ok := loads[start]
		return l, ok
	}
	check := func(who string, rep CycleReport, d *DestStatus) error {
		want, ok := loadAt(rep.Start)
		if !ok || d.Report.CPU != want {
			return fmt.Errorf("%s: cycle at %s shows %s's agent CPU %g, want %g", who, rep.Start, d.Key.Dest, d.Report.CPU, want)
		}
		return nil
	}
	stop := make(chan struct{})
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	reader := func(read func() error) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if err := read(); err != nil {
				errs <- err
				return
			}
		}
	}
	wg.Add(3)
	go reader(func() error {
		st := m.Status()
		for i := range st.LastCycle.Dests {
			if err := check("Status", st.LastCycle, &st.LastCycle.Dests[i]); err != nil {
				return err
			}
		}
		return nil
	})
	go reader(func() error {
		last := m.Last()
		for i := range last.Dests {
			if err := check("Last", last, &last.Dests[i]); err != nil {
				return err
			}
		}
		return nil
	})
	go reader(func() error {
		e, err := m.Explain(svcKey, rsB)
		if err != nil {
			return nil // before the first cycle
		}
		if want := e.Dest.Report.CPU; e.Dest.Decision.Trace.Inputs.CPU != want {
			return fmt.Errorf("Explain: B's CPU input %g, its agent's report %g", e.Dest.Decision.Trace.Inputs.CPU, want)
		}
		return nil
	})
	const cycles = 200
	for i := range cycles {
		load := 0.25 + 0.5*float64(i%7)/7
		mu.Lock()
		loads[r.now] = load
		mu.Unlock()
		for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
			r.agents.set(agentOf(rs), load)
		}
		rep := cycle(t, m)
		for j := range rep.Dests {
			if err := check("Cycle", rep, &rep.Dests[j]); err != nil {
				t.Fatal(err)
			}
		}
		if i%3 == 0 {
			_, err := m.Guard(context.Background())
			must(t, err)
		}
		r.advance(r.cfg.Interval)
	}
	close(stop)
	wg.Wait()
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	m.deps.History.Flush()
	written := 0
	for start, recs := range recordsByCycle(t, dir) {
		want, _ := loadAt(start)
		for server, rec := range recs {
			written++
			if rec.Agent == nil || rec.Agent.CPU != want {
				t.Errorf("history: cycle at %s, %s: agent %+v, want CPU %g", start, server, rec.Agent, want)
			}
		}
	}
	if written == 0 {
		t.Error("no records written")
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
