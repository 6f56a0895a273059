package policy

import (
	"errors"
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
		{"new at weight: adopted", DestRecord{}, false, 10, 10, DestRecord{State: Managed, Written: 10}, true},
		{"new at 0: operator drain", DestRecord{}, false, 0, 10, DestRecord{State: DrainedByOperator}, true},
		{"managed, unchanged", DestRecord{State: Managed, Written: 12}, true, 12, 10, DestRecord{State: Managed, Written: 12}, false},
		{"managed, zeroed by someone: drained", DestRecord{State: Managed, Written: 12}, true, 0, 10, DestRecord{State: DrainedByOperator}, true},
		{"managed, set to 30 by someone: new default", DestRecord{State: Managed, Written: 12}, true, 30, 10,
			DestRecord{State: Managed, Written: 30, DefaultOverride: 30, OverriddenConfig: 10}, true},
		{"drained stays drained", DestRecord{State: DrainedByOperator}, true, 0, 10, DestRecord{State: DrainedByOperator}, false},
		{"undrained by operator", DestRecord{State: DrainedByOperator}, true, 7, 10,
			DestRecord{State: Managed, Written: 7, DefaultOverride: 7, OverriddenConfig: 10}, true},
		{"down stays down at 0", DestRecord{State: Down, RestoreWeight: 12}, true, 0, 10, DestRecord{State: Down, RestoreWeight: 12}, false},
		{"down, set by operator", DestRecord{State: Down, RestoreWeight: 12}, true, 5, 10,
			DestRecord{State: Managed, Written: 5, DefaultOverride: 5, OverriddenConfig: 10}, true},
	}
	for _, tt := range tests {
		got := Reconcile(tt.rec, tt.known, TableEntry{Weight: tt.kernel}, tt.cfg)
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
			DestRecord{State: Managed, Written: 10, DefaultOverride: 10, OverriddenConfig: 10}, false},
		{"drained, counter a little up (persistence): an undrain", drained, TableEntry{Weight: 7, Counter: 5003},
			DestRecord{State: Managed, Written: 7, DefaultOverride: 7, OverriddenConfig: 10}, false},
		{"down, counter reset: still down", DestRecord{State: Down, RestoreWeight: 12, Counter: 80}, TableEntry{Weight: 10, Counter: 0},
			DestRecord{State: Down, RestoreWeight: 12}, true},
		{"managed, seen missing: adopted, no new default", DestRecord{State: Managed, Written: 7, DefaultOverride: 14, OverriddenConfig: 10},
			TableEntry{Weight: 10, Missing: true}, DestRecord{State: Managed, Written: 10, DefaultOverride: 14, OverriddenConfig: 10}, true},
		{"managed, counter lower but not seen missing: an edit (managed counters are not recorded)", DestRecord{State: Managed, Written: 7},
			TableEntry{Weight: 10, Counter: 0}, DestRecord{State: Managed, Written: 10, DefaultOverride: 10, OverriddenConfig: 10}, false},
	} {
		got := Reconcile(tt.rec, true, tt.table, 10)
		if got.Record != tt.wantRec || got.Anew != tt.wantAnew || !got.Changed || got.Reason == "" {
			t.Errorf("%s: Reconcile = %+v anew=%v changed=%v %q, want %+v anew=%v", tt.name, got.Record, got.Anew, got.Changed, got.Reason, tt.wantRec, tt.wantAnew)
		}
	}
	// Leaving rotation records the counter.
	if got := Reconcile(DestRecord{State: Managed, Written: 10}, true, TableEntry{Weight: 0, Counter: 321}, 10); got.Record.Counter != 321 {
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
	e, err := NewEngine(Params{Weight: p})
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
		{"already drained at 0: nothing", DestRecord{State: DrainedByOperator}, true, 0, false, false},
		{"unknown at 0: recorded as drained, nothing to write", DestRecord{}, false, 0, false, true},
		{"down at 0: recorded as drained", DestRecord{State: Down, RestoreWeight: 10}, true, 0, false, true},
	} {
		d := Drain(tt.rec, tt.known, TableEntry{Weight: tt.kernel})
		if d.Write != tt.wantWrite || d.RecordChanged != tt.wantChange || d.Before != tt.kernel {
			t.Errorf("%s: write %v changed %v before %d", tt.name, d.Write, d.RecordChanged, d.Before)
		}
		if tt.wantChange && (d.To != 0 || d.Record.State != DrainedByOperator || d.Record.DefaultOverride != tt.rec.DefaultOverride) {
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
