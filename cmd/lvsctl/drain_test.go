package main

import (
	"strings"
	"testing"
	"time"

	"lvs-feedback/control/api"
	"lvs-feedback/control/controltest"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func intp(n int) *int { return &n }

// TestDrainLeft: the counts lvs-monitor reports → whether the wait is over,
// the waiting line, the line when it is over, and the kernel timers named
// on a timeout: one line for each kind of entry left, none for the others.
func TestDrainLeft(t *testing.T) {
	const (
		activeLine   = "  active connections: end when client or server closes them, or after the tcp (ESTABLISHED) timeout of silence (ipvsadm -L --timeout)\n"
		inactiveLine = "  inactive connections: each removed when its state's timer ends: TIME_WAIT 120 s, CLOSE_WAIT 60 s, CLOSE 10 s; FIN_WAIT and UDP as tcpfin and udp in ipvsadm -L --timeout\n"
	)
	templLine := func(secs string) string {
		return "  persistence templates: each removed " + secs + " s (ipvsadm -p) after the last new connection it sent, not before its connections are gone; while it lives its client's new connections still come here unless net.ipv4.vs.expire_quiescent_template = 1\n"
	}
	cases := []struct {
		in     api.Connections
		empty  bool
		text   string
		timers string
	}{
		{api.Connections{ActiveConns: 5, InactiveConns: 2, PersistConns: intp(3), PersistTimeoutSeconds: 300}, false,
			"5 active, 2 inactive connections, 3 persistence templates", activeLine + inactiveLine + templLine("300")},
		{api.Connections{ActiveConns: 1, PersistConns: intp(0)}, false,
			"1 active, 0 inactive connections, 0 persistence templates", activeLine},
		{api.Connections{InactiveConns: 611, PersistConns: intp(0)}, false,
			"0 active, 611 inactive connections, 0 persistence templates", inactiveLine},
		{api.Connections{PersistConns: intp(1), PersistTimeoutSeconds: 10}, false,
			"0 active, 0 inactive connections, 1 persistence template", templLine("10")},
		{api.Connections{PersistConns: intp(0), PersistTimeoutSeconds: 10}, true,
			"0 active, 0 inactive connections, 0 persistence templates", ""},
		// An lvs-monitor that does not report templates: connections only.
		{api.Connections{InactiveConns: 4}, false, "0 active, 4 inactive connections", inactiveLine},
		{api.Connections{}, true, "0 active, 0 inactive connections", ""},
	}
	for _, c := range cases {
		l := leftOf(c.in)
		if l.empty() != c.empty || l.String() != c.text || l.timers() != c.timers {
			t.Errorf("%+v: empty %v, %q, timers\n%s; want %v, %q, timers\n%s", c.in, l.empty(), l.String(), l.timers(), c.empty, c.text, c.timers)
		}
	}
	if got := leftOf(api.Connections{PersistConns: intp(0)}).doneText(); got != "no connections and no persistence templates left" {
		t.Errorf("done with templates counted: %q", got)
	}
	if got := leftOf(api.Connections{}).doneText(); !strings.Contains(got, "persistence templates not counted") {
		t.Errorf("done without templates counted: %q", got)
	}
}

// TestDrainWaitTimeoutTemplates: with no connection left but persistence
// templates, --wait waits for them and, at its timeout, exits 4 naming
// them and the service's persistence timeout.
func TestDrainWaitTimeoutTemplates(t *testing.T) {
	r := controltest.New(t, "")
	r.Cycle()
	must(t, r.Table.SetPersistTimeout(controltest.Service, 360*time.Second))
	must(t, r.Table.SetPersistConns(controltest.Service, controltest.B, 4))
	code, out, errOut := lvsctl(t, r, "drain", "--wait", "--timeout", "200ms", svc, rsB)
	if code != exitWaitTimeout {
		t.Fatalf("exit %d, want %d", code, exitWaitTimeout)
	}
	contains(t, "output", out, "waiting: 0 active, 0 inactive connections, 4 persistence templates (")
	want := "lvsctl: " + svc + " " + rsB + ": still 0 active, 0 inactive connections, 4 persistence templates after 200ms; the server stays drained\n" +
		"  persistence templates: each removed 360 s (ipvsadm -p) after the last new connection it sent"
	if !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 2 {
		t.Errorf("stderr:\n%s\nwant two lines, starting\n%s", errOut, want)
	}
	if w := r.Weight(controltest.B); w != 0 {
		t.Errorf("weight after the timeout: %d, want 0 (the drain stands)", w)
	}
}
