package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"lvs-feedback/history"
	"lvs-feedback/internal/cmdline"
	"lvs-feedback/tune"
)

var benefitT0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// writeBenefitHistory records, through the history writer, a service of
// three servers of 32 cores, the second at a quarter of the others'
// speed, default weight 20, every 5 s for cycles cycles at 720
// connections/s of 50 ms: the monitor cut the second to 5 at the first
// cycle (weightB) or left it (nil).
func writeBenefitHistory(t *testing.T, dir string, cycles int, weightB func(c int) int) []history.Record {
	t.Helper()
	w, err := history.Open(dir, history.Limits{MaxSize: 64 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	speeds := []float64{1, 0.25, 1}
	prev := []int{20, 20, 20}
	var all []history.Record
	for c := range cycles {
		after := []int{20, 20, 20}
		if weightB != nil {
			after[1] = weightB(c)
		}
		total := float64(prev[0] + prev[1] + prev[2])
		var batch []history.Record
		for i, sp := range speeds {
			served := 720 * float64(prev[i]) / total * 5
			busy := served * 0.05 / (32 * sp * 5)
			rec := history.Record{V: history.SchemaVersion, Time: benefitT0.Add(time.Duration(c) * 5 * time.Second),
				Service: "192.0.2.10:80/tcp", Server: fmt.Sprintf("198.51.100.%d:80", 11+i), State: "managed",
				Configured: 20, DefaultWeight: 20, Ramp: 1, WeightBefore: prev[i], WeightTo: after[i], WeightAfter: after[i],
				Agent:    &history.Agent{Source: "host", CPU: busy, CPUUsed: busy, Raw: history.AgentRaw{CPUs: 32, CPUBusy: busy}},
				Capacity: &history.Capacity{CPU: busy, Busy: busy, Bottleneck: "cpu"}}
			if c > 0 {
				n := int64(math.Round(served))
				rec.NewConns = &n
			}
			batch = append(batch, rec)
		}
		if err := w.Write(batch); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
		copy(prev, after)
	}
	return all
}

// TestBenefitCommand runs lvs-tune benefit on a recorded history and
// checks that it prints, and writes as textfile metrics, exactly what
// tune.Benefit computes on the same records (whose values
// tune.TestBenefitHoggedServer checks against the ones worked by hand).
func TestBenefitCommand(t *testing.T) {
	dir := t.TempDir()
	recs := writeBenefitHistory(t, dir, 60, func(int) int { return 5 })
	last := benefitT0.Add(59 * 5 * time.Second)
	want, err := tune.Benefit(func(fn func(history.Record)) error {
		for _, r := range recs {
			fn(r)
		}
		return nil
	}, "192.0.2.10:80/tcp", tune.BenefitOptions{From: last.Add(-time.Hour), Until: last, Seeds: []uint64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	prom := filepath.Join(t.TempDir(), "lvs_benefit.prom")
	var stdout, stderr bytes.Buffer
	old := syscall.Umask(0o077) // root's umask under some policies: the file is 0644 all the same
	err = run([]string{"benefit", "-dir", dir, "-until", "last", "-seeds", "1-2", "-workers", "1", "-textfile", prom}, &stdout, &stderr)
	syscall.Umask(old)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("lvs-tune benefit: %v", err)
	}
	out := stdout.String()
	for _, line := range []string{
		"benefit of lvs-monitor's weights on 192.0.2.10:80/tcp, replayed in the simulator",
		"window    2026-12-03 10:00:00 UTC to 10:04:55: 60 cycles of 5s (5m0s), 3 servers",
		"static    each server's default weight throughout (20, 20, 20), servers down taken out at each interval",
		"monitor   the weights lvs-monitor wrote: 1 changes, each replayed at its cycle",
		"runs      scheduler wrr, seeds 1-2 (the same requests for both runs; figures are the means)",
		fmt.Sprintf("%-18s %10s %10s %17s", "p99 response time", seconds(want.Static.P99), seconds(want.Monitor.P99), fmt.Sprintf("%.2f", want.Static.P99/want.Monitor.P99)),
		fmt.Sprintf("%-18s %10.0f %10.0f %17s", "overload seconds", want.Static.Overload, want.Monitor.Overload, ratioText(want.OverloadRatio())),
		"metrics written to " + prom,
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("output lacks the line %q", line)
		}
	}
	if want.P99Ratio() < 10 {
		t.Errorf("p99 ratio %v, want above 10 (tune.TestBenefitHoggedServer)", want.P99Ratio())
	}

	st, err := os.Stat(prom)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("textfile mode %v, want 0644 whatever the umask (node_exporter reads it as another user)", st.Mode().Perm())
	}
	f, err := os.Open(prom)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("the textfile does not parse: %v", err)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		fam := fams[name]
		if fam == nil {
			t.Errorf("no %s in the textfile", name)
			return math.NaN()
		}
	metrics:
		for _, m := range fam.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			return m.GetGauge().GetValue()
		}
		t.Errorf("no %s%v in the textfile", name, labels)
		return math.NaN()
	}
	svc := "192.0.2.10:80/tcp"
	for _, c := range []struct {
		got, want float64
		what      string
	}{
		{value("lvs_benefit_p99_seconds", "service", svc, "weights", "static"), want.Static.P99, "static p99"},
		{value("lvs_benefit_p99_seconds", "service", svc, "weights", "monitor"), want.Monitor.P99, "monitor p99"},
		{value("lvs_benefit_overload_seconds", "service", svc, "weights", "static"), want.Static.Overload, "static overload"},
		{value("lvs_benefit_overload_seconds", "service", svc, "weights", "monitor"), want.Monitor.Overload, "monitor overload"},
		{value("lvs_benefit_window_seconds", "service", svc), 300, "window"},
		{value("lvs_benefit_weight_changes", "service", svc), 1, "weight changes"},
	} {
		if c.got != c.want {
			t.Errorf("%s: textfile %v, want %v", c.what, c.got, c.want)
		}
	}
	if ts := value("lvs_benefit_last_run_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)).Abs() > time.Hour {
		t.Errorf("last run timestamp %v, want about now", ts)
	}
}

// TestBenefitBadInput: each way to have nothing to replay is a clear
// error and exit status 1; a flag mistake exit status 2.
func TestBenefitBadInput(t *testing.T) {
	recorded := t.TempDir()
	writeBenefitHistory(t, recorded, 30, nil)
	empty := t.TempDir()
	oldFormat := filepath.Join(t.TempDir(), "old.jsonl")
	if err := os.WriteFile(oldFormat, []byte(`{"v":0,"time":"2026-12-03T10:00:00Z","service":"192.0.2.10:80/tcp","server":"198.51.100.11:80"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	newerBinary := t.TempDir()
	if err := os.WriteFile(filepath.Join(newerBinary, history.FileName), append([]byte("LVSHIST\x00"), 99, 0, 0, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"no history", []string{"-dir", empty}, exitFailed, "nothing to replay: no records in " + empty},
		{"no such directory", []string{"-dir", filepath.Join(empty, "nope")}, exitFailed, "no such file or directory"},
		{"a window without records", []string{"-dir", recorded, "-until", "2026-12-04T10:00:00Z"}, exitFailed,
			"nothing to replay: no records in " + recorded + " after 2026-12-04 09:00:00 UTC up to 2026-12-04 10:00:00 UTC (-window 1h0m0s, -until 2026-12-04T10:00:00Z); its records run from 2026-12-03 10:00:00 UTC to 2026-12-03 10:02:25 UTC"},
		{"a service without records in the window", []string{"-dir", recorded, "-service", "192.0.2.10:80/tcp", "-until", "2026-12-04T10:00:00Z"}, exitFailed,
			"its records run from 2026-12-03T10:00:00Z to 2026-12-03T10:02:25Z"},
		{"an unknown service", []string{"-dir", recorded, "-service", "192.0.2.99:80/tcp"}, exitFailed, "nothing to replay: no records of 192.0.2.99:80/tcp in " + recorded},
		{"too short a window", []string{"-dir", recorded, "-until", "last", "-window", "60s"}, exitFailed, "12 cycles, need at least 20"},
		{"an old-format file", []string{"-dir", oldFormat}, exitFailed, "no records in " + oldFormat + " that this lvs-tune reads: 1 parts skipped, the first: " + oldFormat + ":1: skipped"},
		{"a newer binary format", []string{"-dir", newerBinary}, exitFailed, "that this lvs-tune reads: 1 parts skipped"},
		{"window 0", []string{"-dir", recorded, "-window", "0s"}, cmdline.ExitUsage, "-window 0s: want a positive duration"},
		{"bad until", []string{"-dir", recorded, "-until", "yesterday"}, cmdline.ExitUsage, `-until "yesterday": want now, last or an RFC 3339 time`},
		{"bad scheduler", []string{"-dir", recorded, "-sched", "mh"}, cmdline.ExitUsage, `-sched "mh": want rr, wrr, lc, wlc or sed`},
		{"bad seeds", []string{"-dir", recorded, "-seeds", "x"}, cmdline.ExitUsage, `-seeds "x"`},
		{"no workers", []string{"-dir", recorded, "-workers", "0"}, cmdline.ExitUsage, "-workers 0: want 1 or more"},
		{"no requests", []string{"-dir", recorded, "-max-requests", "0"}, cmdline.ExitUsage, "-max-requests 0: want 1 or more"},
		{"too many requests", []string{"-dir", recorded, "-until", "last", "-max-requests", "1e5"}, exitFailed,
			"192.0.2.10:80/tcp: too much traffic to replay: the window is about 1.08e+05 requests to simulate per run (720 connections/s over 2m30s, up to ×1), more than 1e+05: replay a shorter window"},
		{"an argument", []string{"-dir", recorded, "extra"}, cmdline.ExitUsage, `unexpected argument "extra"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(append([]string{"benefit"}, tt.args...), &stdout, &stderr)
			if got := exitCode(err); got != tt.status {
				t.Errorf("exit status %d (%v), want %d", got, err, tt.status)
			}
			msg := stderr.String()
			if err != nil {
				msg += err.Error()
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want it to contain %q", msg, tt.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("printed %q on stdout", stdout.String())
			}
		})
	}
}
