package monitor

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"lvs-feedback/policy"
)

func TestDrainAndUndrain(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	cycle(t, m)
	must(t, m.Drain(svcKey, rsB))
	if got := r.weight(rsB); got != 0 {
		t.Fatalf("drained: weight %d", got)
	}
	r.agents.set(agentOf(rsB), 0) // idle: the formula would raise it
	cycle(t, m)
	// A restart keeps the drain.
	m = r.monitor(false)
	rep := cycle(t, m)
	if s := statusOf(t, rep, rsB); s.State != policy.DrainedByOperator || s.KernelWeight != 0 {
		t.Fatalf("after cycles and a restart: %s weight %d", s.State, s.KernelWeight)
	}
	must(t, m.Drain(svcKey, rsB)) // draining twice is fine
	must(t, m.Undrain(svcKey, rsB))
	// Default 10, slow start from 10 %: 1.
	if got := r.weight(rsB); got != 1 {
		t.Errorf("undrained: weight %d, want 1 (slow start from the default 10)", got)
	}
	r.advance(30 * time.Second)
	rep = cycle(t, m)
	// The ramp is over; the formula ran from 10 at load 0: 14.9 → 15.
	if s := statusOf(t, rep, rsB); s.State != policy.Managed || s.KernelWeight != 15 || s.DefaultWeight != 10 {
		t.Errorf("after the ramp: %s weight %d default %d, want managed 15 default 10", s.State, s.KernelWeight, s.DefaultWeight)
	}
	if err := m.Drain(svcKey, rsX); !errors.Is(err, ErrNotManaged) {
		t.Errorf("draining an unlisted server: %v, want ErrNotManaged", err)
	}
	if got := r.weight(rsX); got != 10 {
		t.Errorf("unlisted server touched: %d", got)
	}
}

func TestReloadKeepsWeightsAndAppliesCoefficients(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	r.agents.set(agentOf(rsA), 0.825)
	cycle(t, m) // A: 12.5 → 13
	must(t, m.Drain(svcKey, rsC))
	// New coefficients: memory only; agents report memory 0 → load 0.
	cfg, err := ParseConfig("new.toml", []byte(strings.Replace(cpuOnlyConfig, "cpu = 1.0\nmemory = 0.0", "cpu = 0.0\nmemory = 1.0", 1)))
	must(t, err)
	cfg.StateDir = r.dir
	m.Reload(cfg)
	cycle(t, m)
	// A continues from 12.5 at load 0: 12.5 + 4.915 = 17.4 → 17; no reset to 10.
	if got := r.weight(rsA); got != 17 {
		t.Errorf("after reload: A weight %d, want 17", got)
	}
	if got := r.weight(rsC); got != 0 {
		t.Errorf("after reload: drain of C forgotten, weight %d", got)
	}
	m.ReloadFailed(errors.New("bad.toml:3: intervall: unknown key"))
	if st := m.Status(); st.ReloadErr == nil || st.Config.Coefficients.Memory != 1 {
		t.Errorf("status after failed reload: err %v, coefficients %+v", st.ReloadErr, st.Config.Coefficients)
	}
}

func TestExplain(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	r.agents.set(agentOf(rsA), 0.825)
	cycle(t, m)
	e, err := m.Explain(svcKey, rsA)
	must(t, err)
	sum := 0.0
	for _, term := range e.Terms {
		sum += term.Product
	}
	// load = 1·0.825; step = 5·∛0.125 = 2.5; 10 → 12.5 → 13 written.
	f := e.Dest.Decision.Trace.Formula
	if f == nil {
		t.Fatal("explain: no formula step recorded")
	}
	if !near(sum, 0.825) || !near(e.Dest.Decision.Trace.Load, 0.825) || !near(f.Step, 2.5) || f.Max != 100 || f.Next != 13 {
		t.Errorf("explain: terms sum %v load %v step %v max %v next %d", sum, e.Dest.Decision.Trace.Load, f.Step, f.Max, f.Next)
	}
	if e.Dest.Decision.Trace.CtrlBefore != 10 || e.Dest.Decision.Trace.CtrlAfter != 12.5 || !strings.HasPrefix(e.Decision, "written") {
		t.Errorf("explain: controller %v → %v, decision %q", e.Dest.Decision.Trace.CtrlBefore, e.Dest.Decision.Trace.CtrlAfter, e.Decision)
	}
	// C at target: not written, and the explanation says why.
	e, err = m.Explain(svcKey, rsC)
	must(t, err)
	if !strings.Contains(e.Decision, "not more than the threshold 1") {
		t.Errorf("explain C: %q", e.Decision)
	}
	if _, err := m.Explain(svcKey, netip.MustParseAddrPort("203.0.113.1:80")); !errors.Is(err, ErrNotManaged) {
		t.Errorf("explain unknown: %v", err)
	}
	if f := e.Dest.Decision.Trace.Formula; f == nil || math.IsNaN(f.Step) {
		t.Errorf("formula step %v for a computed load", f)
	}
}
