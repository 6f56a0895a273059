package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"lvs-feedback/control/api"
	"lvs-feedback/control/controltest"
	"lvs-feedback/policy"
)

const (
	svc = "192.0.2.10:80/tcp"
	rsA = "198.51.100.11:80"
	rsB = "198.51.100.12:80"
	rsC = "198.51.100.13:80"
)

// syncBuffer is a bytes.Buffer safe to read while lvsctl writes to it.
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

// lvsctl runs the command against the rig's socket.
func lvsctl(t *testing.T, r *controltest.Rig, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return lvsctlIn(t, r, nil, args...)
}

// lvsctlIn is lvsctl showing times in loc.
func lvsctlIn(t *testing.T, r *controltest.Rig, loc *time.Location, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if r != nil {
		args = append([]string{"-socket", r.Socket}, args...)
	}
	return runCLI(t, &cli{loc: loc}, args...)
}

// runCLI runs c with args, capturing its output.
func runCLI(t *testing.T, c *cli, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncBuffer
	c.stdout, c.stderr, c.poll, c.now = &out, &errb, 20*time.Millisecond, time.Now
	code = c.run(context.Background(), args)
	t.Logf("lvsctl %s → exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

func contains(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

func statusJSON(t *testing.T, r *controltest.Rig) api.Status {
	t.Helper()
	code, out, _ := lvsctl(t, r, "status", "-o", "json")
	if code != 0 {
		t.Fatalf("status -o json: exit %d", code)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	return st
}

func server(t *testing.T, st api.Status, name string) api.ServerStatus {
	t.Helper()
	for _, s := range st.Services {
		for _, srv := range s.Servers {
			if srv.Server == name {
				return srv
			}
		}
	}
	t.Fatalf("server %s not in status", name)
	return api.ServerStatus{}
}

func TestStatus(t *testing.T) {
	r := controltest.New(t, "")
	code, out, _ := lvsctl(t, r, "status")
	if code != 0 {
		t.Fatalf("status before any cycle: exit %d", code)
	}
	contains(t, "status before any cycle", out, "no cycle completed yet", "waiting for first cycle")

	r.Agents.Set(controltest.A, controltest.Load{CPU: 0.5, Memory: 0.4, Disk: 0.3, Processes: 0.5})
	r.Cycle()
	if code, _, _ := lvsctl(t, r, "drain", svc, rsB); code != 0 {
		t.Fatalf("drain: exit %d", code)
	}
	if err := r.Table.SetActive(controltest.Service, controltest.A, 7, 31); err != nil {
		t.Fatal(err)
	}
	r.Agents.Fail(controltest.C)
	r.Cycle()

	code, out, _ = lvsctl(t, r, "status")
	if code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	// The keys of the controller in use (the rig runs the LVS formula).
	contains(t, "status header", out, "\ncontroller: lvs (gain 5, target 0.95, threshold 1, scale 10, min 1)\n")
	contains(t, "status table", out, svc, "SERVER", "STATE", "WEIGHT", "DEFAULT", "LOAD", "ACTIVE", "INACTIVE", "AGENT OK",
		"drained by operator", "agent failing", "active", "1s ago",
		rsC+": agent: agent 198.51.100.13:9771: connection refused")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == rsA {
			// A: active, weight raised from 10, default 10, 7 active, 31 inactive, agent polled this cycle.
			if f[1] != "active" || f[3] != "10" || f[len(f)-4] != "7" || f[len(f)-3] != "31" || f[len(f)-2] != "0s" {
				t.Errorf("row of A: %q", line)
			}
		}
	}

	st := statusJSON(t, r)
	if st.Version != api.ProtocolVersion || st.Cycle == nil || !st.Reload.OK {
		t.Errorf("status header: %+v", st)
	}
	if want := []api.Setting{{Key: "gain", Value: 5}, {Key: "target", Value: 0.95}, {Key: "threshold", Value: 1}, {Key: "scale", Value: 10}, {Key: "min", Value: 1}}; st.Config.Controller != "lvs" || !reflect.DeepEqual(st.Config.ControllerSettings, want) {
		t.Errorf("config summary: controller %q settings %v, want lvs %v", st.Config.Controller, st.Config.ControllerSettings, want)
	}
	a, b, c := server(t, st, rsA), server(t, st, rsB), server(t, st, rsC)
	if a.State != api.StateActive || a.Load == nil || a.Inputs == nil || a.ActiveConns != 7 || a.InactiveConns != 31 ||
		a.AgentAgeSeconds == nil || *a.AgentAgeSeconds != 0 || a.KernelWeight <= 10 || a.DefaultWeight != 10 {
		t.Errorf("A: %+v", a)
	}
	if b.State != api.StateDrained || b.KernelWeight != 0 || b.Load != nil || b.Ownership != "drained" {
		t.Errorf("B: %+v", b)
	}
	// B's agent answered in the first cycle, one interval ago.
	if b.AgentAgeSeconds == nil || *b.AgentAgeSeconds != 1 {
		t.Errorf("B's last good poll: %v, want 1 s ago", b.AgentAgeSeconds)
	}
	if c.State != api.StateAgentFailing || c.AgentError == "" || c.KernelWeight != 10 {
		t.Errorf("C: %+v", c)
	}

	// 31 s later C's agent is stale (agent_expiry 30 s).
	r.Advance(30 * time.Second)
	r.Cycle()
	st = statusJSON(t, r)
	if c := server(t, st, rsC); c.State != api.StateAgentStale || c.Load == nil || c.AgentAgeSeconds == nil || *c.AgentAgeSeconds != 32 {
		t.Errorf("C after 31 s: %+v (age %v)", c, c.AgentAgeSeconds)
	}
	_, out, _ = lvsctl(t, r, "status")
	contains(t, "status table", out, "agent stale", "32s ago")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 10 && f[0] == rsC && (f[7] != "-" || f[10] != "0.95") {
			t.Errorf("row of C (stale agent: no CPU, RESPONSE 0.95): %q", line)
		}
	}
}

func TestDrainWait(t *testing.T) {
	r := controltest.New(t, "")
	r.Cycle()
	if err := r.Table.SetActive(controltest.Service, controltest.A, 5, 2); err != nil {
		t.Fatal(err)
	}
	// The monitor keeps cycling while the drain waits, as it does in
	// lvs-monitor.
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := r.Loop(ctx, 30*time.Millisecond)
	defer func() { cancel(); <-loopDone }()

	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := lvsctl(t, r, "drain", svc, rsA, "--wait", "--timeout", "30s")
		done <- result{code, out, errOut}
	}()
	// The connections close one batch at a time.
	time.Sleep(200 * time.Millisecond)
	if w := r.Weight(controltest.A); w != 0 {
		t.Errorf("weight while draining: %d", w)
	}
	select {
	case res := <-done:
		t.Fatalf("drain --wait returned with 5 active connections: %+v", res)
	default:
	}
	if err := r.Table.SetActive(controltest.Service, controltest.A, 3, 4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	// No active connection left, but inactive ones and persistence
	// templates: still waiting, for each in turn.
	must(t, r.Table.SetPersistTimeout(controltest.Service, 90*time.Second))
	must(t, r.Table.SetPersistConns(controltest.Service, controltest.A, 2))
	for _, step := range []struct{ active, inactive, templates int }{{0, 7, 2}, {0, 0, 2}, {0, 0, 1}} {
		must(t, r.Table.SetActive(controltest.Service, controltest.A, step.active, step.inactive))
		must(t, r.Table.SetPersistConns(controltest.Service, controltest.A, step.templates))
		time.Sleep(200 * time.Millisecond)
		select {
		case res := <-done:
			t.Fatalf("drain --wait returned with %+v left: %+v", step, res)
		default:
		}
	}
	must(t, r.Table.SetPersistConns(controltest.Service, controltest.A, 0))
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("drain --wait did not return after the connections and templates reached 0")
	}
	if res.code != 0 {
		t.Fatalf("drain --wait: exit %d: %s", res.code, res.errOut)
	}
	contains(t, "drain --wait output", res.out, "drained: weight 0",
		"waiting: 5 active, 2 inactive connections, 0 persistence templates",
		"waiting: 3 active, 4 inactive connections, 0 persistence templates",
		"waiting: 0 active, 7 inactive connections, 2 persistence templates",
		"waiting: 0 active, 0 inactive connections, 2 persistence templates",
		"waiting: 0 active, 0 inactive connections, 1 persistence template",
		"drained: no connections and no persistence templates left after ")
	cancel()
	<-loopDone
	// Kept drained by the cycles that follow.
	rep := r.Cycle()
	for _, d := range rep.Dests {
		if d.Key.Dest == controltest.A && (d.State != policy.DrainedByOperator || d.KernelWeight != 0) {
			t.Errorf("after cycles: A %s weight %d", d.State, d.KernelWeight)
		}
	}
}

func TestDrainWaitTimeout(t *testing.T) {
	r := controltest.New(t, "")
	r.Cycle()
	if err := r.Table.SetActive(controltest.Service, controltest.B, 5, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out, errOut := lvsctl(t, r, "drain", "--wait", "--timeout", "200ms", svc, rsB)
	if code != exitWaitTimeout {
		t.Fatalf("exit %d, want %d", code, exitWaitTimeout)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	contains(t, "output", out, "waiting: 5 active, 0 inactive connections, 0 persistence templates")
	contains(t, "stderr", errOut, "still 5 active, 0 inactive connections, 0 persistence templates after 200ms; the server stays drained\n",
		"  active connections: end when client or server closes them")
	if w := r.Weight(controltest.B); w != 0 {
		t.Errorf("weight after the timeout: %d, want 0 (the drain stands)", w)
	}
}

func TestUndrain(t *testing.T) {
	r := controltest.New(t, "")
	r.Cycle()
	if code, _, _ := lvsctl(t, r, "drain", svc, rsB); code != 0 {
		t.Fatal("drain failed")
	}
	r.Cycle()
	code, out, _ := lvsctl(t, r, "undrain", svc, rsB)
	if code != 0 {
		t.Fatalf("undrain: exit %d", code)
	}
	// Slow start from 10 % of the default 10.
	contains(t, "undrain output", out, "undrained: weight 1 now, ramping to about 10 over 30s")
	if w := r.Weight(controltest.B); w != 1 {
		t.Errorf("weight after undrain: %d, want 1", w)
	}
	r.Cycle()
	st := statusJSON(t, r)
	if b := server(t, st, rsB); b.State != api.StateRamping || b.Ramp >= 1 || b.Ownership != "managed" {
		t.Errorf("B after undrain: %+v", b)
	}
	_, out, _ = lvsctl(t, r, "status")
	contains(t, "status", out, "ramping up")
	// An ipvsadm-style drain in the kernel is seen as a drain, too.
	if err := r.Table.SetWeight(controltest.Service, controltest.C, r.Weight(controltest.C), 0); err != nil {
		t.Fatal(err)
	}
	r.Cycle()
	if c := server(t, statusJSON(t, r), rsC); c.State != api.StateDrained {
		t.Errorf("C drained with ipvsadm: %+v", c)
	}
}

func TestExplain(t *testing.T) {
	r := controltest.New(t, "")
	r.Agents.Set(controltest.A, controltest.Load{CPU: 0.8, Memory: 0.5, Disk: 0.41, Processes: 1.5})
	r.Prober.Set(controltest.A, 20*time.Millisecond)
	r.Cycle()
	// 60 new connections to A, 30 to B and C: mean 40, INPUT of A 1.5.
	for rs, n := range map[string]uint32{rsA: 60, rsB: 30, rsC: 30} {
		dst := netip.MustParseAddrPort(rs)
		if err := r.Table.AddConnections(controltest.Service, dst, n); err != nil {
			t.Fatal(err)
		}
	}
	r.Cycle()
	code, out, _ := lvsctl(t, r, "explain", svc, rsA)
	if code != 0 {
		t.Fatalf("explain: exit %d", code)
	}
	// load = 0.1·1.5 + 0.3·0.8 + 0.1·0.5 + 0.1·0.41 + 0.3·0.2 + 0.1·1.5 = 0.691
	// cycle 1 (INPUT neutral 1, load 0.641): 10 + 5·∛0.309 = 13.380 → 13
	// cycle 2: 13.380 + 5·∛(0.95 − 0.691) = 13.380 + 3.187 = 16.567 → 17
	contains(t, "explain", out,
		"INPUT", "60 new connections in the interval; service mean 40.0 per server", "1.500", "0.100", "0.1500",
		"CPU", "80.0% busy over 1.0s on 4 CPUs", "0.800", "0.300", "0.2400",
		"MEMORY", "8.0 GiB available of 16.0 GiB", "0.500",
		"DISK", "/ 41% used, I/O 10% busy (vda); the larger counts", "0.410",
		"RESPONSE", "probe 20ms; reference 100ms counts as fully loaded", "0.200", "0.0600",
		"PROCESS", "6 runnable tasks on 4 CPUs", "1.500",
		"load = Σ coefficient × input = 0.6910",
		"w + gain·∛(target − load) = 13.380 + 5·∛(0.95 − 0.6910) = 13.380 + 3.187 = 16.567",
		"[min 1, max 100 = scale 10 × default 10] → 16.567 (within bounds)",
		"round(16.567) = 17",
		"kernel 13 → 17: |4| is more than the threshold 1",
		"decision   written: load 0.691")

	code, out, _ = lvsctl(t, r, "explain", "-o", "json", svc, rsA)
	if code != 0 {
		t.Fatal("explain -o json failed")
	}
	var e api.Explanation
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, term := range e.Terms {
		sum += term.Product
	}
	f := e.Formula
	if e.Load == nil || math.Abs(*e.Load-0.691) > 1e-9 || math.Abs(sum-*e.Load) > 1e-9 || len(e.Terms) != 6 || f == nil {
		t.Fatalf("explanation: %+v", e)
	}
	if math.Abs(f.Step-5*math.Cbrt(0.95-0.691)) > 1e-9 || f.Next != 17 || f.KernelBefore != 13 || !f.Passes || !f.Written || f.Max != 100 {
		t.Errorf("formula: %+v", *f)
	}

	// A server at its target: the step is below the threshold.
	code, out, _ = lvsctl(t, r, "explain", svc, rsB)
	if code != 0 {
		t.Fatal("explain B failed")
	}
	contains(t, "explain B", out, "is not more than the threshold 1", "decision   not written")

	// Not managed, not configured, malformed.
	if code, _, errOut := lvsctl(t, r, "explain", svc, "198.51.100.99:80"); code != exitFailed || !strings.Contains(errOut, "use ipvsadm") {
		t.Errorf("explain of an unlisted server: exit %d %q", code, errOut)
	}
	if code, _, _ := lvsctl(t, r, "explain", "192.0.2.10:80/icmp", rsA); code != exitUsage {
		t.Errorf("explain with a bad service: exit %d, want %d", code, exitUsage)
	}
}

const reloadSeries = "lvs_monitor_config_last_reload_successful"

func TestReload(t *testing.T) {
	r := controltest.New(t, "")
	r.Agents.Set(controltest.A, controltest.Load{CPU: 0.5, Memory: 0.5, Disk: 0.5, Processes: 0.5})
	r.Cycle()
	before := r.Weight(controltest.A)
	if code, _, _ := lvsctl(t, r, "drain", svc, rsB); code != 0 {
		t.Fatal("drain failed")
	}

	// A broken file: refused, the running configuration stays.
	r.WriteConfig(strings.Replace(controltest.Config, `interval = "1s"`, `intreval = "1s"`, 1))
	code, _, errOut := lvsctl(t, r, "reload")
	if code != exitFailed {
		t.Fatalf("reload of a broken file: exit %d, want %d", code, exitFailed)
	}
	contains(t, "reload stderr", errOut, "reload refused", "intreval", "unknown key", `did you mean "interval"`, "the running configuration stays")
	st := statusJSON(t, r)
	if st.Reload.OK || !strings.Contains(st.Reload.Error, "intreval") || st.Reload.At == nil || st.Config.Coefficients["cpu"] != 0.3 {
		t.Errorf("status after a failed reload: %+v", st.Reload)
	}
	_, out, _ := lvsctl(t, r, "status")
	contains(t, "status", out, "LAST RELOAD FAILED", "intreval", "earlier configuration is still running")
	if err := testutil.GatherAndCompare(r.Registry, strings.NewReader(`
# HELP lvs_monitor_config_last_reload_successful 1 when the last configuration (re)load succeeded.
# TYPE lvs_monitor_config_last_reload_successful gauge
lvs_monitor_config_last_reload_successful 0
`), reloadSeries); err != nil {
		t.Error(err)
	}
	r.Cycle() // the old configuration still runs

	// A valid file with new coefficients and a new interval.
	good := strings.Replace(controltest.Config, "cpu      = 0.3\nmemory   = 0.1", "cpu      = 0.2\nmemory   = 0.2", 1)
	good = strings.Replace(good, `interval = "1s"`, `interval = "2s"`, 1)
	good = strings.Replace(good, `metrics_listen = ""`, `metrics_listen = ":9999"`, 1)
	// band is the capacity controller's: the reload warns, as -check does, at its line.
	good = strings.Replace(good, "threshold = 1\n", "threshold = 1\nband      = 0.3\n", 1)
	r.WriteConfig(good)
	code, out, _ = lvsctl(t, r, "reload")
	if code != 0 {
		t.Fatalf("reload: exit %d", code)
	}
	contains(t, "reload output", out, "configuration reloaded", `metrics_listen changed from "" to ":9999": takes effect when lvs-monitor restarts`,
		"interval changed from 1s to 2s: applies from the next cycle",
		fmt.Sprintf(":%d: warning: weight.band", lineOf(t, good, "band      = 0.3")))
	st = statusJSON(t, r)
	if !st.Reload.OK || st.Reload.Error != "" || st.Config.Coefficients["cpu"] != 0.2 || st.Config.Coefficients["memory"] != 0.2 || st.Config.IntervalSeconds != 2 {
		t.Errorf("status after a good reload: %+v %+v", st.Reload, st.Config)
	}
	if err := testutil.GatherAndCompare(r.Registry, strings.NewReader(`
# HELP lvs_monitor_config_last_reload_successful 1 when the last configuration (re)load succeeded.
# TYPE lvs_monitor_config_last_reload_successful gauge
lvs_monitor_config_last_reload_successful 1
`), reloadSeries); err != nil {
		t.Error(err)
	}
	// Weights and drains survive the reload.
	r.Cycle()
	if w := r.Weight(controltest.B); w != 0 {
		t.Errorf("B undrained by a reload: weight %d", w)
	}
	if w := r.Weight(controltest.A); w < before {
		t.Errorf("A reset by a reload: weight %d, was %d", w, before)
	}
	if got := r.Monitor.Status().Config.MetricsListen; got != "" {
		t.Errorf("metrics_listen of the running configuration: %q, want the one in use", got)
	}
}

// buildMonitor builds cmd/lvs-monitor into a temporary directory and
// returns the directory.
func buildMonitor(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build lvs-monitor")
	}
	dir := t.TempDir()
	cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, "lvs-monitor"), "lvs-feedback/cmd/lvs-monitor")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build lvs-monitor: %v\n%s", err, out)
	}
	return dir
}

// lineOf is the number of the first line of text that is line.
func lineOf(t *testing.T, text, line string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if l == line {
			return i + 1
		}
	}
	t.Fatalf("no line %q", line)
	return 0
}

// installedIn is an lvsctl whose executable is in dir.
func installedIn(dir string) *cli {
	return &cli{executable: func() (string, error) { return filepath.Join(dir, "lvsctl"), nil }}
}

func TestCheckConfig(t *testing.T) {
	dir := buildMonitor(t)
	t.Setenv("PATH", t.TempDir()) // lvs-monitor only next to lvsctl

	code, out, _ := runCLI(t, installedIn(dir), "check-config", "../../docs/examples/lvs-monitor.toml")
	if code != 0 {
		t.Fatalf("check-config of the example: exit %d", code)
	}
	contains(t, "check-config", out, "../../docs/examples/lvs-monitor.toml: ok (1 services)")

	bad := filepath.Join(t.TempDir(), "bad.toml")
	text := strings.Replace(controltest.Config, "cpu      = 0.3", "cpu      = 0.4", 1)
	text = strings.Replace(text, "weight  = 10\n[[service.server]]\naddress = \"198.51.100.12:80\"", "weight  = 0\n[[service.server]]\naddress = \"198.51.100.12:80\"", 1)
	if err := os.WriteFile(bad, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, installedIn(dir), "check-config", bad)
	if code != exitFailed {
		t.Fatalf("check-config of a bad file: exit %d", code)
	}
	// Each mistake with its file, line and key. The weight's line is not
	// pinned: lvs-monitor names the first line with that key, [weight].
	contains(t, "check-config stderr", errOut,
		fmt.Sprintf("%s:%d: coefficients: must sum to 1", bad, lineOf(t, text, "[coefficients]")),
		"drain a server with ipvsadm")
	if !regexp.MustCompile(regexp.QuoteMeta(bad) + `:[1-9][0-9]*: service\[0\]\.server\[0\]\.weight: `).MatchString(errOut) {
		t.Errorf("check-config stderr does not name the weight's line and key:\n%s", errOut)
	}
	if code, _, _ := runCLI(t, installedIn(dir), "check-config", filepath.Join(t.TempDir(), "missing.toml")); code != exitFailed {
		t.Errorf("check-config of a missing file: exit %d", code)
	}

	// Not next to lvsctl: found in PATH.
	t.Setenv("PATH", dir)
	if code, out, _ := runCLI(t, installedIn(t.TempDir()), "check-config", "../../docs/examples/lvs-monitor.toml"); code != 0 || !strings.Contains(out, "ok (1 services)") {
		t.Errorf("check-config with lvs-monitor in PATH: exit %d, %q", code, out)
	}
}

func TestCheckConfigNoMonitor(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, out, errOut := runCLI(t, installedIn(t.TempDir()), "check-config", "../../docs/examples/lvs-monitor.toml")
	if code != exitFailed || out != "" ||
		errOut != "lvsctl: check-config runs lvs-monitor -check; lvs-monitor not found next to lvsctl or in PATH\n" {
		t.Errorf("check-config without lvs-monitor: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestSocketPath: only control_socket is read from -config.
func TestSocketPath(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A mistake lvs-monitor refuses (weight 0, an unknown key) does not
	// hide control_socket.
	withMistakes := file("mistakes.toml", "control_socket = \"/run/x/control.sock\"\nintervall = \"1s\"\n"+
		strings.Replace(controltest.Config, "control_socket = \"SOCKET\"", "", 1)+"\n[[service]]\naddress = \"192.0.2.11:80\"\n[[service.server]]\naddress = \"198.51.100.11:80\"\nweight = 0\n")
	tests := []struct {
		name, socket, config, want string
	}{
		{"-socket wins", "/run/s.sock", withMistakes, "/run/s.sock"},
		{"control_socket of a file with mistakes", "", withMistakes, "/run/x/control.sock"},
		{"missing file", "", filepath.Join(dir, "missing.toml"), api.DefaultSocket},
		{"not TOML", "", file("garbage.toml", "control_socket = \"/run/x/control.sock\"\n[[[\n"), api.DefaultSocket},
		{"no control_socket", "", file("none.toml", "interval = \"1s\"\n"), api.DefaultSocket},
		{"relative control_socket", "", file("relative.toml", "control_socket = \"control.sock\"\n"), api.DefaultSocket},
		{"control_socket not a string", "", file("number.toml", "control_socket = 5\n"), api.DefaultSocket},
	}
	for _, tt := range tests {
		c := &cli{socket: tt.socket, config: tt.config}
		if got := c.socketPath(); got != tt.want {
			t.Errorf("%s: socket %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	r := controltest.New(t, "")
	r.Cycle()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "no command"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"drain without server", []string{"drain", svc}, exitUsage, "usage: lvsctl drain SERVICE SERVER [--wait] [--timeout D]"},
		{"bad flag", []string{"status", "-x"}, exitUsage, "flag provided but not defined"},
		{"bad output", []string{"status", "-o", "yaml"}, exitUsage, "want table or json"},
		{"malformed server", []string{"drain", svc, "nonsense"}, exitUsage, "want RIP:PORT"},
		{"unlisted server", []string{"drain", svc, "198.51.100.99:80"}, exitFailed, "use ipvsadm"},
		{"unknown service", []string{"undrain", "192.0.2.99:80/tcp", rsA}, exitFailed, "not a configured service"},
		{"bare RIP takes the service's port", []string{"drain", svc, "198.51.100.11"}, exitOK, ""},
	}
	for _, tt := range tests {
		code, _, errOut := lvsctl(t, r, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d (want %d), stderr %q (want %q)", tt.name, code, tt.code, errOut, tt.want)
		}
	}
	if w := r.Weight(controltest.A); w != 0 {
		t.Errorf("drain of a bare RIP: weight %d", w)
	}
	// Nobody listening.
	code, _, errOut := lvsctl(t, nil, "-socket", filepath.Join(t.TempDir(), "none.sock"), "status")
	if code != exitUnreachable || !strings.Contains(errOut, "cannot reach lvs-monitor") {
		t.Errorf("no socket: exit %d %q", code, errOut)
	}
	// The socket path comes from -config when -socket is not given.
	code, _, _ = lvsctl(t, nil, "-config", r.ConfigPath, "status")
	if code != 0 {
		t.Errorf("status via -config: exit %d", code)
	}
	// Also from a file being edited, with a mistake lvs-monitor would
	// refuse.
	edited := filepath.Join(t.TempDir(), "edited.toml")
	if err := os.WriteFile(edited, []byte(fmt.Sprintf("control_socket = %q\nintervall = \"2s\"\n", r.Socket)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, _ = lvsctl(t, nil, "-config", edited, "status")
	if code != 0 {
		t.Errorf("status via -config of a file with a mistake: exit %d", code)
	}
}

func TestStatusShowsSync(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC)
	ok := now.Add(-2 * time.Second)
	st := api.Status{Now: now, Reload: api.ReloadStatus{OK: true}, Sync: &api.SyncStatus{
		ID: "director-b", Role: "standby", Writer: false, Phase: "standby", Epoch: 7, Leader: "director-a@7",
		Peers: []api.SyncPeer{
			{Address: "10.0.0.1:9773", LastOK: &ok},
			{Address: "10.0.0.3:9773", Unreachable: true, LastError: "dial tcp 10.0.0.3:9773: connection refused"},
		},
	}}
	var b bytes.Buffer
	printStatus(&b, st, time.UTC)
	contains(t, "status", b.String(),
		"sync: director-b, follower: another director writes the weights (role standby, standby, leader director-a@7)",
		"peer 10.0.0.1:9773: in step (last accepted 2s ago)",
		"peer 10.0.0.3:9773: UNREACHABLE: dial tcp 10.0.0.3:9773: connection refused (last accepted never)")
}
