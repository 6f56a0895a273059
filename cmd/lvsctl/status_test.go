package main

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"

	"lvs-feedback/control/api"
	"lvs-feedback/control/controltest"
)

// TestStatusSchedulerAndSummary: each service shows the scheduler read
// from the table and one count per server, by ownership record first.
func TestStatusSchedulerAndSummary(t *testing.T) {
	r := controltest.New(t, "")
	st := statusJSON(t, r)
	want := api.ServiceSummary{NotInTable: 3, DefaultSum: 30}
	if got := st.Services[0]; got.Scheduler != "" || got.Summary != want {
		t.Errorf("before the first cycle: scheduler %q, summary %+v; want none and %+v", got.Scheduler, got.Summary, want)
	}

	r.Cycle()
	if code, _, _ := lvsctl(t, r, "drain", svc, rsB); code != 0 {
		t.Fatalf("drain: exit %d", code)
	}
	r.Prober.Down(controltest.C)
	r.Cycle()
	r.Cycle() // fall = 2: C is down at its second failed probe

	st = statusJSON(t, r)
	s := st.Services[0]
	a := server(t, st, rsA)
	want = api.ServiceSummary{InRotation: 1, Drained: 1, Down: 1, WeightSum: a.KernelWeight, DefaultSum: 30}
	if s.Scheduler != "wrr" || s.Summary != want {
		t.Errorf("scheduler %q, summary %+v; want wrr and %+v", s.Scheduler, s.Summary, want)
	}
	if c := server(t, st, rsC); c.State != api.StateDown || c.KernelWeight != 0 {
		t.Fatalf("C: %+v, want down at weight 0", c)
	}
	// Who set each weight: C's 0 is lvs-monitor's (its probe), B's the operator's.
	for srv, want := range map[string]string{rsA: "table", rsB: "operator", rsC: "lvs-monitor"} {
		if got := server(t, st, srv).SetBy; got != want {
			t.Errorf("%s set_by %q, want %q", srv, got, want)
		}
	}

	code, out, _ := lvsctl(t, r, "status")
	if code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	line := fmt.Sprintf("  1 in rotation, 1 drained, 1 down; weights sum %d of defaults 30\n", a.KernelWeight)
	contains(t, "status table", out, svc+"  scheduler wrr\n"+line)

	// A server taken out of the table is counted apart, with its default.
	if err := r.Table.RemoveDestination(controltest.Service, controltest.A); err != nil {
		t.Fatal(err)
	}
	r.Cycle()
	st = statusJSON(t, r)
	want = api.ServiceSummary{Drained: 1, Down: 1, NotInTable: 1, DefaultSum: 30}
	if got := st.Services[0].Summary; got != want {
		t.Errorf("A removed: summary %+v, want %+v", got, want)
	}
	_, out, _ = lvsctl(t, r, "status")
	contains(t, "status table", out, "  0 in rotation, 1 drained, 1 down, 1 not in IPVS table; weights sum 0 of defaults 30\n")
}

func TestSummaryText(t *testing.T) {
	for _, c := range []struct {
		in   api.ServiceSummary
		want string
	}{
		{api.ServiceSummary{InRotation: 3, WeightSum: 27, DefaultSum: 30}, "3 in rotation, 0 drained, 0 down; weights sum 27 of defaults 30"},
		{api.ServiceSummary{InRotation: 1, Drained: 1, Down: 2, NotInTable: 1, ZeroWeight: 1, WeightSum: 10, DefaultSum: 60},
			"1 in rotation, 1 drained, 2 down, 1 not in IPVS table, 1 at weight 0; weights sum 10 of defaults 60"},
	} {
		if got := summaryText(c.in); got != c.want {
			t.Errorf("summaryText(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestStatusCapacityFigures: under the capacity controller each server's
// status carries the figures its decision recorded.
func TestStatusCapacityFigures(t *testing.T) {
	r := controltest.New(t, strings.Replace(controltest.Config, `controller = "lvs"`, `controller = "capacity"`, 1))
	for range 4 {
		for _, rs := range []netip.AddrPort{controltest.A, controltest.B, controltest.C} {
			if err := r.Table.AddConnections(controltest.Service, rs, 100); err != nil {
				t.Fatal(err)
			}
		}
		r.Cycle()
	}
	st := statusJSON(t, r)
	for _, name := range []string{rsA, rsB, rsC} {
		s := server(t, st, name)
		c := s.Capacity
		// 100 connections served per interval at 0.95 busy, every interval.
		if c == nil || c.Factor == nil || *c.Factor != 1 || math.Abs(c.Estimate-100/0.95) > 1e-9 || c.CPU != 0.95 || c.Weight != 10 {
			t.Errorf("%s: capacity %+v: want factor 1, estimate 100/0.95, CPU 0.95, weight 10", name, c)
		}
	}
	_, out, _ := lvsctl(t, r, "top", "-once")
	contains(t, "top -once", out, "×1.00")
}
