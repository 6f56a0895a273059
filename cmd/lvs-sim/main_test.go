package main

import (
	"bytes"
	"lvs-feedback/sim"
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

// TestFamily: -generate N -family F -out DIR writes scenario files that
// read back and run; without -out the family runs after the files given;
// the flags go together.
func TestFamily(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := run([]string{"-family", "test", "-generate", "2", "-out", dir}, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
	if len(files) != 2 || filepath.Base(files[0]) != "test-00.toml" || filepath.Base(files[1]) != "test-01.toml" {
		t.Fatalf("files %v, want test-00.toml and test-01.toml", files)
	}
	if out.String() != files[0]+"\n"+files[1]+"\n" {
		t.Errorf("output %q, want the two paths", out.String())
	}

	out.Reset()
	scenario := filepath.Join("..", "..", "sim", "scenarios", "light.toml")
	args := []string{"-q", "-duration", "40s", "-sched", "wlc", "-policies", "equal,ideal", "-family", "test", "-generate", "1", scenario}
	if err := run(args, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"### light", "### test-00", "Generated: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The file's 5 seeds and the generated scenario's own 2, × 2 policies.
	if want := "14 runs"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}

	// -steady: the same cluster with its incidents left out.
	steadyDir := t.TempDir()
	if err := run([]string{"-family", "test", "-generate", "1", "-steady", "-out", steadyDir}, &out, &errb); err != nil {
		t.Fatalf("run -steady: %v\n%s", err, errb.String())
	}
	withIncidents, err := sim.LoadScenario(files[0])
	if err != nil {
		t.Fatal(err)
	}
	steady, err := sim.LoadScenario(filepath.Join(steadyDir, "test-00.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(withIncidents.Events) == 0 || len(steady.Events) != 0 || len(steady.Workload.Flash) != 0 || steady.Workload.Wave.Amplitude != 0 {
		t.Errorf("-steady: events %d → %d, flash %d, wave %v; want the events gone",
			len(withIncidents.Events), len(steady.Events), len(steady.Workload.Flash), steady.Workload.Wave)
	}
	if len(steady.Servers) != len(withIncidents.Servers) || steady.Workload.Utilisation != withIncidents.Workload.Utilisation || steady.Seeds[0] != withIncidents.Seeds[0] {
		t.Errorf("-steady changed the cluster: %d servers at %v (seed %d), want %d at %v (seed %d)",
			len(steady.Servers), steady.Workload.Utilisation, steady.Seeds[0], len(withIncidents.Servers), withIncidents.Workload.Utilisation, withIncidents.Seeds[0])
	}

	for _, bad := range [][]string{
		{"-family", "test", scenario},
		{"-generate", "2", scenario},
		{"-family", "tuning", "-generate", "1"},
		{"-out", dir, scenario},
		{"-steady", scenario},
	} {
		if err := run(bad, &out, &errb); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
