package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun drives the command end to end on a shortened shipped scenario:
// table, pivot, CSV and plots.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join("..", "..", "sim", "scenarios", "background.toml")
	var out, errb bytes.Buffer
	args := []string{"-q", "-duration", "60s", "-nseeds", "1", "-sched", "wrr",
		"-policies", "nominal,default,ideal,pooled", "-csv", filepath.Join(dir, "runs.csv"),
		"-plot", filepath.Join(dir, "plots"), scenario}
	if err := run(args, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"### background", "| wrr ", "ideal", "pooled (ref)", "p99/ideal", "fail %", "recovery s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	csv, err := os.ReadFile(filepath.Join(dir, "runs.csv"))
	if err != nil || strings.Count(string(csv), "\n") != 5 || !strings.Contains(string(csv), "fail_share,recovery_s") {
		t.Errorf("csv: %v, %d lines", err, strings.Count(string(csv), "\n"))
	}
	plots, _ := filepath.Glob(filepath.Join(dir, "plots", "*.svg"))
	if len(plots) != 4 { // three kernel policies and the p99 comparison
		t.Errorf("%d plots: %v", len(plots), plots)
	}
	out.Reset()
	if err := run([]string{"-q", "-pivot", "-duration", "60s", "-nseeds", "1", "-sched", "wlc", "-policies", "nominal,ideal", scenario}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "wlc: p99 / ideal") || !strings.Contains(out.String(), "median recovery s") {
		t.Errorf("pivot output:\n%s", out.String())
	}
	if err := run([]string{"-policies", "nosuch", scenario}, &out, &errb); err == nil {
		t.Error("an unknown policy was accepted")
	}
}
