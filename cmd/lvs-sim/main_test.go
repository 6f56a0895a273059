package main

import (
	"bytes"
	"lvs-feedback/sim"
	"os"
	"path/filepath"
	"strconv"
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

// TestTimeline: -timeline FILE writes one line per run, window and server
// (the failover scenario shortened to 200 s: 5 servers × 40 windows of 5 s,
// or 20 of 10 s), its dead server c failing its new connections after
// 150 s.
func TestTimeline(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join("..", "..", "sim", "scenarios", "failover.toml")
	for _, c := range []struct {
		window string
		lines  int
	}{{"5s", 5 * 40}, {"10s", 5 * 20}} {
		path := filepath.Join(dir, "tl-"+c.window+".csv")
		var out, errb bytes.Buffer
		args := []string{"-q", "-duration", "200s", "-nseeds", "1", "-sched", "wrr", "-policies", "nominal-unchecked",
			"-timeline", path, "-timeline-window", c.window, scenario}
		if err := run(args, &out, &errb); err != nil {
			t.Fatalf("run: %v\n%s", err, errb.String())
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if lines[0] != "scenario,scheduler,policy,seed,t_start,t_end,server,new,failed,active,inactive,weight" || len(lines) != 1+c.lines {
			t.Fatalf("%s: header %q, %d lines; want %d", c.window, lines[0], len(lines)-1, c.lines)
		}
		// c crashes at 150 s: from then on every new connection to it
		// fails (wrr: it keeps its share); before, none does (the window
		// ending at 150 s also has those lost in flight).
		for _, l := range lines[1:] {
			f := strings.Split(l, ",")
			from, _ := strconv.ParseFloat(f[4], 64)
			to, _ := strconv.ParseFloat(f[5], 64)
			if f[6] != "c" {
				continue
			}
			if from >= 150 && (f[7] != f[8] || f[7] == "0") || to < 150 && f[8] != "0" {
				t.Errorf("%s: c's window %g–%g: %s new, %s failed", c.window, from, to, f[7], f[8])
			}
		}
	}
	var out, errb bytes.Buffer
	for _, w := range []string{"0s", "1ns", "-5s"} {
		if err := run([]string{"-q", "-timeline", filepath.Join(dir, "x.csv"), "-timeline-window", w, scenario}, &out, &errb); err == nil {
			t.Errorf("-timeline-window %s accepted", w)
		}
	}
}

// TestOverview: -overview draws the weights of default against static
// weights and both p99s in one file, and says what it lacks when the
// static weights (nominal) were not run.
func TestOverview(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join("..", "..", "sim", "scenarios", "background.toml")
	path := filepath.Join(dir, "overview.svg")
	var out, errb bytes.Buffer
	args := []string{"-q", "-duration", "60s", "-nseeds", "1", "-sched", "wlc", "-policies", "default,nominal,ideal", "-overview", path, scenario}
	if err := run(args, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"background · wlc: default against static weights (seed 1)",
		"weight per server: default (solid), static (dashed)", ">static<", ">default<", ">ideal<", ">a<", ">d<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if n := strings.Count(string(svg), "<polyline"); n != 4*2+3 {
		t.Errorf("overview has %d lines, want 11 (4 servers × 2 weights, 3 p99s)", n)
	}
	err = run([]string{"-q", "-duration", "60s", "-nseeds", "1", "-policies", "default,ideal", "-overview", path, scenario}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `needs the series of "default" and "nominal"`) {
		t.Errorf("without nominal: %v", err)
	}
}
