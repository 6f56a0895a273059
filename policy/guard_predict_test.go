package policy

import (
	"math"
	"testing"
)

func TestPredictBacklog(t *testing.T) {
	for _, c := range []struct {
		q, arrivals, served, shareGrowth, want float64
		why                                    string
	}{
		{10, 20, 14, 0, 16, "10 over, sent 20, finishes 14: 6 more at the next check"},
		{10, 20, 20, 0, 10, "keeps up: the backlog stays"},
		{10, 20, 26, 0, 4, "drains 6 a check"},
		{0, 30, 0, 0, 30, "finishes nothing: all it is sent piles up"},
		{5, 30, 20, 10, 5, "grows 10 a check, as its share does (a burst): no more backlog"},
		{-8, 20, 14, 0, -2, "below its share, catching up"},
		{30, 26, 26, -52, 30, "its share fell by 52 (a peer crashed): a step once, not a rate: keeps up, the backlog stays"},
	} {
		if got := PredictBacklog(c.q, c.arrivals, c.served, c.shareGrowth); !near(got, c.want) {
			t.Errorf("%s: PredictBacklog(%v, %v, %v, %v) = %v, want %v", c.why, c.q, c.arrivals, c.served, c.shareGrowth, got, c.want)
		}
	}
}

func TestFinishingLess(t *testing.T) {
	for _, c := range []struct {
		arrivals, served float64
		checks           int
		want             bool
		why              string
	}{
		{161, 158, 1, false, "3 short of 161: √161 = 12.7, keeping up"},
		{161, 140, 1, true, "21 short of 161: beyond 12.7"},
		{1.2, 0.4, 4, true, "4.8 sent over 4 checks, 1.6 finished: 3.2 short, √4.8 = 2.19"},
		{1.2, 0.8, 4, false, "1.6 short of 4.8: within 2.19"},
		{1, 0, 1, false, "one sent, none finished: 1 is not beyond √1"},
		{10, 10, 2, false, "keeps up"},
		{10, 12, 2, false, "catching up"},
	} {
		if got := FinishingLess(c.arrivals, c.served, c.checks); got != c.want {
			t.Errorf("%s: FinishingLess(%v, %v, %d) = %v, want %v", c.why, c.arrivals, c.served, c.checks, got, c.want)
		}
	}
}

func TestCheckRates(t *testing.T) {
	for _, c := range []struct {
		prevCounter, counter uint32
		prevActive, active   int
		checks               int
		arrivals, served     float64
		ok                   bool
		why                  string
	}{
		{100, 130, 10, 16, 2, 15, 12, true, "30 sent over 2 checks, 6 more active: 24 finished"},
		{100, 130, 10, 10, 1, 30, 30, true, "keeps up"},
		{100, 110, 10, 25, 1, 10, 0, true, "active grew more than it was sent (a reading between): none finished, not −5"},
		{math.MaxUint32 - 5, 10, 3, 3, 2, 8, 8, true, "the 32-bit counter wrapped: 16 sent"},
		{100, 50, 3, 3, 1, 0, 0, false, "the counter went back: the destination was created anew"},
		{100, 130, 3, 3, 0, 0, 0, false, "no checks in the span"},
	} {
		a, s, ok := CheckRates(c.prevCounter, c.counter, c.prevActive, c.active, c.checks)
		if ok != c.ok || ok && (!near(a, c.arrivals) || !near(s, c.served)) {
			t.Errorf("%s: CheckRates(%d, %d, %d, %d, %d) = %v, %v, %v; want %v, %v, %v", c.why,
				c.prevCounter, c.counter, c.prevActive, c.active, c.checks, a, s, ok, c.arrivals, c.served, c.ok)
		}
	}
}

func TestPredictBar(t *testing.T) {
	g := GuardParams{Trigger: 2, Release: 1.5, MinExcess: 16}
	for _, c := range []struct{ share, sigma, want float64 }{
		{0, 0, 16},       // an idle service: min_excess
		{5, 0, 16},       // 6·√5 = 13.4, under min_excess
		{20, 0, 26.8328}, // 6·√20
		{20, 10, 60},     // a queue that scatters by 10: 6·10
		{100, 3, 60},     // a count steadier than √100 = 10 is still taken as 10
		{900, 0, 180},    // 900 idle keep-alive connections: 6·30, not 900 more
		{-3, 0, 16},      // a negative share (none) is 0
	} {
		if got := PredictBar(c.share, c.sigma, g); math.Abs(got-c.want) > 1e-3 {
			t.Errorf("PredictBar(%v, %v) = %v, want %v", c.share, c.sigma, got, c.want)
		}
	}
}

func TestSpread(t *testing.T) {
	var s Spread
	for i, x := range []float64{0, 20, 0, 20, 0, 20, 0, 20, 0} {
		s.Fold(x)
		if s.Known() {
			t.Fatalf("known after %d checks, want %d", i+1, spreadMinChecks)
		}
	}
	s.Fold(20)
	// Ten checks alternating 0 and 20: mean 10 and mean square 200 up to
	// the decay's weights, which favour the later 20s slightly.
	if !s.Known() || math.Abs(s.Sigma()-10) > 0.1 {
		t.Errorf("alternating 0 and 20: known %v, sigma %v, want known, 10 ± 0.1", s.Known(), s.Sigma())
	}
	var flat Spread
	for range 20 {
		flat.Fold(7)
	}
	if flat.Sigma() > 1e-6 {
		t.Errorf("a constant excess: sigma %v, want 0", flat.Sigma())
	}
}

func TestPredictCut(t *testing.T) {
	for _, c := range []struct {
		weight                  int
		ratio, arrivals, served float64
		min, want               int
	}{
		{10, 2, 0, 0, 1, 5},     // no rates yet: 10/2
		{10, 1.2, 20, 5, 1, 2},  // 10/1.2 = 8.3; 10·5/20 = 2.5: 2
		{10, 1.9, 20, 14, 1, 5}, // 10/1.9 = 5.3; 10·14/20 = 7: 5
		{10, 1.1, 10, 12, 1, 9}, // finishes more than it is sent: 10/1.1 = 9.1
		{10, 1.5, 30, 0, 1, 1},  // finishes nothing: weight.min
		{10, 1.5, 30, 0, 3, 3},  // weight.min 3
		{10, 1, 20, 20, 1, 10},  // no backlog, keeps up: no cut
	} {
		if got := PredictCut(c.weight, c.ratio, c.arrivals, c.served, c.min); got != c.want {
			t.Errorf("PredictCut(%d, %v, %v, %v, %d) = %d, want %d", c.weight, c.ratio, c.arrivals, c.served, c.min, got, c.want)
		}
	}
}

// guardRun feeds backlog checks (no cycle) to three servers at weight 10:
// A and C hold peers[k] active connections at check k, B b[k]; each is
// sent 20 connections a check (the kernel's counter). It returns the check
// at which B was cut (-1: never) and the weight it was cut to. The first
// warm checks learn the servers' spread; the check returned counts from
// the one after them.
func guardRun(t *testing.T, predict bool, warm int, peers, b []int) (at, to int) {
	t.Helper()
	return guardRunSent(t, predict, warm, 20, peers, b)
}

func guardRunSent(t *testing.T, predict bool, warm, sent int, peers, b []int) (at, to int) {
	t.Helper()
	return guardRunIn(t, Service{}, predict, warm, sent, peers, b)
}

// predictEngine is an engine with the guard's parameters, the prediction
// on or off.
func predictEngine(t *testing.T, predict bool) *Engine {
	t.Helper()
	p := guardParams()
	p.Guard.Predict = predict
	e, err := NewEngine(p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// guardRunIn is guardRunSent for a service svc.
func guardRunIn(t *testing.T, svc Service, predict bool, warm, sent int, peers, b []int) (at, to int) {
	t.Helper()
	e := predictEngine(t, predict)
	st := &ServiceState{}
	states := []*ServerState{{}, {}, {}}
	for k := range b {
		servers := make([]Server, 3)
		for i := range servers {
			a := peers[k]
			if i == 1 {
				a = b[k]
			}
			o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: a, Counter: uint32(1000 + 20*k)}
			servers[i] = Server{Obs: o, State: states[i], Out: &Decision{}}
		}
		e.Check(svc, st, servers)
		for i, sv := range servers {
			if sv.Out.Write && i != 1 {
				t.Fatalf("predict %v, check %d: server %d written to %d (%s)", predict, k, i, sv.Out.To, sv.Out.Reason)
			}
		}
		if d := servers[1].Out; d.Write {
			return k - warm, d.To
		}
	}
	return -1, 0
}

// warm is how many steady checks warmed prepends: the spread known, 0,
// and weighing as it does after a minute of checks (its decay is 0.98 a
// check), so that a backlog's own growth enters it only a little.
const warm = 60

// warmed prepends warm checks at a to v.
func warmed(a int, v []int) []int { return append(steady(warm, a), v...) }

func steady(n, a int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = a
	}
	return v
}

// TestGuardPredictCutsEarlier: B turns slow at check 1 and finishes 14 of
// the 20 connections it is sent a check, so its active connections grow
// 6 a check from its share of 20 (its spread learned over a minute of
// steady checks: 0, and about 3 once the growth itself enters it, under
// √20 = 4.47). Without the prediction it is cut once it holds twice its share,
// 16 over, at two checks: 44 at check 4 is once, 50 at check 5 cuts (to
// 10/2.5 = 4). With it the bar is 6·√20 = 26.8: at check 4 it holds 24
// over (at least 0.75 of the bar), has grown at four checks in a row, and
// will hold 24 + 6 = 30 over at the next check — cut one check earlier, to
// min(10/2.5, 10·14/20) = 4. The guard before the prediction failed the
// first half of this test (cut at 5).
func TestGuardPredictCutsEarlier(t *testing.T) {
	peers := steady(10, 20)
	b := []int{20, 26, 32, 38, 44, 50, 56, 62, 68, 74}
	if at, to := guardRun(t, true, warm, warmed(20, peers), warmed(20, b)); at != 4 || to != 4 {
		t.Errorf("predicted: B cut at check %d to %d, want check 4 to 4", at, to)
	}
	if at, to := guardRun(t, false, warm, warmed(20, peers), warmed(20, b)); at != 5 || to != 4 {
		t.Errorf("without prediction: B cut at check %d to %d, want check 5 to 4", at, to)
	}
	// Finishing none of 20 a check: 40 at check 1 (twice its share), 60 at
	// check 2 — the level test cuts at check 2, to 10/3 = 3, before the
	// prediction's three checks of growth are in; with the prediction on
	// the level test still applies: never later.
	fast := []int{20, 40, 60, 80, 100, 120, 140, 160, 180, 200}
	for _, predict := range []bool{true, false} {
		if at, to := guardRun(t, predict, warm, warmed(20, peers), warmed(20, fast)); at != 2 || to != 3 {
			t.Errorf("finishing none, predict %v: cut at check %d to %d, want check 2 to 3", predict, at, to)
		}
	}
}

// TestGuardPredictKeepAlive: every server holds 600 idle keep-alive
// connections (its share); B's backlog grows 30 a check among them. The
// level test needs 1200 (twice its share), 20 checks away. The prediction
// needs 0.75 of the bar (6·√600 = 147) over now, 110: 120 at check 4,
// 150 at the next.
func TestGuardPredictKeepAlive(t *testing.T) {
	peers := steady(12, 600)
	b := make([]int, 12)
	for k := range b {
		b[k] = 600 + 30*k
	}
	if at, _ := guardRun(t, true, warm, warmed(600, peers), warmed(600, b)); at != 4 {
		t.Errorf("predicted: B cut at check %d, want 4", at)
	}
	if at, _ := guardRun(t, false, warm, warmed(600, peers), warmed(600, b)); at != -1 {
		t.Errorf("without prediction: B cut at check %d, want never within 12 checks", at)
	}
}

// TestGuardPredictNoise: a server that is only noisy is not cut — its
// queue rising and falling from one check to the next, a jump at one
// check, a slow creep that stays under half the bar, a burst that grows
// every server alike.
func TestGuardPredictNoise(t *testing.T) {
	for _, c := range []struct {
		why      string
		peers, b []int
	}{
		{"rises and falls", steady(10, 20), []int{20, 30, 22, 32, 21, 33, 20, 31, 22, 34}},
		{"one jump", steady(10, 20), []int{20, 20, 45, 20, 20, 46, 20, 20, 20, 20}},
		{"creeps 3 a check to 8 over", steady(10, 20), []int{20, 23, 26, 28, 28, 28, 28, 28, 28, 28}},
		{"a burst grows everyone", []int{600, 650, 700, 750, 800, 850, 900, 950, 1000, 1050},
			[]int{600, 650, 700, 750, 800, 850, 900, 950, 1000, 1050}},
	} {
		if at, to := guardRun(t, true, warm, warmed(c.peers[0], c.peers), warmed(c.b[0], c.b)); at >= 0 {
			t.Errorf("%s: B cut at check %d to %d", c.why, at, to)
		}
	}
}

// TestGuardPredictNoisyServer: B's queue scattered by 10 from check to
// check (20 and 40 in turn over its last 12 checks: its excess 0 and 20),
// so its bar is 6·7.2 = 43 (the decay weighs the 48 steady checks before)
// and 0.75 of it 33. When it then grows 6 a check from
// 20 the prediction would need 33 over (56 active, check 6); the level
// test cuts first, at check 5 (44, 50), as without the prediction.
func TestGuardPredictNoisyServer(t *testing.T) {
	var warmB []int
	for k := range 12 {
		warmB = append(warmB, 20+20*(k%2))
	}
	b := append(steady(warm-12, 20), warmB...)
	b = append(b, 20, 26, 32, 38, 44, 50, 56, 62)
	peers := steady(len(b), 20)
	if at, to := guardRun(t, true, warm, peers, b); at != 5 || to != 4 {
		t.Errorf("noisy B: cut at check %d to %d, want check 5 to 4 (the level test)", at, to)
	}
}

// TestCountingScheduler: the IPVS schedulers whose kernel code weighs a
// server's active connections when it places a new one.
func TestCountingScheduler(t *testing.T) {
	for name, want := range map[string]bool{
		"lc": true, "wlc": true, "sed": true, "nq": true, "lblc": true, "lblcr": true, "ovf": true, "twos": true,
		"rr": false, "wrr": false, "fo": false, "sh": false, "dh": false, "mh": false, "": false,
	} {
		if got := CountingScheduler(name); got != want {
			t.Errorf("CountingScheduler(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestGuardPredictNotUnderCounting: under a scheduler that weighs active
// connections itself the guard cuts on the level rule alone, as with
// predict = false: B of TestGuardPredictCutsEarlier at check 5 (50 active,
// twice its share of 20 with 16 over at two checks) to 10/2.5 = 4, not at
// check 4; the keep-alive backlog of TestGuardPredictKeepAlive never
// within 12 checks. Without Counting both are cut on the prediction at
// check 4.
func TestGuardPredictNotUnderCounting(t *testing.T) {
	wlc := Service{Counting: true}
	b := []int{20, 26, 32, 38, 44, 50, 56, 62, 68, 74}
	if at, to := guardRunIn(t, wlc, true, warm, 20, warmed(20, steady(10, 20)), warmed(20, b)); at != 5 || to != 4 {
		t.Errorf("counting scheduler: B cut at check %d to %d, want check 5 to 4", at, to)
	}
	ka := make([]int, 12)
	for k := range ka {
		ka[k] = 600 + 30*k
	}
	if at, _ := guardRunIn(t, wlc, true, warm, 40, warmed(600, steady(12, 600)), warmed(600, ka)); at != -1 {
		t.Errorf("counting scheduler, keep-alive: B cut at check %d, want never within 12 checks", at)
	}
}

// TestGuardPredictionTrace: the trace of TestGuardPredictCutsEarlier's B
// (share 20, bar 6·√20 = 26.83, growing 6 a check, the counter's 20 a
// check of which it finishes 14): no prediction noted while its excess is
// under half the bar (6 and 12 at checks 1 and 2); at check 3, 18 over,
// predicted 18 + 20 − 14 = 24 below the bar: noted, no cut; at check 4,
// 24 over, predicted 30 at its fourth check of growth: the cut.
func TestGuardPredictionTrace(t *testing.T) {
	p := guardParams()
	p.Guard.Predict = true
	e, err := NewEngine(p)
	if err != nil {
		t.Fatal(err)
	}
	st := &ServiceState{}
	states := []*ServerState{{}, {}, {}}
	b := warmed(20, []int{20, 26, 32, 38, 44})
	bar := 6 * math.Sqrt(20)
	want := map[int]*GuardPrediction{
		3: {Excess: 18, Backlog: 24, Bar: bar, Grows: 3, Rated: true, FinishingLess: true},
		4: {Excess: 24, Backlog: 30, Bar: bar, Grows: 4, Rated: true, FinishingLess: true, Over: true},
	}
	for k := range b {
		servers := make([]Server, 3)
		for i := range servers {
			a := 20
			if i == 1 {
				a = b[k]
			}
			o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: a, Counter: uint32(1000 + 20*k)}
			servers[i] = Server{Obs: o, State: states[i], Out: &Decision{}}
		}
		e.Check(Service{}, st, servers)
		at := k - warm
		var got *GuardPrediction
		if g := servers[1].Out.Trace.Guard; g != nil {
			got = g.Prediction
		}
		w := want[at]
		switch {
		case w == nil && got != nil:
			t.Errorf("check %d: prediction %+v, want none", at, *got)
		case w != nil && got == nil:
			t.Errorf("check %d: no prediction, want %+v", at, *w)
		case w != nil && (math.Abs(got.Excess-w.Excess) > 1e-9 || math.Abs(got.Backlog-w.Backlog) > 1e-9 || math.Abs(got.Bar-w.Bar) > 1e-9 ||
			got.Grows != w.Grows || got.Rated != w.Rated || got.FinishingLess != w.FinishingLess || got.Over != w.Over):
			t.Errorf("check %d: prediction %+v, want %+v", at, *got, *w)
		}
	}
}

// slowRamp runs the backlog checks of TestGuardPredictSlowRamp and returns
// the check B was cut at (-1: never within 40) and the weight.
func slowRamp(t *testing.T, predict bool) (at, to int) {
	t.Helper()
	e := predictEngine(t, predict)
	b := []int{0}
	for k := 1; len(b) < 40; k++ {
		v := b[k-1]
		if k%3 != 0 {
			v++
		}
		b = append(b, v)
	}
	b = warmed(0, b)
	st := &ServiceState{}
	states := []*ServerState{{}, {}, {}}
	counter := uint32(1000)
	for k := range b {
		if k%4 == 0 { // the kernel publishes its counter every 4th check
			counter = uint32(1000 + b[k])
		}
		servers := make([]Server, 3)
		for i := range servers {
			a, c := 0, uint32(1000)
			if i == 1 {
				a, c = b[k], counter
			}
			o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: a, Counter: c}
			servers[i] = Server{Obs: o, State: states[i], Out: &Decision{}}
		}
		e.Check(Service{}, st, servers)
		if d := servers[1].Out; d.Write {
			return k - warm, d.To
		}
	}
	return -1, 0
}

// TestGuardPredictSlowRamp: the pace of the kernel test — B sent two
// connections every three checks and finishing none, its peers idle
// (share 0, bar min_excess 16), the counter published every fourth check.
// B holds 15 at check 22: 12 or more over (0.75 of the bar), the counter's
// last span (checks 16 to 20: 3 sent in 4 checks) 0.75 a check and one
// arrived at this check, so 15 + 0.75 + 0.25 = 16 at the next: cut, to
// weight.min (it finishes none). The level test waits for 16 at two
// checks and a growing one: 17 at check 25. Before a run of growth was
// kept out of the spread, the ramp itself raised the bar (sigma 1.5 by
// check 11, 5.2 by check 25) and both cut at 25.
func TestGuardPredictSlowRamp(t *testing.T) {
	if at, to := slowRamp(t, true); at != 22 || to != 1 {
		t.Errorf("predicted: B cut at check %d to %d, want check 22 to 1", at, to)
	}
	if at, to := slowRamp(t, false); at != 25 || to != 1 {
		t.Errorf("without prediction: B cut at check %d to %d, want check 25 to 1", at, to)
	}
}
