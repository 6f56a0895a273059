package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReconcile(t *testing.T) {
	tests := []struct {
		name        string
		rec         DestRecord
		known       bool
		kernel, cfg int
		wantRec     DestRecord
		wantChanged bool
	}{
		{"new at weight: adopted", DestRecord{}, false, 10, 10, DestRecord{State: Managed, SetBy: ByTable, Written: 10}, true},
		{"new at 0: operator drain", DestRecord{}, false, 0, 10, DestRecord{State: DrainedByOperator, SetBy: ByOperator}, true},
		{"managed, unchanged", DestRecord{State: Managed, Written: 12}, true, 12, 10, DestRecord{State: Managed, Written: 12}, false},
		{"managed, zeroed by someone: drained", DestRecord{State: Managed, Written: 12}, true, 0, 10, DestRecord{State: DrainedByOperator, SetBy: ByOperator}, true},
		{"managed, set to 30 by someone: new default", DestRecord{State: Managed, Written: 12}, true, 30, 10,
			DestRecord{State: Managed, SetBy: ByOperator, Written: 30, DefaultOverride: 30, OverriddenConfig: 10}, true},
		{"drained stays drained", DestRecord{State: DrainedByOperator}, true, 0, 10, DestRecord{State: DrainedByOperator}, false},
		{"undrained by operator", DestRecord{State: DrainedByOperator}, true, 7, 10,
			DestRecord{State: Managed, SetBy: ByOperator, Written: 7, DefaultOverride: 7, OverriddenConfig: 10}, true},
		{"down stays down at 0", DestRecord{State: Down, RestoreWeight: 12}, true, 0, 10, DestRecord{State: Down, RestoreWeight: 12}, false},
		{"down, set by operator", DestRecord{State: Down, RestoreWeight: 12}, true, 5, 10,
			DestRecord{State: Managed, SetBy: ByOperator, Written: 5, DefaultOverride: 5, OverriddenConfig: 10}, true},
	}
	for _, tt := range tests {
		got := Reconcile(tt.rec, tt.known, TableEntry{Weight: tt.kernel}, tt.cfg, Neighbour{})
		if got.Record != tt.wantRec || got.Changed != tt.wantChanged || got.Anew {
			t.Errorf("%s: Reconcile = %+v changed=%v anew=%v, want %+v changed=%v", tt.name, got.Record, got.Changed, got.Anew, tt.wantRec, tt.wantChanged)
		}
		if got.Changed && got.Reason == "" {
			t.Errorf("%s: a change without a reason", tt.name)
		}
	}
}

// TestReconcileTableRebuilt: a destination created anew — its counter
// below the one recorded when it left rotation, or seen missing — is not an
// operator's edit: a drain or a down mark stands (at the new, lower
// counter, so that a later undrain is one), a managed server is adopted
// at its new weight without a new default. The same weights on a live
// destination are edits.
func TestReconcileTableRebuilt(t *testing.T) {
	drained := DestRecord{State: DrainedByOperator, Counter: 5000, DefaultOverride: 14, OverriddenConfig: 10}
	for _, tt := range []struct {
		name     string
		rec      DestRecord
		table    TableEntry
		wantRec  DestRecord
		wantAnew bool
	}{
		{"drained, counter reset: drain kept at the new counter", drained, TableEntry{Weight: 10, Counter: 12},
			DestRecord{State: DrainedByOperator, Counter: 12, DefaultOverride: 14, OverriddenConfig: 10}, true},
		{"drained, seen missing: drain kept", drained, TableEntry{Weight: 10, Counter: 9000, Missing: true},
			DestRecord{State: DrainedByOperator, Counter: 9000, DefaultOverride: 14, OverriddenConfig: 10}, true},
		{"drained, counter where it was: an undrain", drained, TableEntry{Weight: 10, Counter: 5000},
			DestRecord{State: Managed, SetBy: ByOperator, Written: 10, DefaultOverride: 10, OverriddenConfig: 10}, false},
		{"drained, counter a little up (persistence): an undrain", drained, TableEntry{Weight: 7, Counter: 5003},
			DestRecord{State: Managed, SetBy: ByOperator, Written: 7, DefaultOverride: 7, OverriddenConfig: 10}, false},
		{"down, counter reset: still down", DestRecord{State: Down, RestoreWeight: 12, Counter: 80}, TableEntry{Weight: 10, Counter: 0},
			DestRecord{State: Down, RestoreWeight: 12}, true},
		{"managed, seen missing: adopted, no new default", DestRecord{State: Managed, Written: 7, DefaultOverride: 14, OverriddenConfig: 10},
			TableEntry{Weight: 10, Missing: true}, DestRecord{State: Managed, SetBy: ByTable, Written: 10, DefaultOverride: 14, OverriddenConfig: 10}, true},
		{"managed, seen missing, back at the weight lvs-monitor wrote: created anew all the same (slow start)", DestRecord{State: Managed, Written: 10},
			TableEntry{Weight: 10, Missing: true}, DestRecord{State: Managed, SetBy: ByTable, Written: 10}, true},
		{"managed, counter lower but not seen missing: an edit (managed counters are not recorded)", DestRecord{State: Managed, Written: 7},
			TableEntry{Weight: 10, Counter: 0}, DestRecord{State: Managed, SetBy: ByOperator, Written: 10, DefaultOverride: 10, OverriddenConfig: 10}, false},
	} {
		got := Reconcile(tt.rec, true, tt.table, 10, Neighbour{})
		if got.Record != tt.wantRec || got.Anew != tt.wantAnew || !got.Changed || got.Reason == "" {
			t.Errorf("%s: Reconcile = %+v anew=%v changed=%v %q, want %+v anew=%v", tt.name, got.Record, got.Anew, got.Changed, got.Reason, tt.wantRec, tt.wantAnew)
		}
	}
	// Leaving rotation records the counter.
	if got := Reconcile(DestRecord{State: Managed, Written: 10}, true, TableEntry{Weight: 0, Counter: 321}, 10, Neighbour{}); got.Record.Counter != 321 {
		t.Errorf("drained by another tool: counter %d, want 321", got.Record.Counter)
	}
	if d := Drain(DestRecord{State: Managed, Written: 10}, true, TableEntry{Weight: 10, Counter: 55}); d.Record.Counter != 55 {
		t.Errorf("lvsctl drain: counter %d, want 55", d.Record.Counter)
	}
}

// TestDecideRebuiltDrain: a drained destination the table holds at a
// non-zero weight (created anew: Reconcile kept the drain) is written back
// to 0, frozen service or not; a down one that is still unreachable too.
func TestDecideRebuiltDrain(t *testing.T) {
	e, err := NewEngine(Params{Weight: WeightParams{Controller: ControllerLVS, Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, frozen := range []bool{false, true} {
		o := Observed{Record: DestRecord{State: DrainedByOperator}, Configured: 10, Kernel: 10, Probed: true, ProbeErr: errors.New("refused")}
		d := NewDecision(KindCycle, 10, o.Record)
		e.decide(&o, &ServerState{}, &d, frozen, time.Unix(0, 0))
		if !d.Write || d.To != 0 || d.Record.State != DrainedByOperator {
			t.Errorf("frozen %v: drained at 10: write %v to %d state %s", frozen, d.Write, d.To, d.Record.State)
		}
	}
	o := Observed{Record: DestRecord{State: Down, RestoreWeight: 12}, Configured: 10, Kernel: 10, Probed: true, ProbeErr: errors.New("refused")}
	d := NewDecision(KindCycle, 10, o.Record)
	e.decide(&o, &ServerState{}, &d, false, time.Unix(0, 0))
	if !d.Write || d.To != 0 || d.Record.State != Down {
		t.Errorf("down at 10, unreachable: write %v to %d state %s", d.Write, d.To, d.Record.State)
	}
}

// TestReconcileHeldDrain: a server drained with lvsctl (Held) stays drained
// whatever weight the table shows — a re-added entry with its counter back
// (the kernel's trash), above the recorded one, seen missing, set by the
// health checker, or an ipvsadm edit: IPVS cannot tell them apart. The
// counter recorded follows the table's; the change is not passed on as an
// edit (Anew).
func TestReconcileHeldDrain(t *testing.T) {
	held := DestRecord{State: DrainedByOperator, SetBy: ByOperator, Held: true, Counter: 5000, DefaultOverride: 14, OverriddenConfig: 10}
	for _, tt := range []struct {
		name  string
		table TableEntry
		hc    string
		want  string // in the reason
	}{
		{"re-added, counter as it was", TableEntry{Weight: 10, Counter: 5000}, "", "weight 10 found on a server drained with lvsctl drain"},
		{"re-added, counter above", TableEntry{Weight: 7, Counter: 5400}, "", "weight 7 found"},
		{"counter back", TableEntry{Weight: 10, Counter: 3}, "", "its connection counter went back from 5000 to 3"},
		{"seen missing", TableEntry{Weight: 10, Counter: 5000, Missing: true}, "", "it was missing from the table"},
		{"health checker re-adds", TableEntry{Weight: 10, Counter: 5000, Missing: true}, "keepalived", "still drained"},
	} {
		got := Reconcile(held, true, tt.table, 10, Neighbour{HealthChecker: tt.hc})
		want := held
		want.Counter = tt.table.Counter
		if got.Record != want || !got.Changed || !got.Anew || got.Returned || !strings.Contains(got.Reason, tt.want) ||
			!strings.Contains(got.Reason, "lvsctl undrain ends") {
			t.Errorf("%s: Reconcile = %+v changed=%v anew=%v returned=%v %q, want %+v kept, reason with %q",
				tt.name, got.Record, got.Changed, got.Anew, got.Returned, got.Reason, want, tt.want)
		}
	}
	// At 0 nothing changes; an undrain starts a new record, not held.
	if got := Reconcile(held, true, TableEntry{Counter: 5000}, 10, Neighbour{}); got.Changed || got.Record != held {
		t.Errorf("held at 0: %+v changed=%v, want unchanged", got.Record, got.Changed)
	}
	if d := Undrain(held, 0, 10, Availability{}, 1); d.Record.Held || d.Record.State != Managed {
		t.Errorf("undrain: record %+v, want managed, not held", d.Record)
	}
}

func TestDefaultWeightOverrideClearedByConfigEdit(t *testing.T) {
	r := DestRecord{State: Managed, Written: 30, DefaultOverride: 30, OverriddenConfig: 10}
	if got := r.DefaultWeight(10); got != 30 {
		t.Errorf("override kept while config unchanged: got %d, want 30", got)
	}
	if got := r.DefaultWeight(20); got != 20 {
		t.Errorf("config edited to 20: got %d, want 20", got)
	}
}

func TestDecide(t *testing.T) {
	p := WeightParams{Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1}
	managed := DestRecord{State: Managed, Written: 10}
	probeErr := errors.New("connection refused")
	tests := []struct {
		name      string
		rec       DestRecord
		kernel    int
		obs       Observation
		ctrl      float64
		wantWrite bool
		wantTo    int
		wantState Ownership
		wantCtrl  float64
		ramp      float64 // 0 = no ramp
	}{
		{"drained never touched, even when unreachable", DestRecord{State: DrainedByOperator}, 0,
			Observation{ProbeErr: probeErr}, 0, false, 0, DrainedByOperator, 0, 0},
		{"unreachable goes to 0", managed, 10, Observation{ProbeErr: probeErr}, 10, true, 0, Down, 10, 0},
		{"down stays down while unreachable", DestRecord{State: Down, RestoreWeight: 10}, 0,
			Observation{ProbeErr: probeErr}, 10, false, 0, Down, 10, 0},
		{"down restored when it answers", DestRecord{State: Down, RestoreWeight: 14}, 0,
			Observation{ProbeOK: true}, 3, true, 14, Managed, 14, 0},
		{"down without restore weight gets default", DestRecord{State: Down}, 0,
			Observation{ProbeOK: true}, 3, true, 10, Managed, 10, 0},
		{"dead agent keeps the weight", managed, 10, Observation{ProbeOK: true, AgentErr: errors.New("timeout")}, 10, false, 0, Managed, 10, 0},
		// 10 + 5·∛(0.95−0.825) = 12.5 → 13; |13−10| > 1
		{"light load raises", managed, 10, Observation{ProbeOK: true, LoadOK: true, Load: 0.825}, 10, true, 13, Managed, 12.5, 0},
		// 10 + 5·∛(0.95−0.95+…) small: ∛(0.95−0.949) = 0.1 → 10.5 → 11 (rounds half up), |11−10| = 1 not > 1
		{"below threshold not written", managed, 10, Observation{ProbeOK: true, LoadOK: true, Load: 0.949}, 10, false, 0, Managed, 10.5, 0},
		// kernel 150 above scale·default 100: written back down to 100 even though close
		// slow start at 10 %: restore 14 → 1.4 → 1
		{"restored with slow start", DestRecord{State: Down, RestoreWeight: 14}, 0,
			Observation{ProbeOK: true}, 3, true, 1, Managed, 14, 0.1},
		// ramp 50 %: 12.5·0.5 = 6.25 → 6; written although |6−10| … any ramp step that changes is written
		{"ramping formula", managed, 10, Observation{ProbeOK: true, LoadOK: true, Load: 0.825}, 10, true, 6, Managed, 12.5, 0.5},
		// ramp 50 %, weight already at the ramped value: nothing to write
		{"ramp step unchanged", DestRecord{State: Managed, Written: 5}, 5, Observation{ProbeOK: true, LoadOK: true, Load: 0.95}, 10, false, 0, Managed, 10, 0.5},
		{"out of bounds corrected", DestRecord{State: Managed, Written: 150}, 150, Observation{ProbeOK: true, LoadOK: true, Load: 0.95}, 100, true, 100, Managed, 100, 0},
	}
	for _, tt := range tests {
		st := &ServerState{Ctrl: tt.ctrl, CtrlSet: true}
		a := decideOne(t, p, tt.rec, tt.kernel, tt.obs, st, tt.ramp)
		ctrl := st.Ctrl
		if a.Write != tt.wantWrite || (a.Write && a.To != tt.wantTo) || a.Record.State != tt.wantState {
			t.Errorf("%s: Decide = write=%v to=%d state=%s, want write=%v to=%d state=%s", tt.name, a.Write, a.To, a.Record.State, tt.wantWrite, tt.wantTo, tt.wantState)
		}
		if !near(ctrl, tt.wantCtrl) {
			t.Errorf("%s: controller weight %v, want %v", tt.name, ctrl, tt.wantCtrl)
		}
		if a.Write && a.Record.Written != a.To {
			t.Errorf("%s: record written %d, want %d", tt.name, a.Record.Written, a.To)
		}
	}
}

// Observation is a compact way to write what a table test observed.
type Observation struct {
	ProbeOK  bool
	ProbeErr error
	AgentErr error
	LoadOK   bool // Load holds an aggregate load
	Load     float64
}

// decideOne runs one server's cycle decision (availability rules and the
// controller p names) at slow-start factor ramp (0: none).
func decideOne(t *testing.T, p WeightParams, rec DestRecord, kernel int, ob Observation, st *ServerState, ramp float64) Decision {
	t.Helper()
	if p.Controller == "" {
		p.Controller = ControllerLVS
	}
	e, err := NewEngine(Params{Weight: p, Coefficients: Coefficients{CPU: 1}})
	if err != nil {
		t.Fatal(err)
	}
	o := Observed{Record: rec, Configured: 10, Kernel: kernel, NewConns: -1, Probed: true, Polled: true, AgentErr: ob.AgentErr}
	if !ob.ProbeOK {
		o.ProbeErr = ob.ProbeErr
	}
	d := NewDecision(KindCycle, kernel, rec)
	if ob.LoadOK {
		d.Trace.Load = ob.Load
	}
	if ramp == 0 {
		ramp = 1
	}
	e.step(&o, st, &d, ramp)
	return d
}

func TestDrainAndUndrain(t *testing.T) {
	override := DestRecord{State: Managed, Written: 14, DefaultOverride: 14, OverriddenConfig: 10}
	for _, tt := range []struct {
		name       string
		rec        DestRecord
		known      bool
		kernel     int
		wantWrite  bool
		wantChange bool
	}{
		{"managed at 14: written 14 → 0, override kept", override, true, 14, true, true},
		{"already drained with lvsctl at 0: nothing", DestRecord{State: DrainedByOperator, Held: true}, true, 0, false, false},
		{"drained with ipvsadm at 0: held from now on, nothing to write", DestRecord{State: DrainedByOperator}, true, 0, false, true},
		{"unknown at 0: recorded as drained, nothing to write", DestRecord{}, false, 0, false, true},
		{"down at 0: recorded as drained", DestRecord{State: Down, RestoreWeight: 10}, true, 0, false, true},
	} {
		d := Drain(tt.rec, tt.known, TableEntry{Weight: tt.kernel})
		if d.Write != tt.wantWrite || d.RecordChanged != tt.wantChange || d.Before != tt.kernel {
			t.Errorf("%s: write %v changed %v before %d", tt.name, d.Write, d.RecordChanged, d.Before)
		}
		if tt.wantChange && (d.To != 0 || d.Record.State != DrainedByOperator || !d.Record.Held || d.Record.DefaultOverride != tt.rec.DefaultOverride) {
			t.Errorf("%s: to %d record %+v", tt.name, d.To, d.Record)
		}
	}

	// Undrain ramps from 10 % of the default weight (the override 14 →
	// 1.4 → 1), and the controller goes on from 14 once written.
	av := Availability{SlowStart: 30 * time.Second, SlowStartFloor: 0.1}
	d := Undrain(DestRecord{State: DrainedByOperator, DefaultOverride: 14, OverriddenConfig: 10}, 0, 10, av, 1)
	if !d.Write || d.To != 1 || d.Record.State != Managed || d.Record.Written != 1 || d.Record.DefaultOverride != 14 ||
		!d.OnWrite.SetCtrl || d.OnWrite.Ctrl != 14 || !d.OnWrite.StartRamp {
		t.Errorf("undrain: %+v", d)
	}
	// Without slow start the full weight at once, no ramp.
	d = Undrain(DestRecord{State: DrainedByOperator}, 0, 10, Availability{SlowStartFloor: 0.1}, 1)
	if d.To != 10 || d.OnWrite.StartRamp {
		t.Errorf("undrain without slow start: to %d ramp %v", d.To, d.OnWrite.StartRamp)
	}
}

// TestFallAndRise: with fall 2 and rise 2 a managed server whose probes
// time out goes down at its second timeout in a row, not its first; a down
// server comes back at its second answer in a row; an answer between
// timeouts starts the count again; a refused probe is down at once.
func TestFallAndRise(t *testing.T) {
	e, err := NewEngine(Params{
		Weight:       WeightParams{Controller: ControllerLVS, Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1},
		Availability: Availability{Fall: 2, Rise: 2, SlowStartFloor: 0.1},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := &ServerState{Ctrl: 10, CtrlSet: true}
	rec, kernel := DestRecord{State: Managed, Written: 10}, 10
	timeout := errors.New("i/o timeout")
	for i, step := range []struct {
		up, refused bool
		wantWrite   bool
		wantTo      int
		wantState   Ownership
	}{
		{false, false, false, 0, Managed}, // 1st timeout: kept
		{true, false, false, 0, Managed},  // an answer: the count starts again
		{false, false, false, 0, Managed}, // 1st timeout again
		{false, false, true, 0, Down},     // 2nd in a row: down
		{false, false, false, 0, Down},    // still down
		{true, false, false, 0, Down},     // 1st answer: still down
		{true, false, true, 10, Managed},  // 2nd answer: weight 10 back (no slow start here)
		{false, true, true, 0, Down},      // refused: down at once
	} {
		o := Observed{Record: rec, Configured: 10, Kernel: kernel, Probed: true}
		switch {
		case step.refused:
			o.ProbeErr = errors.New("connection refused")
		case !step.up:
			o.ProbeErr, o.ProbeTimedOut = timeout, true
		}
		d := NewDecision(KindCycle, kernel, rec)
		e.step(&o, st, &d, 1)
		if d.Write != step.wantWrite || d.Write && d.To != step.wantTo || d.Record.State != step.wantState {
			t.Fatalf("probe %d (up %v): write %v to %d state %s, want write %v to %d state %s (fails %d passes %d)",
				i+1, step.up, d.Write, d.To, d.Record.State, step.wantWrite, step.wantTo, step.wantState, st.Fails, st.Passes)
		}
		if v := d.Verdict(e.Params(), &o); v == "" {
			t.Errorf("probe %d: no verdict", i+1)
		}
		rec = d.Record
		if d.Write {
			kernel = d.To
		}
	}
}

// TestReconcileHealthChecker: with a health checker (keepalived) writing
// the same service, its moves are told from an operator's and from
// lvs-monitor's own: its 0 is a down, not a drain; a drain stands over its
// re-add or re-enable; a server it puts back is not given a new default
// weight and is slow-started (Returned). One case per interaction
// docs/keepalived.md lists.
func TestReconcileHealthChecker(t *testing.T) {
	ka := Neighbour{HealthChecker: "keepalived"}
	ramping := Neighbour{HealthChecker: "keepalived", Ramping: true}
	drained := DestRecord{State: DrainedByOperator, SetBy: ByOperator, Counter: 40}
	for _, tt := range []struct {
		name        string
		rec         DestRecord
		known       bool
		table       TableEntry
		cfg         int
		n           Neighbour
		wantRec     DestRecord
		wantReturn  bool
		wantGoesOn  bool
		wantDefault int
	}{
		{"its 0 (inhibit_on_failure) before lvs-monitor saw the failure: down by the checker, not a drain",
			DestRecord{State: Managed, SetBy: ByMonitor, Written: 10}, true, TableEntry{Weight: 0, Counter: 90}, 10, ka,
			DestRecord{State: Down, SetBy: ByHealthChecker, RestoreWeight: 10, Counter: 90}, false, false, 10},
		{"an unknown destination at 0 (no state file): the checker's down",
			DestRecord{}, false, TableEntry{Weight: 0}, 10, ka,
			DestRecord{State: Down, SetBy: ByHealthChecker}, false, false, 10},
		{"drained, re-enabled at 10 by the checker (inhibit_on_failure: counter unchanged): the drain stands",
			drained, true, TableEntry{Weight: 10, Counter: 40}, 10, ka, drained, false, false, 10},
		{"drained, removed and re-added at 10 by the checker: the drain stands",
			drained, true, TableEntry{Weight: 10, Counter: 0, Missing: true}, 10, ka,
			DestRecord{State: DrainedByOperator, SetBy: ByOperator}, false, false, 10},
		{"down by the checker, re-enabled at 10: back, slow start, no new default",
			DestRecord{State: Down, SetBy: ByHealthChecker, RestoreWeight: 12, Counter: 90}, true, TableEntry{Weight: 10, Counter: 90}, 20, ka,
			DestRecord{State: Managed, SetBy: ByHealthChecker, Written: 10}, true, false, 20},
		{"down by lvs-monitor, removed and re-added at 10 by the checker: back, slow start",
			DestRecord{State: Down, SetBy: ByMonitor, RestoreWeight: 10, Counter: 90}, true, TableEntry{Weight: 10, Counter: 0, Missing: true}, 10, ka,
			DestRecord{State: Managed, SetBy: ByHealthChecker, Written: 10}, true, false, 10},
		{"down by lvs-monitor, re-enabled at 10 by the checker (inhibit_on_failure): back, slow start, no new default",
			DestRecord{State: Down, SetBy: ByMonitor, RestoreWeight: 10, Counter: 90}, true, TableEntry{Weight: 10, Counter: 90}, 10, ka,
			DestRecord{State: Managed, SetBy: ByHealthChecker, Written: 10}, true, false, 10},
		{"managed, removed by the checker before lvs-monitor marked it down, re-added at its weight: slow start",
			DestRecord{State: Managed, SetBy: ByMonitor, Written: 10}, true, TableEntry{Weight: 10, Missing: true}, 10, ka,
			DestRecord{State: Managed, SetBy: ByHealthChecker, Written: 10}, true, false, 10},
		{"different weights in the two files (lvs-monitor 20, keepalived 10): re-added at 10, the default stays 20",
			DestRecord{State: Managed, SetBy: ByMonitor, Written: 18}, true, TableEntry{Weight: 10, Missing: true}, 20, ka,
			DestRecord{State: Managed, SetBy: ByHealthChecker, Written: 10}, true, false, 20},
		{"the checker re-enables at 10 a server lvs-monitor is ramping: the ramp goes on, no new default",
			DestRecord{State: Managed, SetBy: ByMonitor, Written: 2}, true, TableEntry{Weight: 10, Counter: 5}, 20, ramping,
			DestRecord{State: Managed, SetBy: ByHealthChecker, Written: 10}, false, true, 20},
		{"an edit to 7 outside slow start is still an operator's: new default",
			DestRecord{State: Managed, SetBy: ByMonitor, Written: 10}, true, TableEntry{Weight: 7, Counter: 5}, 10, ka,
			DestRecord{State: Managed, SetBy: ByOperator, Written: 7, DefaultOverride: 7, OverriddenConfig: 10}, false, false, 7},
		{"down by lvs-monitor, re-added at 0 (keepalived restarted, its check failing): the checker's down now",
			DestRecord{State: Down, SetBy: ByMonitor, RestoreWeight: 10, Counter: 90}, true, TableEntry{Weight: 0, Missing: true}, 10, ka,
			DestRecord{State: Down, SetBy: ByHealthChecker, RestoreWeight: 10}, false, false, 10},
	} {
		got := Reconcile(tt.rec, tt.known, tt.table, tt.cfg, tt.n)
		if got.Record != tt.wantRec || got.Returned != tt.wantReturn || got.RampGoesOn != tt.wantGoesOn || !got.Changed || got.Reason == "" {
			t.Errorf("%s:\n Reconcile = %+v returned=%v goesOn=%v changed=%v %q\n want        %+v returned=%v goesOn=%v",
				tt.name, got.Record, got.Returned, got.RampGoesOn, got.Changed, got.Reason, tt.wantRec, tt.wantReturn, tt.wantGoesOn)
		}
		if d := got.Record.DefaultWeight(tt.cfg); d != tt.wantDefault {
			t.Errorf("%s: default weight %d, want %d", tt.name, d, tt.wantDefault)
		}
		if got.Record.State == DrainedByOperator && tt.rec.State != DrainedByOperator {
			t.Errorf("%s: the health checker's move recorded as an operator drain", tt.name)
		}
	}
	// Unchanged: the checker's down still at 0, a drain at 0, the monitor's weight.
	for _, rec := range []DestRecord{{State: Down, SetBy: ByHealthChecker}, drained, {State: Managed, SetBy: ByMonitor, Written: 9}} {
		w := rec.Written
		if got := Reconcile(rec, true, TableEntry{Weight: w, Counter: 40}, 10, ka); got.Changed {
			t.Errorf("%+v at %d: changed: %q", rec, w, got.Reason)
		}
	}
	// Without a health checker the same 0 is an operator drain, and a
	// re-enable of a drained server an undrain (why the key exists).
	if got := Reconcile(DestRecord{State: Managed, Written: 10}, true, TableEntry{Weight: 0}, 10, Neighbour{}); got.Record.State != DrainedByOperator {
		t.Errorf("no checker, 0: %+v, want drained", got.Record)
	}
	if got := Reconcile(drained, true, TableEntry{Weight: 10, Counter: 40}, 10, Neighbour{}); got.Record.State != Managed {
		t.Errorf("no checker, drained re-enabled: %+v, want managed (an undrain)", got.Record)
	}
}

// TestReconcileServerReturned: a server the health checker put back starts
// slow start now, towards its default weight (not the checker's); one it
// re-enables during a ramp keeps the ramp; the cycle's decision then writes
// the ramp's first step, not the checker's weight.
func TestReconcileServerReturned(t *testing.T) {
	t0 := time.Unix(1000, 0)
	st := &ServerState{Ctrl: 3, CtrlSet: true}
	res := ReconcileServer(DestRecord{State: Down, SetBy: ByHealthChecker, Counter: 9}, true, TableEntry{Weight: 10, Counter: 9}, 20, "keepalived", st, t0)
	if !res.Returned || st.Ctrl != 20 || !st.RampStart.Equal(t0) {
		t.Fatalf("returned: %+v ctrl %v ramp start %v", res, st.Ctrl, st.RampStart)
	}
	e, err := NewEngine(Params{Weight: WeightParams{Controller: ControllerLVS, Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1},
		Availability: Availability{SlowStart: 30 * time.Second, SlowStartFloor: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	o := Observed{Record: res.Record, Configured: 20, Kernel: 10, NewConns: -1, Probed: true, Polled: true}
	d := NewDecision(KindCycle, 10, o.Record)
	d.Trace.Load = 0.95
	e.decide(&o, st, &d, false, t0)
	if !d.Write || d.To != 2 || d.Record.SetBy != ByMonitor {
		t.Errorf("first cycle after the checker's return: write %v to %d set by %q, want 2 (20 × floor 0.1) by lvs-monitor (%s)", d.Write, d.To, d.Record.SetBy, d.Reason)
	}

	// Re-enabled at 10 during the ramp: neither the ramp nor the target moves.
	t1 := t0.Add(9 * time.Second)
	st = &ServerState{Ctrl: 20, CtrlSet: true, RampStart: t0}
	res = ReconcileServer(DestRecord{State: Managed, SetBy: ByMonitor, Written: 6}, true, TableEntry{Weight: 10, Counter: 50}, 20, "keepalived", st, t1)
	if !res.RampGoesOn || st.Ctrl != 20 || !st.RampStart.Equal(t0) || res.Record.DefaultWeight(20) != 20 {
		t.Errorf("re-enabled during the ramp: %+v ctrl %v ramp start %v", res, st.Ctrl, st.RampStart)
	}
	// Created anew without a checker: slow start too (from the kernel's weight).
	st = &ServerState{Ctrl: 10, CtrlSet: true}
	res = ReconcileServer(DestRecord{State: Managed, SetBy: ByMonitor, Written: 10}, true, TableEntry{Weight: 10, Missing: true}, 10, "", st, t1)
	if !res.Anew || !st.RampStart.Equal(t1) {
		t.Errorf("created anew at its own weight, no checker: %+v ramp start %v, want slow start", res, st.RampStart)
	}
}

// TestCheckerDownNotRestoredByProbe: lvs-monitor gives back the weight of
// a server it took down when its probes answer again, but not of one the
// health checker took out: the checker puts that one back.
func TestCheckerDownNotRestoredByProbe(t *testing.T) {
	p := WeightParams{Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1}
	st := &ServerState{Ctrl: 10, CtrlSet: true}
	d := decideOne(t, p, DestRecord{State: Down, SetBy: ByHealthChecker, RestoreWeight: 10}, 0, Observation{ProbeOK: true}, st, 0)
	if d.Write || d.Record.State != Down {
		t.Errorf("checker's down, probe answering: write %v to %d state %s, want left at 0", d.Write, d.To, d.Record.State)
	}
	o := Observed{Record: DestRecord{State: Down, SetBy: ByHealthChecker}, Probed: true}
	if v := d.Verdict(Params{}, &o); v == "" || v[:5] != "taken" {
		t.Errorf("verdict %q", v)
	}
	d = decideOne(t, p, DestRecord{State: Down, SetBy: ByMonitor, RestoreWeight: 10}, 0, Observation{ProbeOK: true}, st, 0)
	if !d.Write || d.To != 10 || d.Record.SetBy != ByMonitor {
		t.Errorf("lvs-monitor's down, probe answering: write %v to %d set by %q, want 10 by lvs-monitor", d.Write, d.To, d.Record.SetBy)
	}
}

// TestDownDuringSlowStartRestoresItsTarget: a server that goes down while
// slow start has it on a step of its ramp comes back heading for the
// controller's weight (16), not for the step it was on (2) — which,
// without an agent to move it, it kept for good — and, having relapsed,
// from half the floor; a ramp completed ends the relapses. Slow start
// 30 s, floor 0.1, the LVS formula at its target load (the controller's
// weight stays 16).
func TestDownDuringSlowStartRestoresItsTarget(t *testing.T) {
	e, err := NewEngine(Params{Weight: WeightParams{Controller: ControllerLVS, Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1},
		Availability: Availability{SlowStart: 30 * time.Second, SlowStartFloor: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	st := &ServerState{Ctrl: 16, CtrlSet: true}
	rec, kernel := DestRecord{State: Managed, SetBy: ByMonitor, Written: 16}, 16
	// cycle runs one cycle at t0+at with the probe refused or answered,
	// then applies a write as the monitor does (the ramp starts at a
	// write that starts it).
	cycle := func(at time.Duration, refused bool) Decision {
		t.Helper()
		now := t0.Add(at)
		o := Observed{Record: rec, Configured: 16, Kernel: kernel, NewConns: -1, Probed: true, Polled: true}
		if refused {
			o.ProbeErr = errors.New("connect: connection refused")
		}
		d := NewDecision(KindCycle, kernel, rec)
		d.Trace.Load = 0.95
		e.decide(&o, st, &d, false, now)
		if d.Write {
			rec, kernel = d.Record, d.To
			if d.OnWrite.StartRamp {
				st.RampStart = now
			}
		}
		return d
	}
	for _, step := range []struct {
		name                string
		at                  time.Duration
		refused             bool
		wantTo, wantRestore int
		wantState           Ownership
		wantRelapses        int
		wantReason          string
	}{
		{"down at its full weight", 0, true, 0, 16, Down, 0, "unreachable"},
		// 16 × floor 0.1 = 1.6 → 2
		{"back: the floor's step", 10 * time.Second, false, 2, 0, Managed, 0, "slow start up to 16"},
		// down 7 s into the ramp at 2: its restore weight is the ramp's 16
		{"down again, ramping", 17 * time.Second, true, 0, 16, Down, 1, "unreachable"},
		// 16 × floor 0.05 = 0.8 → min 1
		{"back after a relapse: half the floor", 25 * time.Second, false, 1, 0, Managed, 1, "from 0.05 of it (down during its slow start, 1 in a row)"},
		// 15 s of its 30: 16 × 0.5 = 8
		{"half-way through the ramp", 40 * time.Second, false, 8, 0, Managed, 1, "slow start 50%"},
		{"the ramp completed: 16, relapses over", 56 * time.Second, false, 16, 0, Managed, 0, ""},
		{"down, not ramping: the weight it held", 90 * time.Second, true, 0, 16, Down, 0, "unreachable"},
	} {
		d := cycle(step.at, step.refused)
		if !d.Write || d.To != step.wantTo || d.Record.State != step.wantState || d.Record.RestoreWeight != step.wantRestore || st.Relapses != step.wantRelapses || !strings.Contains(d.Reason, step.wantReason) {
			t.Fatalf("%s: write=%v to=%d state=%s restore=%d relapses=%d (%s), want to=%d state=%s restore=%d relapses=%d, reason with %q",
				step.name, d.Write, d.To, d.Record.State, d.Record.RestoreWeight, st.Relapses, d.Reason,
				step.wantTo, step.wantState, step.wantRestore, step.wantRelapses, step.wantReason)
		}
	}
}
