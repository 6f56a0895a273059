package monitor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"lvs-feedback/policy"
)

// TestDrainSurvivesRebuild: a server drained with lvsctl drain is removed
// from the table and added again between two cycles (a keepalived reload,
// ipvsadm -C and a restore, an operator's script), and the new entry has
// carried as many connections as the old one had — IPVS gives a
// destination re-added within its trash period its old counters back, so
// nothing in the table tells the new entry from an edit. The drain stands,
// across a restart too; only lvsctl undrain ends it, and the log says so.
func TestDrainSurvivesRebuild(t *testing.T) {
	var logs bytes.Buffer
	r := newRig(t)
	mk := func() *Monitor {
		m := r.monitor(false)
		m.log = slog.New(slog.NewTextHandler(&logs, nil))
		return m
	}
	m := mk()
	must(t, r.table.AddConnections(svcKey, rsC, 50))
	cycle(t, m)
	must(t, m.Drain(svcKey, rsC))
	cycle(t, m)

	rebuild := func(weight int, conns uint32) {
		t.Helper()
		must(t, r.table.RemoveDestination(svcKey, rsC))
		must(t, r.table.AddDestination(svcKey, rsC, weight))
		must(t, r.table.AddConnections(svcKey, rsC, conns))
	}
	for i, tc := range []struct {
		name    string
		weight  int
		conns   uint32
		restart bool
	}{
		{"re-added with its counter back (trash)", 10, 50, false},
		{"re-added, counter above the recorded one", 10, 80, false},
		{"re-added while lvs-monitor was stopped", 7, 120, true},
	} {
		rebuild(tc.weight, tc.conns)
		if tc.restart {
			m = mk()
		}
		rep := cycle(t, m)
		if s := statusOf(t, rep, rsC); s.State != policy.DrainedByOperator || r.weight(rsC) != 0 {
			t.Errorf("%d %s: C %s at weight %d, want drained at 0", i, tc.name, s.State, r.weight(rsC))
		}
	}
	// An edit with ipvsadm on a server drained with lvsctl: IPVS cannot tell
	// it from a re-add, so it is taken for one; the log says what ends the drain.
	r.operatorSets(rsC, 5)
	rep := cycle(t, m)
	if s := statusOf(t, rep, rsC); s.State != policy.DrainedByOperator || r.weight(rsC) != 0 {
		t.Errorf("ipvsadm weight on an lvsctl drain: C %s at %d, want drained at 0", s.State, r.weight(rsC))
	}
	if !strings.Contains(logs.String(), "lvsctl undrain ends the drain") {
		t.Errorf("no log line says how the drain ends:\n%s", logs.String())
	}
	must(t, m.Undrain(svcKey, rsC))
	rep = cycle(t, m)
	if s := statusOf(t, rep, rsC); s.State != policy.Managed || r.weight(rsC) == 0 {
		t.Errorf("after lvsctl undrain: C %s at %d, want managed", s.State, r.weight(rsC))
	}
	if !strings.Contains(logs.String(), "undrained by operator (lvsctl)") {
		t.Errorf("the undrain's log line does not name lvsctl:\n%s", logs.String())
	}
}

// TestIpvsadmDrainEndsWithWeightEdit: a drain made with ipvsadm -w 0 is
// ended by an ipvsadm weight edit, and the log says it was a weight edit.
func TestIpvsadmDrainEndsWithWeightEdit(t *testing.T) {
	var logs bytes.Buffer
	r := newRig(t)
	m := r.monitor(false)
	m.log = slog.New(slog.NewTextHandler(&logs, nil))
	cycle(t, m)
	r.operatorSets(rsC, 0)
	if s := statusOf(t, cycle(t, m), rsC); s.State != policy.DrainedByOperator {
		t.Fatalf("ipvsadm -w 0: C %s, want drained", s.State)
	}
	r.operatorSets(rsC, 7)
	if s := statusOf(t, cycle(t, m), rsC); s.State != policy.Managed || s.DefaultWeight != 7 {
		t.Errorf("ipvsadm -w 7 on an ipvsadm drain: C %s default %d, want managed at default 7", s.State, s.DefaultWeight)
	}
	if !strings.Contains(logs.String(), "undrained by operator at weight 7: a weight edit") {
		t.Errorf("the undrain's log line does not say it was a weight edit:\n%s", logs.String())
	}
}
