package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lvs-feedback/control/api"
	"lvs-feedback/control/controltest"
)

func ptr(v float64) *float64 { return &v }

// topStatus is a hand-built status: one service under wlc with an active
// server decided by the capacity controller, a ramping one under the lvs
// formula, a drained one, a down one and one missing from the table.
func topStatus() api.Status {
	at := time.Date(2026, 11, 30, 12, 0, 5, 0, time.UTC)
	return api.Status{
		Now:    at.Add(300 * time.Millisecond),
		Cycle:  &api.Cycle{Start: at, DurationSeconds: 0.0123, Writes: 2},
		Config: api.ConfigSummary{IntervalSeconds: 5},
		Reload: api.ReloadStatus{OK: true},
		Services: []api.ServiceStatus{{
			Service:   "192.0.2.10:80/tcp",
			Scheduler: "wlc",
			Summary:   api.ServiceSummary{InRotation: 2, Drained: 1, Down: 1, NotInTable: 1, WeightSum: 15, DefaultSum: 50},
			Servers: []api.ServerStatus{
				{Server: "198.51.100.11:80", State: api.StateActive, Ownership: api.OwnershipManaged, KernelWeight: 12, DefaultWeight: 10,
					Load: ptr(0.6123), Inputs: &api.Inputs{Input: 1, CPU: ptr(0.55), Response: 0.4}, ActiveConns: 7, NewConns: 206, Ramp: 1,
					ProbeRTTSeconds: 0.0404, Capacity: &api.Capacity{Factor: ptr(1.084), CPU: 0.61, Estimate: 330, Weight: 12},
					LastChange: "capacity ×1.08 of the median: 10 → 12"},
				{Server: "198.51.100.12:80", State: api.StateRamping, Ownership: api.OwnershipManaged, KernelWeight: 3, DefaultWeight: 10,
					Load: ptr(0.2), Inputs: &api.Inputs{Input: 0.5, CPU: ptr(0.1), Response: 0.1}, NewConns: -1, Ramp: 0.3,
					ProbeRTTSeconds: 0.010},
				{Server: "198.51.100.13:80", State: api.StateDrained, Ownership: api.OwnershipDrained, DefaultWeight: 10, ActiveConns: 2, NewConns: 0, Ramp: 1},
				{Server: "198.51.100.14:80", State: api.StateDown, Ownership: api.OwnershipDown, DefaultWeight: 10, NewConns: 0, Ramp: 1,
					ProbeError: "http probe: connection refused", LastChange: "probe failed twice: down\nsecond line"},
				{Server: "198.51.100.15:80", State: api.StateAbsent, DefaultWeight: 10, NewConns: -1, Ramp: 1,
					LastChange: "not in the IPVS table at the last cycle"},
			},
		}},
	}
}

func TestRenderTop(t *testing.T) {
	st := topStatus()
	mem := newTopMemory()
	if !mem.observe(st) {
		t.Fatal("first status not a new frame")
	}
	if mem.observe(st) {
		t.Error("the same cycle again is a new frame")
	}
	lines := renderTop(topFrame{Status: st, Frame: mem.frames, Changes: mem.changes, Keys: true}, time.UTC, 0, 0)
	want := []string{
		"lvs-monitor top  frame 1  cycle 12:00:05 (took 12.3ms, 2 written), interval 5s  q quits",
		"",
		"192.0.2.10:80/tcp  scheduler wlc  2 in rotation, 1 drained, 1 down, 1 not in IPVS table; weights sum 15 of defaults 50",
	}
	if len(lines) != 9 {
		t.Fatalf("%d lines, want 9:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i := range 3 {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
	rows := map[string][]string{}
	for _, l := range lines[4:] {
		rows[strings.Fields(l)[0]] = strings.Fields(l)
	}
	if h := strings.Fields(lines[3]); strings.Join(h, " ") != "SERVER WEIGHT STATE NEW/s ACTIVE LOAD CPU RESP CAPACITY LAST CHANGE" {
		t.Errorf("header %q", lines[3])
	}
	for _, c := range []struct {
		server string
		want   string // fields, the last change cut to its first line
	}{
		// 206 new connections in 5 s; the capacity controller's CPU, not the input's.
		{"198.51.100.11:80", "12/10 active 41.2 7 0.61 0.61 40ms ×1.08 12:00:05 capacity ×1.08 of the median: 10 → 12"},
		{"198.51.100.12:80", "3/10 ramping up 30% - 0 0.20 0.10 10ms - -"},
		{"198.51.100.13:80", "0/10 drained by operator 0.0 2 - - - - -"},
		{"198.51.100.14:80", "0/10 down 0.0 0 - - fail - 12:00:05 probe failed twice: down"},
		{"198.51.100.15:80", "-/10 not in IPVS table - - - - - - 12:00:05 not in the IPVS table at the last cycle"},
	} {
		if got := strings.Join(rows[c.server][1:], " "); got != c.want {
			t.Errorf("row %s:\n got %q\nwant %q", c.server, got, c.want)
		}
	}

	// The next cycle: A's change stays with the cycle that made it.
	next := topStatus()
	next.Cycle.Start = next.Cycle.Start.Add(5 * time.Second)
	next.Services[0].Servers[0].LastChange = ""
	if !mem.observe(next) || mem.frames != 2 {
		t.Fatalf("next cycle: frames %d, want 2", mem.frames)
	}
	lines = renderTop(topFrame{Status: next, Frame: mem.frames, Changes: mem.changes, Error: "12:00:11: cannot reach lvs-monitor (retrying)"}, time.UTC, 0, 0)
	if !strings.HasPrefix(lines[0], "lvs-monitor top  frame 2  cycle 12:00:10 ") || !strings.HasSuffix(lines[0], "Ctrl-C quits") {
		t.Errorf("header %q", lines[0])
	}
	if a := strings.Join(strings.Fields(lines[4])[9:], " "); a != "12:00:05 capacity ×1.08 of the median: 10 → 12" {
		t.Errorf("A's last change a cycle later: %q", a)
	}
	if d := strings.Join(strings.Fields(lines[7])[9:], " "); d != "12:00:10 probe failed twice: down" {
		t.Errorf("D's change, recorded again: %q", d)
	}
	if l := lines[len(lines)-1]; l != "lvs-monitor unreachable at 12:00:11: cannot reach lvs-monitor (retrying)" {
		t.Errorf("last line %q", l)
	}
}

func TestRenderTopBounds(t *testing.T) {
	st := topStatus()
	f := topFrame{Status: st, Frame: 1, Changes: map[string]lastChange{}}
	lines := renderTop(f, time.UTC, 40, 6)
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6", len(lines))
	}
	for i, l := range lines {
		if n := len([]rune(l)); n > 40 {
			t.Errorf("line %d has %d characters: %q", i, n, l)
		}
	}
	if lines[5] != "… 4 more lines: enlarge the terminal, or" {
		t.Errorf("last line %q", lines[5])
	}
	if lines[4] != "  198.51.100.11:80  12/10   active      " {
		t.Errorf("first row clipped: %q", lines[4])
	}
}

func TestRenderTopNoCycle(t *testing.T) {
	st := api.Status{Config: api.ConfigSummary{IntervalSeconds: 1}, Reload: api.ReloadStatus{OK: false, Error: "line 3: bad key\nmore"},
		Services: []api.ServiceStatus{{Service: "fwmark:7", Summary: api.ServiceSummary{NotInTable: 1, DefaultSum: 5},
			Servers: []api.ServerStatus{{Server: "198.51.100.11:80", State: api.StatePending, DefaultWeight: 5, NewConns: -1, Ramp: 1}}}}}
	mem := newTopMemory()
	mem.observe(st)
	got := renderTop(topFrame{Status: st, Frame: mem.frames, Changes: mem.changes}, time.UTC, 0, 0)
	want := []string{
		"lvs-monitor top  frame 1  no cycle completed yet, interval 1s  Ctrl-C quits",
		"config: LAST RELOAD FAILED, the earlier configuration runs: line 3: bad key",
		"",
		"fwmark:7  0 in rotation, 0 drained, 0 down, 1 not in IPVS table; weights sum 0 of defaults 5",
		"  SERVER            WEIGHT  STATE                    NEW/s  ACTIVE  LOAD  CPU  RESP  CAPACITY  LAST CHANGE",
		"  198.51.100.11:80  -/5     waiting for first cycle  -      -       -     -    -     -         -",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mem.observe(st) {
		t.Error("still no cycle: not a new frame")
	}
}

func TestPollPeriod(t *testing.T) {
	for _, c := range []struct {
		flag     time.Duration
		interval float64
		want     time.Duration
	}{
		{0, 5, 2500 * time.Millisecond},
		{0, 0.1, 100 * time.Millisecond},
		{0, 60, 5 * time.Second},
		{time.Second, 5, time.Second},
	} {
		if got := pollPeriod(c.flag, c.interval); got != c.want {
			t.Errorf("pollPeriod(%v, %g) = %v, want %v", c.flag, c.interval, got, c.want)
		}
	}
}

// TestTopBatch runs top in-process against the rig while it cycles: with
// stdout not a terminal it prints one frame per cycle seen, until -n.
func TestTopBatch(t *testing.T) {
	r := controltest.New(t, "")
	code, out, _ := lvsctl(t, r, "top", "-once")
	if code != 0 || !strings.HasPrefix(out, "lvs-monitor top  frame 1  no cycle completed yet, interval 1s  Ctrl-C quits\n") {
		t.Fatalf("top -once before the first cycle: exit %d\n%s", code, out)
	}
	contains(t, "top -once", out, "0 in rotation, 0 drained, 0 down, 3 not in IPVS table; weights sum 0 of defaults 30")

	ctx, cancel := context.WithCancel(context.Background())
	done := r.Loop(ctx, 50*time.Millisecond)
	defer func() { cancel(); <-done }()
	code, out, _ = lvsctl(t, r, "top", "-n", "3", "-refresh", "20ms")
	if code != 0 {
		t.Fatalf("top -n 3: exit %d", code)
	}
	frames := regexp.MustCompile(`(?m)^lvs-monitor top  frame (\d+)  (no cycle completed yet|cycle (\d\d:\d\d:\d\d))`).FindAllStringSubmatch(out, -1)
	if len(frames) != 3 {
		t.Fatalf("%d frames, want 3:\n%s", len(frames), out)
	}
	last := ""
	for i, f := range frames {
		if f[1] != fmt.Sprint(i+1) {
			t.Errorf("frame %d numbered %s", i+1, f[1])
		}
		// Each frame is a later cycle than the one before (the rig's
		// clock moves one interval per cycle).
		if i > 0 && (f[3] == "" || f[3] <= last) {
			t.Errorf("frame %d shows cycle %q after %q", i+1, f[3], last)
		}
		last = f[3]
	}
	contains(t, "top -n 3", out, svc+"  scheduler wrr  3 in rotation, 0 drained, 0 down; weights sum 30 of defaults 30")
}

func TestTopErrors(t *testing.T) {
	r := controltest.New(t, "")
	for _, args := range [][]string{{"top", "extra"}, {"top", "-n", "-1"}, {"top", "-refresh", "-1s"}, {"top", "-bogus"}} {
		if code, _, _ := lvsctl(t, r, args...); code != exitUsage {
			t.Errorf("lvsctl %v: exit %d, want %d", args, code, exitUsage)
		}
	}
	code, _, errOut := runCLI(t, &cli{}, "-socket", filepath.Join(t.TempDir(), "none.sock"), "top")
	if code != exitUnreachable || !strings.Contains(errOut, "cannot reach lvs-monitor") {
		t.Errorf("top without lvs-monitor: exit %d, %q", code, errOut)
	}
}
