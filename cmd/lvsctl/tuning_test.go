package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/control/controltest"
)

// The worked example of docs/tuning.md is real lvsctl explain output: this
// test produces it and checks that the guide shows it verbatim. After a
// change of the output, regenerate the blocks with
//
//	UPDATE_DOCS=1 go test ./cmd/lvsctl -run TestTuningGuideExample
func TestTuningGuideExample(t *testing.T) {
	ioCoefficients := strings.NewReplacer(
		"cpu      = 0.3", "cpu      = 0.1",
		"disk     = 0.1", "disk     = 0.4",
		"process  = 0.1", "process  = 0.0",
	).Replace(controltest.Config)
	blocks := map[string]string{}
	for name, config := range map[string]string{"web": controltest.Config, "io": ioCoefficients} {
		r := controltest.New(t, config)
		// A: a backup job saturates its data disk; CPU is mostly idle.
		const gib = 1 << 30
		r.Agents.SetReport(controltest.A, agent.Report{
			Schema: agent.SchemaVersion, Time: time.Now(), Source: "host",
			CPU: 0.35, Memory: 0.6, Disk: 1, Processes: 0.5,
			Raw: agent.Raw{
				WindowSeconds: 1, CPUs: 4, CPUBusy: 0.35,
				MemTotalBytes: 16 * gib, MemAvailableBytes: 16 * gib * 4 / 10,
				DiskSpaceUsed: map[string]float64{"/": 0.42, "/var/lib/postgresql": 0.61},
				DiskIOBusy:    1, DiskIODevice: "sdb",
				RunnableTasks: 2,
			},
		})
		r.Prober.Set(controltest.A, 130*time.Millisecond)
		r.Cycle() // the first: the controller starts from the kernel weight, 10
		code, out, _ := lvsctlIn(t, r, time.UTC, "explain", svc, rsA)
		if code != 0 {
			t.Fatalf("explain: exit %d", code)
		}
		blocks[name] = "$ lvsctl explain " + svc + " " + rsA + "\n" + out
	}

	const path = "../../docs/tuning.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for name, out := range blocks {
		re := regexp.MustCompile("(?s)(<!-- explain:" + name + " -->\n```\n).*?(```\n)")
		if !re.MatchString(text) {
			t.Fatalf("%s has no <!-- explain:%s --> block", path, name)
		}
		want := "<!-- explain:" + name + " -->\n```\n" + out + "```\n"
		if os.Getenv("UPDATE_DOCS") != "" {
			text = re.ReplaceAllLiteralString(text, want)
			continue
		}
		if !strings.Contains(text, want) {
			t.Errorf("%s: the explain:%s block is not what lvsctl prints now (UPDATE_DOCS=1 regenerates it):\n%s", path, name, out)
		}
	}
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
