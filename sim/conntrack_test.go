package sim

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestLastSYN: Linux sends SYNs at 0, 1, 3, 7, 15, 31 and 63 s and gives up
// at 127 s; a client's own timeout cuts that short, and the SYN_RECV entry
// lives 60 s after the last SYN sent.
func TestLastSYN(t *testing.T) {
	for _, c := range []struct {
		timeout, last, giveUp, hold float64
	}{
		{0.5, 0, 0.5, 60},
		{1, 0, 1, 60}, // the retransmission due at 1 s is not sent
		{2, 1, 2, 61}, // the default client timeout
		{10, 7, 10, 67},
		{30, 15, 30, 75},
		{64, 63, 64, 123},
		{200, 63, 127, 123}, // the kernel gives up first
	} {
		last, giveUp := lastSYN(c.timeout)
		if last != c.last || giveUp != c.giveUp || synRecvHold(c.timeout) != c.hold {
			t.Errorf("timeout %gs: last SYN %g, gives up %g, SYN_RECV %g; want %g, %g, %g",
				c.timeout, last, giveUp, synRecvHold(c.timeout), c.last, c.giveUp, c.hold)
		}
	}
}

// TestWLCWithTimeWait: wlc's and sed's choices between destinations whose
// inactive counts are TIME_WAIT-sized, worked out by hand.
func TestWLCWithTimeWait(t *testing.T) {
	for _, c := range []struct {
		name     string
		d        []Dest
		wlc, sed int
	}{{
		// wlc: A 2·256+1200 = 1712, B 5·256+400 = 1680: B. sed: A 3, B 6: A.
		name: "TIME_WAIT outweighs active",
		d:    []Dest{{1, 2, 1200}, {1, 5, 400}},
		wlc:  1, sed: 0,
	}, {
		// wlc: A (3·256+2400)/2 = 1584, B 256+1300 = 1556: B
		// (3168·1 > 1556·2 = 3112). sed: A 4/2 = 2, B 2/1 = 2: a tie, A.
		name: "weights",
		d:    []Dest{{2, 3, 2400}, {1, 1, 1300}},
		wlc:  1, sed: 0,
	}, {
		// A dead server that refuses: no active, CLOSE entries only.
		// wlc: dead 400, live 1·256+1600 = 1856: the dead one. sed: dead
		// 1, live 2: the dead one.
		name: "crashed server",
		d:    []Dest{{1, 1, 1600}, {1, 0, 400}},
		wlc:  1, sed: 1,
	}, {
		// A hung server: 30 SYN_RECV entries, active. wlc: 30·256 =
		// 7680 against 1856; sed 31 against 2: the live one.
		name: "hung server",
		d:    []Dest{{1, 1, 1600}, {1, 30, 0}},
		wlc:  0, sed: 0,
	}} {
		if got := (wlcSched{}).Schedule(c.d); got != c.wlc {
			t.Errorf("%s: wlc chose %d, want %d", c.name, got, c.wlc)
		}
		if got := (sedSched{}).Schedule(c.d); got != c.sed {
			t.Errorf("%s: sed chose %d, want %d", c.name, got, c.sed)
		}
	}
}

// deathScenario: four equal servers a–d at weight 1, 40 connections/s
// (10 each) of fixed 5 ms, c dying at 150 s in the given way.
func deathScenario(t *testing.T, sched, kind, extra string) *Scenario {
	t.Helper()
	sc, err := ParseScenario("death.toml", []byte(fmt.Sprintf(`
duration = "400s"
schedulers = [%q]
%s
[workload]
rate = 40
demand = "fixed"
mean_demand = "5ms"
[agent]
noise = 0
[[server]]
name = "a"
speed = 1
weight = 1
[[server]]
name = "b"
speed = 1
weight = 1
[[server]]
name = "c"
speed = 1
weight = 1
[[server]]
name = "d"
speed = 1
weight = 1
[[event]]
at = "150s"
server = "c"
kind = %q
`, sched, extra, kind)))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// runTimeline runs the configured weights with no health check, with a
// timeline of window dt.
func runTimeline(t *testing.T, sc *Scenario, dt float64) *run {
	t.Helper()
	pol, err := PolicySpec{Name: PolUnchecked}.build(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRun(sc, NewStream(sc, 1), 1, sc.Schedulers[0], pol)
	if err != nil {
		t.Fatal(err)
	}
	r.tl = newTimelineRec(dt, len(sc.Servers))
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	return r
}

// rowsOf returns server k's timeline rows.
func rowsOf(r *run, k int) []TimelineRow {
	var out []TimelineRow
	for _, row := range r.tl.rows {
		if row.Server == k {
			out = append(out, row)
		}
	}
	return out
}

// share is server k's share of the new connections in windows ending in
// (from, to].
func share(r *run, k int, from, to float64) float64 {
	var mine, all int
	for _, row := range r.tl.rows {
		if row.End > from && row.End <= to {
			all += row.New
			if row.Server == k {
				mine += row.New
			}
		}
	}
	return float64(mine) / float64(all)
}

// TestTimeWaitSteadyState: every normally closed connection is in
// TIME_WAIT for 120 s, so a server's inactive count at any moment is the
// number of its connections that closed in the last 120 s — exactly, window
// by window — about 10/s × 120 s = 1,200 at 10 new connections per second.
func TestTimeWaitSteadyState(t *testing.T) {
	sc := deathScenario(t, "wrr", "recover", "")
	r := runTimeline(t, sc, 1)
	for k := 0; k < 4; k++ {
		rows := rowsOf(r, k)
		var sum float64
		n := 0
		for _, row := range rows {
			if row.End < 130 {
				continue
			}
			// Closed in (End−120, End]: every request of k that arrived by
			// then and finished after End−120 (5 ms, alone on its server).
			want := 0
			for i, a := range r.st.Arrive {
				if int(r.served[i]) == k && a+float64(r.resp[i]) > row.End-120 && a+float64(r.resp[i]) <= row.End {
					want++
				}
			}
			if row.Inactive != want {
				t.Fatalf("server %d at %gs: %d inactive, want %d (closed in the last 120 s)", k, row.End, row.Inactive, want)
			}
			sum += float64(row.Inactive)
			n++
		}
		if mean := sum / float64(n); math.Abs(mean-1200) > 60 {
			t.Errorf("server %d: mean inactive %.0f, want about 1200", k, mean)
		}
	}
}

// TestDeathShares: the dead server's share of new connections and its
// counts, crash against hang, under wrr, wlc and sed (static weights, no
// health check), worked out by hand.
func TestDeathShares(t *testing.T) {
	t.Run("wrr crash", func(t *testing.T) {
		r := runTimeline(t, deathScenario(t, "wrr", "crash", ""), 1)
		// wrr at equal weights: a, b, c, d in turn whatever happens.
		if s := share(r, 2, 150, 400); math.Abs(s-0.25) > 0.001 {
			t.Errorf("share %.4f, want 0.25", s)
		}
		// From 270 s its TIME_WAIT entries are gone: inactive = the CLOSE
		// entries, its connections of the last 10 s; never active.
		checkWindowSum(t, r, 2, 270, 10, func(row TimelineRow) int { return row.Inactive })
		for _, row := range rowsOf(r, 2) {
			if row.End > 150 && row.Active != 0 {
				t.Fatalf("at %gs: %d active on a crashed server", row.End, row.Active)
			}
		}
	})
	t.Run("wrr hang", func(t *testing.T) {
		r := runTimeline(t, deathScenario(t, "wrr", "hang", ""), 1)
		if s := share(r, 2, 150, 400); math.Abs(s-0.25) > 0.001 {
			t.Errorf("share %.4f, want 0.25", s)
		}
		// Each connection is active in SYN_RECV for 61 s (the client's
		// SYNs at 0 and 1 s, timeout 2 s): active = its connections of
		// the last 61 s, about 10 × 61 = 610.
		checkWindowSum(t, r, 2, 220, 61, func(row TimelineRow) int { return row.Active })
		// Inactive: from 272 s only the CLOSE_WAIT entries of the
		// connections in flight at 150 s (closed by the client at 152 s)
		// could remain, and they expire at 212 s: none.
		for _, row := range rowsOf(r, 2) {
			if row.End >= 272 && row.Inactive != 0 {
				t.Fatalf("at %gs: %d inactive, want 0", row.End, row.Inactive)
			}
		}
	})
	t.Run("wlc crash", func(t *testing.T) {
		// Once the TIME_WAIT entries from before the crash are gone, wlc
		// evens out 10 s of CLOSE entries on the dead server against
		// 120 s of TIME_WAIT on each live one (their active counts,
		// ~0.013·256, are small): 10·p·40 = 120·(1−p)·40/3, p = 0.8. It
		// gets there through a damped swing (the live servers' TIME_WAIT
		// remembers 120 s of shares): measured well after it.
		sc := deathScenario(t, "wlc", "crash", "")
		sc.Duration = 1200 * time.Second
		r := runTimeline(t, sc, 5)
		if s := share(r, 2, 600, 1200); math.Abs(s-0.8) > 0.015 {
			t.Errorf("share %.3f, want 0.80", s)
		}
	})
	t.Run("sed crash first listed", func(t *testing.T) {
		sc := deathScenario(t, "sed", "crash", "")
		sc.Events[0].Server, sc.Events[0].server = "a", 0
		r := runTimeline(t, sc, 5)
		// sed: the dead a's (0 + 1)/1 is never beaten (no server has
		// fewer than 0 active) and a wins every tie, being listed first:
		// every connection.
		if s := share(r, 0, 155, 400); s != 1 {
			t.Errorf("share %.3f, want 1", s)
		}
	})
	for _, sched := range []string{"wlc", "sed"} {
		t.Run(sched+" hang", func(t *testing.T) {
			// A hung server's SYN_RECV entries are active: after the
			// first one it loses every comparison against live servers
			// with ~0 active until the entry expires 61 s later.
			r := runTimeline(t, deathScenario(t, sched, "hang", ""), 5)
			if s := share(r, 2, 155, 400); s > 0.01 {
				t.Errorf("share %.4f, want under 1 %%", s)
			}
		})
	}
}

// checkWindowSum checks that from time from on, server k's gauge at each
// window's end is the sum of its new connections over the last span
// seconds (windows of 1 s).
func checkWindowSum(t *testing.T, r *run, k int, from float64, span int, gauge func(TimelineRow) int) {
	t.Helper()
	rows := rowsOf(r, k)
	for i, row := range rows {
		if row.End < from || row.End > r.end {
			continue
		}
		want := 0
		for j := max(0, i-span+1); j <= i; j++ {
			want += rows[j].New
		}
		if got := gauge(row); got != want {
			t.Fatalf("server %d at %gs: gauge %d, want %d (its new connections of the last %d s)", k, row.End, got, want, span)
		}
	}
}

// TestLingerModel: accounting = "linger" is the older model — a failed
// connection inactive for the linger, a hang the same as a crash.
func TestLingerModel(t *testing.T) {
	extra := "[director]\naccounting = \"linger\"\nlinger = \"10s\""
	crash := runTimeline(t, deathScenario(t, "wlc", "crash", extra), 5)
	hang := runTimeline(t, deathScenario(t, "wlc", "hang", extra), 5)
	// wlc there: the dead server has no active and only 10 s of failed
	// connections inactive; the live ones have their last 10 s too, plus
	// their few active at 256 each.
	if fmt.Sprint(crash.tl.rows) != fmt.Sprint(hang.tl.rows) {
		t.Error("the linger model tells a hang from a crash")
	}
	// No TIME_WAIT: a live server's inactive count is its connections of
	// the last 10 s (the linger), not of the last 120 s.
	// (Connections of 5 ms: within a few of the count of the last two
	// windows.)
	rows := rowsOf(crash, 3)
	for i := 2; i < len(rows); i++ {
		if want := rows[i].New + rows[i-1].New; abs(rows[i].Inactive-want) > 3 {
			t.Errorf("at %gs: %d inactive on a live server, want %d ± 3", rows[i].End, rows[i].Inactive, want)
		}
	}
	if _, err := ParseScenario("x.toml", []byte("duration = \"10s\"\n[workload]\nrate = 1\nmean_demand = \"1ms\"\n[director]\nlinger = \"5s\"\n[[server]]\nspeed = 1\n")); err == nil {
		t.Error("linger without accounting = \"linger\" accepted")
	}
}

func abs(x int) int { return max(x, -x) }

// TestTimelineChangesNothing: recording a timeline leaves the run as it
// was.
func TestTimelineChangesNothing(t *testing.T) {
	sc := deathScenario(t, "wlc", "hang", "")
	a, err := RunOne(sc, 1, "wlc", PolicySpec{Name: PolNominal})
	if err != nil {
		t.Fatal(err)
	}
	b, err := runOne(sc, NewStream(sc, 1), 1, "wlc", PolicySpec{Name: PolNominal}, false, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Timeline) != 4*80 {
		t.Errorf("%d timeline rows, want 4 servers × 80 windows", len(b.Timeline))
	}
	b.Timeline, b.TimelineWindow, b.ServerNames = nil, 0, nil
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the timeline changed the result")
	}
}

// TestFailureKindsParse: "fail" is read as "crash"; the director's
// ipvsadm --set timeouts are checked.
func TestFailureKindsParse(t *testing.T) {
	base := "duration = \"10s\"\n[workload]\nrate = 1\nmean_demand = \"1ms\"\n[[server]]\nname = \"a\"\nspeed = 1\n"
	sc, err := ParseScenario("x.toml", []byte(base+"[[event]]\nat = \"1s\"\nserver = \"a\"\nkind = \"fail\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if k := sc.Events[0].Kind; k != EvCrash {
		t.Errorf("fail read as %q, want crash", k)
	}
	if d := sc.Director; d.Accounting != AccountingKernel || d.TCP != 900*time.Second || d.TCPFin != 120*time.Second || sc.Client.Timeout != 2*time.Second {
		t.Errorf("defaults %+v, client %v; want kernel, tcp 900s, tcpfin 120s, client 2s", d, sc.Client.Timeout)
	}
	for _, bad := range []string{
		"[director]\nudp = \"300s\"\n",
		"[director]\naccounting = \"other\"\n",
		"[director]\ntcp = \"-1s\"\n",
		"[client]\ntimeout = \"-1s\"\n",
	} {
		if _, err := ParseScenario("x.toml", []byte(bad+base)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestIdleKeepAliveIsActive: a keep-alive connection idle after its
// response is ESTABLISHED, so active, until it closes into TIME_WAIT; one
// idle longer than the ESTABLISHED timeout (tcp) expires from the table.
func TestIdleKeepAliveIsActive(t *testing.T) {
	sc, err := ParseScenario("ka.toml", []byte(`
duration = "300s"
schedulers = ["rr"]
[director]
tcp = "20s"
[workload]
rate = 1
mean_demand = "1ms"
[[server]]
name = "a"
speed = 1
`))
	if err != nil {
		t.Fatal(err)
	}
	// A at 0 s idles 10 s after its 1 ms response: active until 10.001 s,
	// then TIME_WAIT until 130.001 s. B at 1 s idles 30 s: active until
	// the ESTABLISHED timeout at 21.001 s, then gone.
	st := &Stream{Arrive: []float64{0, 1}, Demand: []float64{0.001, 0.001}, Idle: []float32{10, 30}}
	pol, err := PolicySpec{Name: PolUnchecked}.build(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRun(sc, st, 1, "rr", pol)
	if err != nil {
		t.Fatal(err)
	}
	r.tl = newTimelineRec(5, 1)
	if err := r.loop(); err != nil {
		t.Fatal(err)
	}
	want := map[float64][2]int{5: {2, 0}, 10: {2, 0}, 15: {1, 1}, 20: {1, 1}, 25: {0, 1}, 130: {0, 1}, 135: {0, 0}}
	for _, row := range r.tl.rows {
		if w, ok := want[row.End]; ok && (row.Active != w[0] || row.Inactive != w[1]) {
			t.Errorf("at %gs: active %d inactive %d, want %d %d", row.End, row.Active, row.Inactive, w[0], w[1])
		}
	}
}
