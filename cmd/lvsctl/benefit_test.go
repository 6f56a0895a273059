package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lvs-feedback/history"
)

// recordFlatHistory writes cycles cycles of three equal servers at their
// default weight 10, 300 connections/s of 20 ms on 8 cores each: nothing
// for the monitor to change.
func recordFlatHistory(t *testing.T, dir string, cycles int) {
	t.Helper()
	w, err := history.Open(dir, history.Limits{MaxSize: 1 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for c := range cycles {
		var batch []history.Record
		for i := range 3 {
			busy := 100 * 0.02 / 8
			r := history.Record{V: history.SchemaVersion, Time: t0.Add(time.Duration(c) * 5 * time.Second),
				Service: "192.0.2.10:80/tcp", Server: fmt.Sprintf("198.51.100.%d:80", 11+i), State: "managed",
				Configured: 10, DefaultWeight: 10, WeightBefore: 10, WeightTo: 10, WeightAfter: 10, Ramp: 1,
				Agent: &history.Agent{CPU: busy, CPUUsed: busy, Raw: history.AgentRaw{CPUs: 8, CPUBusy: busy}}}
			if c > 0 {
				n := int64(math.Round(100 * 5))
				r.NewConns = &n
			}
			batch = append(batch, r)
		}
		if err := w.Write(batch); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBenefitDelegates: lvsctl benefit runs lvs-tune benefit next to it
// with its flags and -config's state_dir, and passes on its output and
// exit status; without lvs-tune it says so.
func TestBenefitDelegates(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build lvs-tune")
	}
	bin := t.TempDir()
	if out, err := exec.Command(goTool, "build", "-o", filepath.Join(bin, "lvs-tune"), "lvs-feedback/cmd/lvs-tune").CombinedOutput(); err != nil {
		t.Fatalf("go build lvs-tune: %v\n%s", err, out)
	}
	t.Setenv("PATH", t.TempDir()) // lvs-tune only next to lvsctl
	dir := t.TempDir()
	recordFlatHistory(t, dir, 30)

	code, out, errOut := runCLI(t, installedIn(bin), "benefit", "-dir", dir, "-until", "last", "-seeds", "1")
	if code != exitOK || errOut != "" {
		t.Fatalf("benefit: exit %d, stderr %q", code, errOut)
	}
	// Nothing changed: the two runs are the same run.
	contains(t, "benefit", out, "benefit of lvs-monitor's weights on 192.0.2.10:80/tcp",
		"30 cycles of 5s (2m30s), 3 servers", "the weights lvs-monitor wrote: 0 changes",
		"scheduler wrr, seeds 1 ")
	var p99 []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) == 6 && f[0] == "p99" {
			p99 = f[3:]
		}
	}
	if len(p99) != 3 || p99[0] != p99[1] || p99[2] != "1.00" {
		t.Errorf("p99 line %q, want static = monitor, ratio 1.00:\n%s", p99, out)
	}

	// The window passed on: nothing recorded then, lvs-tune's exit 1.
	code, _, errOut = runCLI(t, installedIn(bin), "benefit", "-dir", dir, "-until", "2026-12-04T10:00:00Z")
	if code != exitFailed || !strings.Contains(errOut, "nothing to replay: no records in "+dir+" after 2026-12-04 09:00:00 UTC") {
		t.Errorf("empty window: exit %d, stderr %q", code, errOut)
	}
	// -config's state_dir is where it looks without -dir.
	empty := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "lvs-monitor.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("state_dir = %q\n", empty)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, installedIn(bin), "-config", cfg, "benefit")
	if code != exitFailed || !strings.Contains(errOut, "nothing to replay: no records in "+empty+"\n") {
		t.Errorf("state_dir of -config: exit %d, stderr %q", code, errOut)
	}
	// lvsctl's own flag mistakes and lvs-tune's are both usage (2).
	if code, _, _ := runCLI(t, installedIn(bin), "benefit", "-window", "soon"); code != exitUsage {
		t.Errorf("-window soon: exit %d, want %d", code, exitUsage)
	}
	if code, _, errOut := runCLI(t, installedIn(bin), "benefit", "-dir", dir, "-sched", "mh"); code != exitUsage || !strings.Contains(errOut, `-sched "mh"`) {
		t.Errorf("-sched mh: exit %d, stderr %q", code, errOut)
	}

	code, out, errOut = runCLI(t, installedIn(t.TempDir()), "benefit", "-dir", dir)
	if code != exitFailed || out != "" || errOut != "lvsctl: benefit runs lvs-tune benefit; lvs-tune not found next to lvsctl or in PATH\n" {
		t.Errorf("benefit without lvs-tune: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
