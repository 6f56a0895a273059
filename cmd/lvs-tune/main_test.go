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
	"lvs-feedback/tune"
)

// writeHistory records, through the history writer, n servers over
// cycles cycles whose next-cycle active connections per unit of weight
// follow 1000·(0.2 + truth·inputs), with 5 % noise.
func writeHistory(t *testing.T, dir string, truth tune.Vector, n, cycles int) {
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
				load += truth[j] * x[j]
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

// lvs-tune regress on a recorded history: the block it prints is within
// 0.05 of the coefficients the history was made with, the example
// configuration with the block passes the monitor's check, and the diff
// and the gain are printed.
func TestRegressCommand(t *testing.T) {
	dir := t.TempDir()
	truth := tune.Vector{0.2, 0.5, 0, 0, 0.3, 0}
	writeHistory(t, dir, truth, 6, 400)
	var stdout, stderr bytes.Buffer
	if err := run([]string{"regress", "-config", "../../docs/examples/lvs-monitor.toml", "-dir", dir, "-service", "192.0.2.10:80/tcp"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Log(out)
	block := out[strings.Index(out, "[coefficients]"):]
	block = block[:strings.Index(block, "(checked")]
	example, err := os.ReadFile("../../docs/examples/lvs-monitor.toml")
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
	for _, want := range []string{"passes lvs-monitor -check", "-cpu = 0.3\n+cpu = 0.5", "held-out RMSE", "expected gain:", "matters"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// Mistakes on the command line exit 2 with the usage; an empty history
// is an error saying so.
func TestCommandLineMistakes(t *testing.T) {
	for _, args := range [][]string{
		nil, {"fit"}, {"search"}, {"search", "-scenario", "x.toml", "-train", "3-1"},
		{"regress", "extra"}, {"search", "-nope"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); !errors.Is(err, errUsage) || stdout.Len() > 0 || !strings.Contains(stderr.String(), "usage:") {
			t.Errorf("%q: %v, stdout %q stderr %q", args, err, stdout.String(), stderr.String())
		}
	}
	for _, args := range [][]string{{"regress", "-h"}, {"search", "-h"}} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "usage: lvs-tune "+args[0]) {
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
