package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/monitor"
	"lvs-feedback/sim"
	"lvs-feedback/tune"
)

// writeHistory records, through the history writer, n servers over
// cycles cycles whose next-cycle active connections per unit of weight
// follow 1000·(0.2 + truth·inputs), with 5 % noise.
func writeHistory(t *testing.T, dir string, truth tune.Vector, n, cycles int) {
	t.Helper()
	writeHistoryChanging(t, dir, truth, truth, n, cycles, cycles)
}

// writeHistoryChanging is writeHistory whose outcome follows truth up to
// cycle change and then after.
func writeHistoryChanging(t *testing.T, dir string, truth, after tune.Vector, n, cycles, change int) {
	t.Helper()
	w, err := history.Open(dir, history.Limits{MaxSize: 64 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	prev := make([]float64, n)
	for c := 0; c < cycles; c++ {
		var batch []history.Record
		for i := 0; i < n; i++ {
			weight := 5 + i%3*5
			in := history.Inputs{Input: 0.2 + rng.Float64(), CPU: 0.2 + rng.Float64(), Memory: 0.2 + rng.Float64(),
				Disk: 0.2 + rng.Float64(), Response: 0.2 + rng.Float64(), Process: 0.2 + rng.Float64()}
			batch = append(batch, history.Record{V: history.SchemaVersion, Time: t0.Add(time.Duration(c) * 5 * time.Second),
				Service: "192.0.2.10:80/tcp", Server: fmt.Sprintf("198.51.100.%d:80", 10+i), State: "managed",
				WeightAfter: weight, ActiveConns: int(math.Round(prev[i] * float64(weight))), Inputs: &in})
			x := tune.Vector{in.Input, in.CPU, in.Memory, in.Disk, in.Response, in.Process}
			var load float64
			for j := range x {
				if c < change {
					load += truth[j] * x[j]
				} else {
					load += after[j] * x[j]
				}
			}
			prev[i] = 1000 * (0.2 + load) * (1 + 0.05*rng.NormFloat64())
		}
		if err := w.Write(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// lvsConfig writes the example configuration with controller = "lvs".
func lvsConfig(t *testing.T) string {
	t.Helper()
	example, err := os.ReadFile("../../docs/examples/lvs-monitor.toml")
	if err != nil {
		t.Fatal(err)
	}
	// The example leaves [weight] at its defaults: the table is added.
	if bytes.Contains(example, []byte("\n[weight]")) {
		t.Fatal("the example configuration has a [weight] table: set controller = \"lvs\" in it instead")
	}
	text := append(example, "\n[weight]\ncontroller = \"lvs\"\n"...)
	path := filepath.Join(t.TempDir(), "lvs.toml")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// lvs-tune regress on a recorded history, under the LVS formula: the
// verdict comes first and is to apply; the stepwise selection keeps the
// three figures the history was made with and the block it prints is
// within 0.05 of their coefficients; the configuration with the block
// passes the monitor's check, and the diff and the comparisons are
// printed.
func TestRegressCommand(t *testing.T) {
	dir := t.TempDir()
	truth := tune.Vector{0.2, 0.5, 0, 0, 0.3, 0}
	writeHistory(t, dir, truth, 6, 400)
	config := lvsConfig(t)
	var stdout, stderr bytes.Buffer
	if err := run([]string{"regress", "-config", config, "-dir", dir, "-service", "192.0.2.10:80/tcp"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Log(out)
	if !strings.HasPrefix(out, "verdict: apply") {
		t.Errorf("the output does not start with the verdict to apply")
	}
	block := out[strings.Index(out, "[coefficients]"):]
	block = block[:strings.Index(block, "(checked")]
	example, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	withBlock, err := tune.ReplaceCoefficients(example, tune.Vector{})
	if err != nil {
		t.Fatal(err)
	}
	withBlock = bytes.Replace(withBlock, []byte(tune.Vector{}.Block()), []byte(block), 1)
	// The printed block, put in place of the example's own.
	cfg, _, err := monitor.CheckConfig("block", withBlock)
	if err != nil {
		t.Fatalf("the printed block does not pass the check: %v\n%s", err, block)
	}
	got := tune.VectorOf(cfg.Coefficients)
	for j := range got {
		if math.Abs(got[j]-truth[j]) > 0.05 {
			t.Errorf("%s = %v, want %v ± 0.05", tune.Names[j], got[j], truth[j])
		}
	}
	for _, want := range []string{"passes lvs-monitor -check", "-cpu = 0.3\n+cpu = 0.5", "held-out RMSE", "expected gain:",
		`controller "lvs"`, "reads all six coefficients", "stepwise selection at significance 0.05", "entered cpu", "entered response", "entered input",
		"against the running coefficients:", "against a constant:", "): better"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(out, "  selected\n"); n != 3 {
		t.Errorf("%d figures selected, want 3 (input, cpu, response)", n)
	}
}

// Under the capacity controller (the example configuration) the fit
// chooses among all six, which that controller reads as sensitivities,
// and says so; the history's outcome follows input 0.2, cpu 0.5 and
// response 0.3, which the fit recovers to two places (0.2, 0.51, 0.29)
// and proposes as it is, better held out than the running set: apply.
func TestRegressCommandCapacity(t *testing.T) {
	dir := t.TempDir()
	writeHistory(t, dir, tune.Vector{0.2, 0.5, 0, 0, 0.3, 0}, 6, 400)
	var stdout, stderr bytes.Buffer
	if err := run([]string{"regress", "-config", "../../docs/examples/lvs-monitor.toml", "-dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Log(out)
	for _, want := range []string{
		"verdict: apply",
		`controller "capacity" (../../docs/examples/lvs-monitor.toml): reads all six coefficients as sensitivities against the shipped values`,
		"entered cpu (F 2034.44 > 3.85), entered response (F 1165.78 > 3.85), entered input (F 784.76 > 3.85)",
		"[coefficients]\ninput = 0.2\ncpu = 0.51\nmemory = 0.0\ndisk = 0.0\nresponse = 0.29\nprocess = 0.0\n",
		"-input = 0.1\n+input = 0.2\n-cpu = 0.3\n+cpu = 0.51\n-memory = 0.1\n+memory = 0\n-disk = 0.1\n+disk = 0\n-response = 0.3\n+response = 0.29\n-process = 0.1\n+process = 0\n",
		`runs controller "capacity", which reads each coefficient as a sensitivity against its shipped value`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// A history whose held-out time no longer follows what the training time
// did — the outcome follows cpu for 320 cycles, then response — gives a
// fit that is worse on the held-out time than the running coefficients
// (which weigh response too): the verdict, first, is to keep them, no
// block is printed, and the exit status is 3, distinct from a failure
// (1) and a mistake (2).
func TestRegressKeep(t *testing.T) {
	dir := t.TempDir()
	writeHistoryChanging(t, dir, tune.Vector{0, 1, 0, 0, 0, 0}, tune.Vector{0, 0, 0, 0, 1, 0}, 6, 400, 320)
	var stdout, stderr bytes.Buffer
	err := run([]string{"regress", "-config", lvsConfig(t), "-dir", dir}, &stdout, &stderr)
	out := stdout.String()
	t.Log(out)
	if !errors.Is(err, errKeep) || exitCode(err) != 3 {
		t.Fatalf("%v (exit %d), want the verdict to keep and exit 3\n%s%s", err, exitCode(err), out, stderr.String())
	}
	if !strings.HasPrefix(out, "verdict: keep your coefficients — the fit is not better than the running coefficients on the held-out time beyond its uncertainty") {
		t.Errorf("the output does not start with the verdict to keep")
	}
	if strings.Contains(out, "[coefficients]\n") || strings.Contains(out, "changes against") {
		t.Errorf("a block is printed")
	}
	for _, want := range []string{"entered cpu", "against the running coefficients: +", "not better beyond the uncertainty", "no [coefficients] block: keep your coefficients"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, c := range []struct {
		err  error
		code int
	}{{nil, 0}, {errUsage, 2}, {errKeep, 3}, {fmt.Errorf("read: %w", errKeep), 3}, {errors.New("no samples"), 1}} {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.code)
		}
	}
}

// Mistakes on the command line exit 2 with the usage; an empty history
// is an error saying so.
func TestCommandLineMistakes(t *testing.T) {
	for _, args := range [][]string{
		nil, {"fit"}, {"search"}, {"search", "-scenario", "x.toml", "-train", "3-1"},
		{"regress", "extra"}, {"search", "-nope"}, {"regress", "-significance", "0.7"}, {"regress", "-significance", "0"},
		{"search", "-scenario", "x.toml", "-balance-weight", "0.9", "-stability-weight", "0.2"},
		{"search", "-scenario", "x.toml", "-balance-weight", "1.5"}, {"search", "-scenario", "x.toml", "-stability-weight", "-0.1"},
		{"search", "-scenario", "x.toml", "-significance", "0.6"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); !errors.Is(err, errUsage) || stdout.Len() > 0 || !strings.Contains(stderr.String(), "usage:") {
			t.Errorf("%q: %v, stdout %q stderr %q", args, err, stdout.String(), stderr.String())
		}
	}
	for _, c := range []struct {
		args []string
		line string
	}{
		{[]string{"regress", "extra"}, `lvs-tune regress: unexpected argument "extra"`},
		{[]string{"regress", "-significance", "0.7"}, "lvs-tune regress: -significance 0.7: want a level in (0, 0.5]"},
		{[]string{"search", "-scenario", "x.toml", "more"}, `lvs-tune search: unexpected argument "more"`},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(c.args, &stdout, &stderr); !errors.Is(err, errUsage) || !strings.HasPrefix(stderr.String(), c.line+"\n") {
			t.Errorf("%q: %v, stderr %q, want it to start with %q", c.args, err, stderr.String(), c.line)
		}
	}
	for _, args := range [][]string{{"regress", "-h"}, {"search", "-h"}} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "usage: lvs-tune "+args[0]) ||
			!strings.Contains(stdout.String(), "3 keep your coefficients") {
			t.Errorf("%q: %v, stdout %q", args, err, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	err := run([]string{"regress", "-config", "../../docs/examples/lvs-monitor.toml", "-dir", t.TempDir()}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no samples") {
		t.Errorf("empty history: %v", err)
	}
	// The search refuses a base that does not run the LVS formula.
	base := filepath.Join(t.TempDir(), "capacity.toml")
	os.WriteFile(base, []byte("[weight]\ncontroller = \"capacity\"\n"), 0o644)
	err = run([]string{"search", "-scenario", "../../sim/scenarios/background.toml", "-base", base, "-q"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "only with controller") {
		t.Errorf("capacity base: %v", err)
	}
}

// writeServiceHistory records, through the history writer, three CPU-bound
// servers of 2 cores and per-core speeds 1:2:4 sharing 300 connections/s
// evenly, every 5 s for 60 cycles; the third loses half its speed at
// cycle 30. A second service's records are mixed in.
func writeServiceHistory(t *testing.T, dir string) {
	t.Helper()
	w, err := history.Open(dir, history.Limits{MaxSize: 64 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	speeds := []float64{1, 2, 4}
	for c := 0; c < 60; c++ {
		var batch []history.Record
		for _, svc := range []string{"192.0.2.10:80/tcp", "192.0.2.20:443/tcp"} {
			for i, speed := range speeds {
				if c >= 30 && i == 2 {
					speed /= 2
				}
				cpu := 100 * 0.010 / (2 * speed)
				r := history.Record{V: history.SchemaVersion, Time: t0.Add(time.Duration(c) * 5 * time.Second),
					Service: svc, Server: fmt.Sprintf("198.51.100.%d:80", 11+i), State: "managed",
					Configured: 10, DefaultWeight: 10, WeightBefore: 10, WeightTo: 10, WeightAfter: 10, Ramp: 1,
					Agent:    &history.Agent{Source: "host", CPU: cpu, CPUUsed: cpu, Raw: history.AgentRaw{CPUs: 2, CPUBusy: cpu}},
					Capacity: &history.Capacity{CPU: cpu, Busy: cpu, Bottleneck: "cpu"}}
				if c > 0 {
					n := int64(500)
					r.NewConns = &n
				}
				batch = append(batch, r)
			}
		}
		if err := w.Write(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// lvs-tune search -history on a recorded history: the scenario built is
// printed (speeds 0.5, 1, 2 relative to the median server; the third's
// halving at 145 s), written to a file that the simulator reads back to
// the same servers and events, and searched on with the fitness weights
// given (x1 0.9, so x2 0.1): with one held-out seed, a verdict to keep.
func TestSearchOnHistory(t *testing.T) {
	dir := t.TempDir()
	writeServiceHistory(t, dir)
	out := filepath.Join(t.TempDir(), "history.toml")
	var stdout, stderr bytes.Buffer
	err := run([]string{"search", "-history", dir, "-service", "192.0.2.10:80/tcp", "-write-scenario", out,
		"-duration", "120s", "-train", "1", "-held", "2", "-population", "3", "-generations", "2", "-workers", "1", "-q",
		"-balance-weight", "0.9"}, &stdout, &stderr)
	// One held-out seed gives the gain no spread to be weighed against:
	// the verdict is to keep, exit 3, no block.
	if !errors.Is(err, errKeep) {
		t.Fatalf("%v, want the verdict to keep\n%s%s", err, stdout.String(), stderr.String())
	}
	text := stdout.String()
	t.Log(text)
	for _, want := range []string{
		"scenario from the history of 192.0.2.10:80/tcp: 60 cycles of 5s",
		"198.51.100.11:80            2   0.500",
		"198.51.100.12:80            2   1.000",
		"198.51.100.13:80            2   2.000",
		"load: base 300.0 connections/s = utilisation 0.214; mean demand 5ms",
		"198.51.100.13:80 speed ×0.5 at 2m25s",
		"approximations:",
		"scenario written to " + out,
		"genetic search on history (wrr, 2m0s)",
		"verdict: keep your coefficients — ",
		"score per seed: 0.9 × balance (p99 ÷ the ideal weights' p99) + 0.1 × stability (weight writes per server per minute)",
		"no [coefficients] block: keep your coefficients",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	sc, err := sim.LoadScenario(out)
	if err != nil {
		t.Fatalf("the written scenario does not load: %v", err)
	}
	if len(sc.Servers) != 3 || sc.Servers[0].Speed != 0.5 || sc.Servers[2].Speed != 2 || sc.Duration != 300*time.Second ||
		len(sc.Events) != 1 || sc.Events[0].Factor != 0.5 || sc.Events[0].At != 145*time.Second {
		t.Errorf("read back: %+v", sc)
	}

	// Two services and no -service: an error naming them. -n builds and
	// prints only.
	stdout.Reset()
	err = run([]string{"search", "-history", dir, "-n"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "2 services (192.0.2.10:80/tcp, 192.0.2.20:443/tcp): give -service") {
		t.Errorf("two services: %v", err)
	}
	err = run([]string{"search", "-history", dir, "-service", "192.0.2.20:443/tcp", "-n"}, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), "192.0.2.20:443/tcp: 60 cycles") || strings.Contains(stdout.String(), "genetic search") {
		t.Errorf("-n: %v\n%s", err, stdout.String())
	}
	err = run([]string{"search", "-history", dir, "-service", "192.0.2.99:80/tcp", "-n"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `no records of service "192.0.2.99:80/tcp"`) {
		t.Errorf("unknown service: %v", err)
	}
	err = run([]string{"search", "-history", filepath.Join(dir, "missing"), "-n"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing history: %v", err)
	}
	for _, args := range [][]string{
		{"search", "-history", dir, "-scenario", "../../sim/scenarios/background.toml"},
		{"search", "-scenario", "../../sim/scenarios/background.toml", "-service", "x"},
		{"search", "-scenario", "../../sim/scenarios/background.toml", "-write-scenario", out},
	} {
		stderr.Reset()
		if err := run(args, &stdout, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "usage:") {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// A file of JSON lines, as lvsctl history -o json writes, is read too.
func TestSearchOnHistoryFile(t *testing.T) {
	dir := t.TempDir()
	writeServiceHistory(t, dir)
	var stdout, stderr bytes.Buffer
	err := run([]string{"search", "-history", filepath.Join(dir, history.FileName), "-service", "192.0.2.10:80/tcp", "-n"}, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), "198.51.100.13:80 speed ×0.5 at 2m25s") {
		t.Errorf("%v\n%s", err, stdout.String())
	}
}
