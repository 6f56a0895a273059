package policy

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

func TestBacklogRatio(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		active, weight    int
		median            float64
		ratio, wantExcess float64
	}{
		{25, 10, 0.5, 5, 20},  // expected 0.5·10 = 5: 25/5, 25−5
		{12, 4, 1.5, 2, 6},    // expected 6
		{3, 10, 0.5, 0.6, -2}, // below its share
		{0, 10, 0, 0, 0},      // an idle service
		{3, 10, 0, inf, 3},    // the only server with connections
	} {
		ratio, excess := BacklogRatio(c.active, c.weight, c.median)
		if !(ratio == c.ratio || near(ratio, c.ratio)) || !near(excess, c.wantExcess) {
			t.Errorf("BacklogRatio(%d, %d, %v) = %v, %v; want %v, %v", c.active, c.weight, c.median, ratio, excess, c.ratio, c.wantExcess)
		}
	}
	if r, _ := BacklogRatio(5, 0, 1); !math.IsNaN(r) {
		t.Errorf("weight 0: ratio %v, want NaN (not in rotation)", r)
	}
}

func TestBacklogged(t *testing.T) {
	g := GuardParams{Trigger: 2, Release: 1.5, MinExcess: 16}
	for _, c := range []struct {
		ratio, excess float64
		active, prev  int
		want          bool
		why           string
	}{
		{5, 20, 25, 20, true, "beyond the trigger, 20 over its share, growing"},
		{5, 20, 25, 25, false, "not growing: a standing imbalance (long-lived connections) is no backlog"},
		{5, 20, 25, 30, false, "shrinking"},
		{1.9, 30, 60, 50, false, "below the trigger"},
		{2, 16, 32, 31, true, "exactly at the trigger and the minimum excess"},
		{3, 10, 15, 10, false, "15 connections are not a backlog, whatever the ratio"},
		{math.Inf(1), 16, 16, 0, true, "the only server with connections, 16 of them"},
	} {
		if got := Backlogged(c.ratio, c.excess, c.active, c.prev, g); got != c.want {
			t.Errorf("%s: Backlogged(%v, %v, %d, %d) = %v, want %v", c.why, c.ratio, c.excess, c.active, c.prev, got, c.want)
		}
	}
}

func TestGuardCut(t *testing.T) {
	for _, c := range []struct {
		weight int
		ratio  float64
		min    int
		want   int
	}{
		{10, 5, 1, 2},     // 10/5
		{10, 3, 1, 3},     // 3.33 rounded down
		{100, 2.5, 1, 40}, // 100/2.5
		{10, 1.05, 1, 9},  // 9.52 rounded down
		{10, 12, 1, 1},    // 0.83: at least min
		{10, 20, 3, 3},    // min 3
		{10, math.Inf(1), 1, 1},
		{10, 1, 1, 10}, // no backlog: no cut
		{10, math.NaN(), 1, 10},
	} {
		if got := GuardCut(c.weight, c.ratio, c.min); got != c.want {
			t.Errorf("GuardCut(%d, %v, %d) = %d, want %d", c.weight, c.ratio, c.min, got, c.want)
		}
	}
}

func TestStarved(t *testing.T) {
	g := GuardParams{Trigger: 2, Release: 1.5, MinExcess: 16}
	for _, c := range []struct {
		ratio, excess float64
		building      bool
		want          bool
		why           string
	}{
		{0.1, -45, true, true, "a tenth of its share, 45 under it, the service's backlog growing"},
		{0.1, -45, false, false, "the service is not building a backlog: nothing to take over"},
		{0.5, -20, true, true, "exactly 1/trigger"},
		{0.6, -30, true, false, "above 1/trigger"},
		{0.2, -10, true, false, "10 under its share: too few to tell"},
	} {
		if got := Starved(c.ratio, c.excess, c.building, g); got != c.want {
			t.Errorf("%s: Starved(%v, %v, %v) = %v, want %v", c.why, c.ratio, c.excess, c.building, got, c.want)
		}
	}
}

func TestGuardRaise(t *testing.T) {
	for _, c := range []struct {
		weight int
		ratio  float64
		want   int
	}{
		{10, 5.0 / 60, 20},   // 120, at most doubled
		{10, 0.6, 17},        // 16.67 rounded up
		{10, 0, 20},          // no connections at all: doubled
		{40000, 0.1, 65535},  // the kernel's maximum
		{10, 1, 10},          // at its share: no raise
		{10, math.NaN(), 10}, // no ratio: no raise
	} {
		if got := GuardRaise(c.weight, c.ratio); got != c.want {
			t.Errorf("GuardRaise(%d, %v) = %d, want %d", c.weight, c.ratio, got, c.want)
		}
	}
}

func TestHashingScheduler(t *testing.T) {
	for name, want := range map[string]bool{"sh": true, "dh": true, "mh": true, "wrr": false, "wlc": false, "sed": false, "rr": false, "": false} {
		if got := HashingScheduler(name); got != want {
			t.Errorf("HashingScheduler(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestSinking(t *testing.T) {
	for _, tt := range []struct {
		active, inactive, prev int
		median                 float64
		minEnded               int
		want                   bool
	}{
		{0, 40, 20, 2, 16, true},   // 20 ended, none established, peers busy
		{0, 36, 20, 2, 16, true},   // exactly min_excess
		{0, 35, 20, 2, 16, false},  // 15 < 16
		{1, 100, 20, 2, 16, false}, // one established: answering
		{0, 100, 20, 0, 16, false}, // nobody holds a connection
		{0, 10, 40, 2, 16, false},  // inactive shrank (lingering ones expired)
		{0, 21, 20, 0.5, 0, true},  // min_excess 0: one ended is enough
		{0, 20, 20, 0.5, 0, false}, // … but at least one
	} {
		if got := Sinking(tt.active, tt.inactive, tt.prev, tt.median, tt.minEnded); got != tt.want {
			t.Errorf("Sinking(%d, %d, %d, %v, %d) = %v, want %v", tt.active, tt.inactive, tt.prev, tt.median, tt.minEnded, got, tt.want)
		}
	}
}

// TestCheckSink: at a check the sinking server gets a GuardSink trace and
// no weight — not even the raise its empty share would earn while the
// service's backlog grows; a server read for the first time is not judged.
func TestCheckSink(t *testing.T) {
	p := Params{Coefficients: Coefficients{CPU: 1}, Weight: WeightParams{Controller: ControllerCapacity, Min: 1, Anchor: 0.15},
		Guard: GuardParams{Check: time.Second, Trigger: 2, Release: 1.5, MinExcess: 16, Raise: true}}
	e, err := NewEngine(p)
	if err != nil {
		t.Fatal(err)
	}
	st := &ServiceState{}
	states := []*ServerState{{}, {}, {}}
	check := func(activeB, inactiveB, activeOthers int) *GuardTrace {
		servers := make([]Server, 3)
		for i := range servers {
			o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: activeOthers, InactiveConns: 5}
			if i == 1 {
				o.ActiveConns, o.InactiveConns = activeB, inactiveB
			}
			servers[i] = Server{Obs: o, State: states[i], Out: &Decision{}}
		}
		e.Check(Service{}, st, servers)
		if servers[1].Out.Write {
			t.Fatalf("B written: %+v", servers[1].Out)
		}
		return servers[1].Out.Trace.Guard
	}
	if g := check(0, 100, 20); g != nil {
		t.Fatalf("first reading judged: %+v", g)
	}
	check(0, 100, 30) // the service's backlog grows: B, empty, would be starved
	g := check(0, 130, 40)
	if g == nil || g.Event != GuardSink || g.Ended != 30 || g.Active != 0 {
		t.Fatalf("B sinking: trace %+v, want GuardSink with 30 ended", g)
	}
	// Under wlc a dead server with a large weight is sent nearly every new
	// connection, and its peers' established ones end: a second later none
	// holds a connection and the median is 0. The service did hold
	// connections at the previous check: B is still found.
	g = check(0, 170, 0)
	if g == nil || g.Event != GuardSink || g.Ended != 40 {
		t.Fatalf("B sinking while its peers drained (median 0, 0.4 per unit of weight a check before): trace %+v, want GuardSink with 40 ended", g)
	}
	if g := check(0, 200, 0); g != nil && g.Event == GuardSink {
		t.Fatalf("B with 30 more ended, the service idle at two checks in a row: trace %+v, want no sink", g)
	}
}

// TestTakeDownSinks: of the servers found sinking and probed, the ones
// that refused go down (weight 0, restore weight kept); a timeout or an
// answer leaves a server to the cycles; and when more than freeze_share of
// the service refuses at once nothing is done (fail static, as a cycle).
func TestTakeDownSinks(t *testing.T) {
	refused, timeout := errors.New("connection refused"), context.DeadlineExceeded
	mk := func(sink bool, err error, state Ownership) Server {
		o := &Observed{Record: DestRecord{State: state}, Configured: 10, Kernel: 10, Probed: sink, ProbeErr: err, ProbeTimedOut: errors.Is(err, timeout)}
		if state == DrainedByOperator {
			o.Kernel = 0
		}
		d := &Decision{}
		if sink {
			d.Trace.Guard = &GuardTrace{Event: GuardSink, Ended: 30}
		}
		return Server{Obs: o, State: &ServerState{}, Out: d}
	}
	e, err := NewEngine(Params{Coefficients: Coefficients{CPU: 1}, Weight: WeightParams{Controller: ControllerCapacity, Min: 1},
		Availability: Availability{FreezeShare: 0.5, Fall: 2, Rise: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		servers []Server
		want    []bool // written down, per server
	}{
		{"one refusing of four", []Server{mk(true, refused, Managed), mk(false, nil, Managed), mk(false, nil, Managed), mk(false, nil, Managed)}, []bool{true, false, false, false}},
		{"a timeout waits for fall", []Server{mk(true, timeout, Managed), mk(false, nil, Managed), mk(false, nil, Managed)}, []bool{false, false, false}},
		{"answering", []Server{mk(true, nil, Managed), mk(false, nil, Managed)}, []bool{false, false}},
		{"3 of 4 refusing: frozen", []Server{mk(true, refused, Managed), mk(true, refused, Managed), mk(true, refused, Managed), mk(false, nil, Managed)}, []bool{false, false, false, false}},
		{"2 of 4 refusing: at the share, not beyond", []Server{mk(true, refused, Managed), mk(true, refused, Managed), mk(false, nil, Managed), mk(false, nil, Managed)}, []bool{true, true, false, false}},
		{"drained ones do not count", []Server{mk(true, refused, Managed), mk(false, nil, DrainedByOperator), mk(false, nil, DrainedByOperator), mk(false, nil, Managed)}, []bool{true, false, false, false}},
	} {
		n := e.TakeDownSinks(tt.servers)
		count := 0
		for i, sv := range tt.servers {
			down := sv.Out.Write && sv.Out.To == 0 && sv.Out.Record.State == Down
			if down != tt.want[i] {
				t.Errorf("%s: server %d down %v, want %v (%+v)", tt.name, i, down, tt.want[i], sv.Out)
			}
			if down {
				count++
				if r := sv.Out.Record; r.RestoreWeight != 10 || r.SetBy != ByMonitor || sv.State.Fails != 1 {
					t.Errorf("%s: server %d record %+v fails %d", tt.name, i, r, sv.State.Fails)
				}
			}
		}
		if n != count {
			t.Errorf("%s: TakeDownSinks = %d, %d written down", tt.name, n, count)
		}
	}
}

// TestUsualRatio: a decay of 0.9 per cycle from the prior 1, each ratio
// bounded to [0.25, 4]; a ratio that is not a number changes nothing.
func TestUsualRatio(t *testing.T) {
	for _, c := range []struct{ usual, ratio, want float64 }{
		{0, 2, 1.1},         // 0.9·1 + 0.1·2
		{1.1, 0.1, 1.015},   // 0.99 + 0.1·0.25
		{3, 10, 3.1},        // 2.7 + 0.1·4
		{0.5, 0.5, 0.5},     // steady
		{2, math.NaN(), 2},  // weight 0
		{2, math.Inf(1), 2}, // an idle service's median
	} {
		if got := UsualRatio(c.usual, c.ratio); !near(got, c.want) {
			t.Errorf("UsualRatio(%v, %v) = %v, want %v", c.usual, c.ratio, got, c.want)
		}
	}
}

// TestGuardUsualRatio: the guard compares a server with what it usually
// holds. B usually holds 1.8× the median per unit of weight (a single-core
// server's queue at high load): at 2.25× and 2.5× it is within its usual
// (1.25×, 1.39×) and not cut; at 4× and 4.5× (2.2×, 2.5× its usual, 54
// over) it is cut at the second check to 10 ÷ 2.5 = 4. C usually holds
// 0.3× (a 32-core server among single-core ones): while the service's
// backlog grows (median 2.4, then 2.8) its 5 connections are 0.69× and
// 0.6× its usual share, not starved — with no usual ratio known (the prior
// 1) the same figures raise it.
func TestGuardUsualRatio(t *testing.T) {
	p := Params{Coefficients: Coefficients{CPU: 1}, Weight: WeightParams{Controller: ControllerCapacity, Min: 1, Anchor: 0.15},
		Guard: GuardParams{Check: time.Second, Trigger: 2, Release: 1.5, MinExcess: 16, Raise: true}}
	run := func(usual []float64, active [][3]int) []Decision {
		e, err := NewEngine(p)
		if err != nil {
			t.Fatal(err)
		}
		st := &ServiceState{}
		states := make([]*ServerState, 3)
		for i := range states {
			states[i] = &ServerState{Guard: GuardState{Usual: usual[i]}}
		}
		var last []Decision
		for _, a := range active {
			servers := make([]Server, 3)
			last = make([]Decision, 3)
			for i := range servers {
				o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: a[i]}
				servers[i] = Server{Obs: o, State: states[i], Out: &last[i]}
			}
			e.Check(Service{}, st, servers)
			for i, d := range last {
				if d.Write && !(i == 1 && d.To == 4 && a[1] == 90) {
					t.Errorf("usual %v, active %v: server %d written to %d (%s)", usual, a, i, d.To, d.Reason)
				}
			}
		}
		return last
	}
	usualB := []float64{1, 1.8, 1}
	if d := run(usualB, [][3]int{{20, 20, 20}, {20, 45, 20}, {20, 50, 20}}); d[1].Write {
		t.Errorf("B at 2.25× then 2.5× the median, 1.8× usually: cut to %d", d[1].To)
	}
	if d := run(usualB, [][3]int{{20, 20, 20}, {20, 80, 20}, {20, 90, 20}}); !d[1].Write || d[1].To != 4 {
		t.Errorf("B at 4×, 4.5× the median, 1.8× usually: write %v to %d, want a cut to 4", d[1].Write, d[1].To)
	}
	growing := [][3]int{{20, 20, 5}, {24, 24, 5}, {28, 28, 5}}
	run([]float64{1, 1, 0.3}, growing) // C, usually 0.3×, is never written (checked in run)
	e, err := NewEngine(p)
	if err != nil {
		t.Fatal(err)
	}
	st := &ServiceState{}
	states := []*ServerState{{}, {}, {}}
	raised := false
	for _, a := range growing {
		servers := make([]Server, 3)
		for i := range servers {
			servers[i] = Server{Obs: &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: a[i]}, State: states[i], Out: &Decision{}}
		}
		e.Check(Service{}, st, servers)
		raised = raised || servers[2].Out.Write && servers[2].Out.To > 10
	}
	if !raised {
		t.Error("C with no usual ratio known, starved while the backlog grows: not raised")
	}
}

// guardParams are capacityParams with CPU alone and the backlog guard's
// defaults.
func guardParams() Params {
	p := capacityParams(Coefficients{CPU: 1})
	p.Guard = GuardParams{Check: time.Second, Trigger: 2, Release: 1.5, MinExcess: 16, Raise: true}
	return p
}

// TestLevel: the first reading is the level; then the bias-corrected
// decay of 0.9, so that an empty first cycle weighs about as much as the
// next, not 90 %; known from the third reading.
func TestLevel(t *testing.T) {
	for _, c := range []struct {
		level   Level
		x, want float64
		known   bool
	}{
		{Level{}, 20.0 / 500, 0.04, false},                             // 20 ÷ 500
		{Level{Value: 0.04, N: 1}, 40.0 / 500, 0.0116 / 0.19, false},   // (0.1·0.08 + 0.09·0.04) ÷ (1 − 0.81)
		{Level{N: 1}, 20.0 / 500, 0.004 / 0.19, false},                 // an empty first cycle, then 20 of 500
		{Level{Value: 0.004 / 0.19, N: 2}, 0.04, 0.0076 / 0.271, true}, // (0.1·0.04 + 0.171·0.0211) ÷ (1 − 0.729)
	} {
		l := c.level
		l.Fold(c.x)
		if !near(l.Value, c.want) || l.N != c.level.N+1 || l.Known() != c.known {
			t.Errorf("%+v.Fold(%v) = %+v (known %v), want %v after %d (known %v)", c.level, c.x, l, l.Known(), c.want, c.level.N+1, c.known)
		}
	}
}

// TestGuardUsualLevel: a 32-core server (weight 500) usually holds 20
// connections while four single-core servers (weight 10) are mostly idle.
// The service's median per unit of weight is then 0, and against it alone
// any connection on the big server is a backlog (+Inf×): at 22 and 24 it
// was cut to weight 1 at the second check. Against its usual level (20,
// learnt at the cycles) it is not; at 45 and 60 (3× its level, 40 over) it
// is. The level does not hold back a raise: when the small servers' queues
// grow (median 0 at the cycles → 0.1 → 0.3 per unit of weight) while the
// big one holds 20, then 12, it is starved at both checks (0.4×, 0.08× the
// median's share) and raised to 500 ÷ 0.08, at most doubled: 1000.
func TestGuardUsualLevel(t *testing.T) {
	p := guardParams()
	weights := []int{500, 10, 10, 10, 10}
	servers := func(states []*ServerState, active []int) []Server {
		sv := make([]Server, len(weights))
		for k, w := range weights {
			sv[k] = Server{Obs: &Observed{Record: DestRecord{State: Managed, Written: w}, Configured: w, Kernel: w,
				ActiveConns: active[k], NewConns: int64(10 * w), Probed: true, Polled: true, CPU: 0.5},
				State: states[k], Out: &Decision{}}
		}
		return sv
	}
	// start runs cycles at which the big server holds big connections and
	// the others none (no cycle at all: no level known).
	start := func(cycles, big int) (*Engine, *ServiceState, []*ServerState) {
		e, err := NewEngine(p)
		if err != nil {
			t.Fatal(err)
		}
		st := &ServiceState{}
		states := make([]*ServerState, len(weights))
		for k := range states {
			states[k] = &ServerState{}
		}
		for i := range cycles {
			sv := servers(states, []int{big, 0, 0, 0, 0})
			e.Cycle(Service{Reference: 100 * time.Millisecond}, st, sv, false, time.Unix(int64(1000+5*i), 0))
			for k, s := range sv {
				if s.Out.Write {
					t.Fatalf("cycle %d: server %d written to %d (%s)", i, k, s.Out.To, s.Out.Reason)
				}
			}
		}
		return e, st, states
	}
	check := func(e *Engine, st *ServiceState, states []*ServerState, active []int) Decision {
		sv := servers(states, active)
		e.Check(Service{}, st, sv)
		for k, s := range sv[1:] {
			if s.Out.Write {
				t.Errorf("active %v: small server %d written to %d (%s)", active, k+1, s.Out.To, s.Out.Reason)
			}
		}
		return *sv[0].Out
	}

	e, st, states := start(5, 20)
	if g := states[0].Guard; g.Level.N != 5 || !near(g.Level.Value, 0.04) {
		t.Fatalf("level after 5 cycles at 20 of 500: %+v, want 0.04 over 5", g.Level)
	}
	for _, a := range []int{22, 24} {
		if d := check(e, st, states, []int{a, 0, 0, 0, 0}); d.Write {
			t.Errorf("big server at %d, usually 20, median 0: cut to %d (%s)", a, d.To, d.Reason)
		}
	}
	check(e, st, states, []int{45, 0, 0, 0, 0})
	if d := check(e, st, states, []int{60, 0, 0, 0, 0}); !d.Write || d.To != 1 {
		t.Errorf("big server at 45 then 60, usually 20: write %v to %d, want a cut to 1", d.Write, d.To)
	}

	// Where the median's share is a connection or more it decides alone:
	// usually holding 600 (1.2 per unit of weight), the big server at 600
	// and 650 while the small ones hold 5 each (median 0.5: its share 250)
	// is 2.4× and 2.6× that, growing — cut to 500 ÷ 2.6 = 192, although
	// it is within its own level (an overload raises every level).
	e, st, states = start(5, 600)
	check(e, st, states, []int{600, 5, 5, 5, 5})
	if d := check(e, st, states, []int{650, 5, 5, 5, 5}); !d.Write || d.To != 192 {
		t.Errorf("big server at 600 then 650, usually 600, median share 250: write %v to %d, want a cut to 192", d.Write, d.To)
	}

	// Starved: a server that keeps up holds what it usually holds while
	// the others pile up, so its level is not asked.
	e, st, states = start(5, 20)
	raisedTo := 0
	for _, a := range [][]int{{20, 1, 1, 1, 1}, {12, 3, 3, 3, 3}} {
		if d := check(e, st, states, a); d.Write {
			raisedTo = d.To
		}
	}
	if raisedTo != 1000 {
		t.Errorf("big server starved while the median grows (0 → 0.1 → 0.3 per unit of weight): raised to %d, want 1000", raisedTo)
	}
}

// TestBuilding: a backlog builds when the median grows and, once the
// service's usual median is known, reaches trigger × it.
func TestBuilding(t *testing.T) {
	for _, c := range []struct {
		med  float64
		st   ServiceState
		want bool
	}{
		{0.6, ServiceState{}, false},                                                                            // no check before
		{0.6, ServiceState{BacklogSeen: true, BacklogMedian: 0.5}, true},                                        // no usual median yet
		{0.6, ServiceState{BacklogSeen: true, BacklogMedian: 0.5, MedianLevel: Level{Value: 0.5, N: 5}}, false}, // wanders: 1.2× its usual
		{1.0, ServiceState{BacklogSeen: true, BacklogMedian: 0.6, MedianLevel: Level{Value: 0.5, N: 5}}, true},  // 2× its usual
		{1.0, ServiceState{BacklogSeen: true, BacklogMedian: 1.2, MedianLevel: Level{Value: 0.5, N: 5}}, false}, // high but falling
		{0.6, ServiceState{BacklogSeen: true, BacklogMedian: 0.5, MedianLevel: Level{Value: 0.5, N: 2}}, true},  // 2 cycles: not known
	} {
		if got := Building(c.med, &c.st, 2); got != c.want {
			t.Errorf("Building(%v, %+v, 2) = %v, want %v", c.med, c.st, got, c.want)
		}
	}
}

// TestGuardRaiseNeedsABacklog: three servers of weight 100; at five cycles
// A and B hold 50 (the service's usual median 0.5 per unit of weight) and C
// 20. At checks C holds 10 while the median wanders up to 0.6: C is far
// below its share (0.26× of the median times its usual ratio 0.755) but
// the service is not building a backlog. When the median reaches 1.0 and
// 1.3 (2× and 2.6× its usual) C is starved at both checks and raised at
// the second. Counting any growth of the median, C was starved at 0.6
// already and raised a check earlier, on a median that had only wandered.
func TestGuardRaiseNeedsABacklog(t *testing.T) {
	p := guardParams()
	e, err := NewEngine(p)
	if err != nil {
		t.Fatal(err)
	}
	st := &ServiceState{}
	states := []*ServerState{{}, {}, {}}
	servers := func(active [3]int) []Server {
		sv := make([]Server, 3)
		for k := range sv {
			sv[k] = Server{Obs: &Observed{Record: DestRecord{State: Managed, Written: 100}, Configured: 100, Kernel: 100,
				ActiveConns: active[k], NewConns: 1000, Probed: true, Polled: true, CPU: 0.5}, State: states[k], Out: &Decision{}}
		}
		return sv
	}
	for i := range 5 {
		e.Cycle(Service{Reference: 100 * time.Millisecond}, st, servers([3]int{50, 50, 20}), false, time.Unix(int64(1000+5*i), 0))
	}
	if !near(st.MedianLevel.Value, 0.5) || st.MedianLevel.N != 5 {
		t.Fatalf("usual median %+v, want 0.5 over 5", st.MedianLevel)
	}
	for i, a := range [][3]int{{50, 50, 10}, {60, 60, 10}, {100, 100, 10}, {130, 130, 10}} {
		sv := servers(a)
		e.Check(Service{}, st, sv)
		d := sv[2].Out
		if want := i == 3; d.Write != want || want && d.To != 200 {
			t.Errorf("check %d, active %v: C written %v to %d (%s); want a raise to 200: %v", i, a, d.Write, d.To, d.Reason, want)
		}
	}
}
