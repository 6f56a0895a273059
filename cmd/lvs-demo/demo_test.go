package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
	"lvs-feedback/policy"
	"lvs-feedback/sim"
	"lvs-feedback/tune"
)

// backendRoleEnv makes the test binary play a backend: the demo re-executes
// the test binary (os.Args[0]) as its backends, the way lvs-demo
// re-executes itself.
const backendRoleEnv = "LVS_DEMO_TEST_ROLE=backend"

func TestMain(m *testing.M) {
	if os.Getenv("LVS_DEMO_TEST_ROLE") == "backend" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		code := runBackend(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// buildAgent builds cmd/lvs-agent into a temporary directory.
func buildAgent(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build lvs-agent")
	}
	bin := filepath.Join(t.TempDir(), "lvs-agent")
	cmd := exec.Command(goTool, "build", "-o", bin, "lvs-feedback/cmd/lvs-agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build lvs-agent: %v\n%s", err, out)
	}
	return bin
}

// testOptions runs the demo with the test binary as its backends.
func testOptions(t *testing.T, agentPath string) options {
	o := defaultOptions()
	o.AgentPath = agentPath
	o.BackendCommand = []string{os.Args[0], "backend"}
	o.BackendEnv = []string{backendRoleEnv}
	o.Stderr = &testWriter{t: t}
	return o
}

// testWriter sends the monitor's warnings to the test log.
type testWriter struct {
	mu sync.Mutex
	t  *testing.T
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// assertAllExited checks that every child the demo started is gone: no
// orphans.
func assertAllExited(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child pid %d still exists after the demo returned (kill 0: %v)", pid, err)
		}
	}
}

// TestDemoShortRun runs the whole demo (real backends, real lvs-agents, the
// real monitor, real traffic) for 21 s with a 9 s hog, and checks the
// direction of what happens with wide margins, so that a busy 2-core
// machine does not make it flaky: server 2's weight falls during the hog
// and recovers after it; the others do not fall much.
func TestDemoShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 25 s")
	}
	o := testOptions(t, buildAgent(t))
	o.Duration, o.HogAt, o.HogFor = 21*time.Second, 5*time.Second, 9*time.Second
	o.StateDir = filepath.Join(t.TempDir(), "state") // -state-dir: created, kept
	var out bytes.Buffer
	res, err := runDirector(context.Background(), o, &out)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	assertAllExited(t, res.PIDs)
	assertHistoryKept(t, o.StateDir, len(res.Cycles))
	assertBenefit(t, o.StateDir)
	if len(res.PIDs) != 2*numServers {
		t.Errorf("%d child PIDs recorded, want %d", len(res.PIDs), 2*numServers)
	}
	v := res.Verdict
	if v.Problem != "" {
		t.Fatalf("verdict: %s", v.Problem)
	}
	// Before the hog every server has capacity to spare: the default
	// controller keeps the configured weight.
	if v.Before != defaultWeight {
		t.Errorf("server %d's weight before the hog is %d, want the default %d (servers with capacity to spare keep it)", v.Server, v.Before, defaultWeight)
	}
	if !v.Fell {
		t.Errorf("server %d's weight fell only from %d to %d during the hog, want a fall of at least %d", v.Server, v.Before, v.Min, v.NeedFall)
	}
	if !v.Recovered {
		t.Errorf("server %d's weight came back only from %d to %d after the hog, want at least +%d", v.Server, v.Min, v.End, v.NeedBack)
	}
	for _, other := range v.Others {
		if other.Min < other.Before/2 || other.Min <= v.Min {
			t.Errorf("server %d (not hogged) fell from %d to %d during the hog (hogged server's lowest: %d)", other.Server, other.Before, other.Min, v.Min)
		}
	}
	if !v.Pass {
		t.Error("verdict: FAIL")
	}
	for _, want := range []string{"hog on s2 started", "hog on s2 over", "verdict:", "PASS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// assertHistoryKept checks that the -state-dir directory outlived the demo
// with one history record per server for every cycle the demo printed.
func assertHistoryKept(t *testing.T, dir string, cycles int) {
	t.Helper()
	perServer := map[string]int{}
	notes, err := history.Read(dir, history.Filter{Service: demoService}, func(r history.Record) { perServer[r.Server]++ })
	if err != nil {
		t.Fatalf("read the kept history: %v", err)
	}
	if len(notes) > 0 {
		t.Errorf("history lines skipped: %v", notes)
	}
	if len(perServer) != numServers {
		t.Errorf("history has records of %d servers, want %d: %v", len(perServer), numServers, perServer)
	}
	for srv, n := range perServer {
		if n != cycles {
			t.Errorf("history has %d records of %s, want one per cycle: %d", n, srv, cycles)
		}
	}
}

// assertBenefit replays the kept history as lvs-tune benefit (lvsctl
// benefit) does, over all of it: the demo's own recording is a history it
// can replay; the monitor run replays the hogged server's fall and
// recovery (two weight changes at least); and when the builder saw the
// hog as a loss of more than half the server's capacity, static weights,
// which keep sending it a third of the traffic, have the higher p99.
func assertBenefit(t *testing.T, dir string) {
	t.Helper()
	var recs []history.Record
	if _, err := history.Read(dir, history.Filter{Service: demoService}, func(r history.Record) { recs = append(recs, r) }); err != nil || len(recs) == 0 {
		t.Fatalf("read the kept history: %d records, %v", len(recs), err)
	}
	first, last := recs[0].Time, recs[len(recs)-1].Time
	res, err := tune.Benefit(func(fn func(history.Record)) error {
		for _, r := range recs {
			fn(r)
		}
		return nil
	}, demoService, tune.BenefitOptions{From: first.Add(-time.Second), Until: last, Seeds: []uint64{1, 2}})
	if err != nil {
		t.Fatalf("benefit on the demo's history: %v", err)
	}
	t.Logf("benefit: static p99 %.4fs overload %.0fs; monitor p99 %.4fs overload %.0fs; %d weight changes; events %+v",
		res.Static.P99, res.Static.Overload, res.Monitor.P99, res.Monitor.Overload, res.Writes, res.Report.Events)
	if res.Writes < 2 {
		t.Errorf("%d weight changes replayed, want the fall and the recovery at least", res.Writes)
	}
	for _, p := range []float64{res.Static.P99, res.Monitor.P99} {
		if !(p > 0) || math.IsInf(p, 1) {
			t.Errorf("p99 %v, want a finite positive figure", p)
		}
	}
	for _, e := range res.Report.Events {
		if e.Kind == sim.EvSpeed && e.Factor < 0.5 && !(res.P99Ratio() > 1) {
			t.Errorf("the hog is a speed ×%g, and static p99 ÷ monitor's is %v: want above 1", e.Factor, res.P99Ratio())
		}
	}
}

// TestDemoInterrupted cancels the demo (what Ctrl-C does) while it runs: it
// must return an error and leave no child process behind.
func TestDemoInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	o := testOptions(t, buildAgent(t))
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	var res result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = runDirector(ctx, o, &out)
	}()
	// Wait for the table to start, then interrupt.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "time |") {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the demo printed no table in 30 s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the demo did not return within 15 s of being interrupted")
	}
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted demo returned %v, want an error wrapping context.Canceled", err)
	}
	if len(res.PIDs) != 2*numServers {
		t.Fatalf("%d child PIDs recorded, want %d", len(res.PIDs), 2*numServers)
	}
	assertAllExited(t, res.PIDs)
}

// syncBuffer is a bytes.Buffer safe to read while the demo writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDemoFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"-duration", "10s", "-hog-at", "2s", "-hog-for", "5s"}, true},
		{[]string{"-duration", "10s", "-hog-at", "6s", "-hog-for", "5s"}, false}, // no time to recover
		{[]string{"-interval", "10ms"}, false},
		{[]string{"-rate", "0"}, false},
		{[]string{"-table", "disk"}, false},
		{[]string{"-hog-for", "0s"}, false},
		{[]string{"extra"}, false},
	} {
		_, err := parseDemoFlags(tc.args, io.Discard, io.Discard)
		if (err == nil) != tc.ok {
			t.Errorf("parseDemoFlags(%q) error = %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
	if code := runDemo(context.Background(), []string{"-rate", "-1"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
}

// TestDemoConfig checks that the built-in configuration is one the monitor
// accepts, with the coefficients docs/demo.md explains.
func TestDemoConfig(t *testing.T) {
	servers := []*server{
		{n: 1, addr: netip.MustParseAddrPort("127.0.0.1:1001"), agentAddr: "127.0.0.1:2001"},
		{n: 2, addr: netip.MustParseAddrPort("127.0.0.1:1002"), agentAddr: "127.0.0.1:2002"},
		{n: 3, addr: netip.MustParseAddrPort("127.0.0.1:1003"), agentAddr: "127.0.0.1:2003"},
	}
	cfg, err := monitor.ParseConfig("demo", []byte(demoConfig(time.Second, t.TempDir(), servers)))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cfg.Services[0].Servers); got != 3 {
		t.Fatalf("%d servers, want 3", got)
	}
	if a := cfg.Services[0].Servers[1].AgentAddr; a != "127.0.0.1:2002" {
		t.Errorf("server 2's agent is %q", a)
	}
	// A server fully busy on every input must be above the target, and an
	// idle one far below it: that is what makes the demo work.
	busy := policy.AggregateLoad(policy.Inputs{Input: 1, CPU: 1, Response: 1, Process: 1}, cfg.Coefficients)
	idle := policy.AggregateLoad(policy.Inputs{Input: 1, CPU: 0.05, Response: 0.3}, cfg.Coefficients)
	if busy <= cfg.Weight.Target || idle >= cfg.Weight.Target/2 {
		t.Errorf("busy load %.2f, idle load %.2f; want busy above the target %.2f and idle below half of it", busy, idle, cfg.Weight.Target)
	}
}

func TestSmoothWRR(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:1")
	b := netip.MustParseAddrPort("127.0.0.1:2")
	c := netip.MustParseAddrPort("127.0.0.1:3")
	dests := []ipvs.Destination{{Addr: a, Weight: 30}, {Addr: b, Weight: 10}, {Addr: c, Weight: 0}}
	var rr smoothWRR
	got := map[netip.AddrPort]int{}
	for range 400 {
		d, ok := rr.pick(dests)
		if !ok {
			t.Fatal("no pick")
		}
		got[d]++
	}
	if got[a] != 300 || got[b] != 100 || got[c] != 0 {
		t.Errorf("picks %v, want 300/100/0 for weights 30/10/0", got)
	}
	// A weight change takes effect at once.
	dests[0].Weight = 0
	for range 10 {
		if d, _ := rr.pick(dests); d != b {
			t.Fatalf("picked %v with only %v in rotation", d, b)
		}
	}
	dests[1].Weight = 0
	if _, ok := rr.pick(dests); ok {
		t.Error("picked a server with every weight 0")
	}
}

func TestJudge(t *testing.T) {
	rec := func(at float64, w1, w2, w3 int) cycleRecord {
		return cycleRecord{At: time.Duration(at * float64(time.Second)), Weights: [numServers]int{w1, w2, w3}}
	}
	s := time.Second
	fallAndBack := []cycleRecord{rec(0, 15, 15, 15), rec(1, 30, 30, 30), rec(2, 30, 20, 30), rec(3, 30, 5, 30), rec(4, 30, 9, 30), rec(7, 30, 28, 30)}
	v := judge(fallAndBack, 1500*time.Millisecond, 3500*time.Millisecond, s)
	if !v.Pass || v.Before != 30 || v.Min != 5 || v.End != 28 {
		t.Errorf("fall and recovery: %+v", v)
	}
	if len(v.Others) != 2 || v.Others[0].Min != 30 {
		t.Errorf("others: %+v", v.Others)
	}
	noFall := []cycleRecord{rec(0, 30, 30, 30), rec(2, 30, 28, 30), rec(7, 30, 30, 30)}
	if v := judge(noFall, s, 3*s, s); v.Pass || v.Fell {
		t.Errorf("no fall judged a pass: %+v", v)
	}
	noRecovery := []cycleRecord{rec(0, 30, 30, 30), rec(2, 30, 4, 30), rec(7, 30, 6, 30)}
	if v := judge(noRecovery, s, 3*s, s); v.Pass || !v.Fell || v.Recovered {
		t.Errorf("no recovery judged a pass: %+v", v)
	}
	tooShort := []cycleRecord{rec(0, 30, 30, 30), rec(2, 30, 4, 30)}
	if v := judge(tooShort, s, 3*s, s); v.Pass || v.Problem == "" {
		t.Errorf("run ending during the hog judged: %+v", v)
	}
}

// The column of what drives the weight shows the decision's own figure:
// the capacity factor under the capacity controller (the load, which it
// does not use, is not shown), the load under the "lvs" formula.
func TestDriverColumn(t *testing.T) {
	capacity := &printer{}
	lvs := &printer{lvs: true}
	for _, c := range []struct {
		p    *printer
		tr   policy.Trace
		want string
	}{
		{capacity, policy.Trace{Load: 1.7, Capacity: &policy.CapacityStep{Factor: 0.1}}, "0.10"},
		{capacity, policy.Trace{Load: 1.7, Capacity: &policy.CapacityStep{Factor: 1}}, "1.00"},
		{capacity, policy.Trace{Load: 0.3, Capacity: &policy.CapacityStep{Factor: math.NaN()}}, "-"},
		{capacity, policy.Trace{Load: 0.3}, "-"},
		{lvs, policy.Trace{Load: 0.84, Capacity: &policy.CapacityStep{Factor: 0.5}}, "0.84"},
		{lvs, policy.Trace{Load: math.NaN()}, "-"},
	} {
		if got := c.p.driver(c.tr); got != c.want {
			t.Errorf("lvs=%v driver(load %v, capacity %+v) = %q, want %q", c.p.lvs, c.tr.Load, c.tr.Capacity, got, c.want)
		}
	}
	if capacity.driverName() != "cap" || lvs.driverName() != "load" {
		t.Errorf("headings %q and %q, want cap and load", capacity.driverName(), lvs.driverName())
	}
}

// TestClientCountsInFlight checks that the client keeps the in-memory
// table's active connections at its requests in flight per server: the
// history's outcome for lvs-tune regress.
func TestClientCountsInFlight(t *testing.T) {
	mem := ipvs.NewMem()
	svc, err := ipvs.ParseServiceKey(demoService)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddrPort("127.0.0.1:1001")
	b := netip.MustParseAddrPort("127.0.0.1:1002")
	if err := mem.AddService(svc, "wrr"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []netip.AddrPort{a, b} {
		if err := mem.AddDestination(svc, d, defaultWeight); err != nil {
			t.Fatal(err)
		}
	}
	cl := newClient(mem, svc, 100, mem.RecordConnection)
	cl.setActive = mem.SetActive
	active := func() map[netip.AddrPort]int {
		ds, err := mem.Destinations(svc)
		if err != nil {
			t.Fatal(err)
		}
		m := map[netip.AddrPort]int{}
		for _, d := range ds {
			m[d.Addr] = d.ActiveConns
		}
		return m
	}
	cl.addInFlight(a, 1)
	cl.addInFlight(a, 1)
	cl.addInFlight(b, 1)
	if got := active(); got[a] != 2 || got[b] != 1 {
		t.Errorf("after 2 requests to a and 1 to b: active %v, want a 2, b 1", got)
	}
	cl.addInFlight(a, -1)
	cl.addInFlight(b, -1)
	if got := active(); got[a] != 1 || got[b] != 0 {
		t.Errorf("after one of a's and b's ended: active %v, want a 1, b 0", got)
	}
	if n := cl.pickE.Load(); n != 0 {
		t.Errorf("%d table errors counted, want 0", n)
	}
}
