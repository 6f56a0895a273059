package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pollCostIdle is the window, between warm-up and the polls, in which
// every process only runs its own background work: lvs-agent samples its
// host every second, node_exporter does nothing until scraped.
const pollCostIdle = 30 * time.Second

// pollCostInterval is lvs-monitor's default interval: one poll of each
// server every 5 s, so one poll carries 5 s of the agent's sampling.
const pollCostInterval = 5 * time.Second

// pollCostSpaced is how many polls of each process, pollCostInterval
// apart, measure the CPU of a poll as lvs-monitor makes them.
const pollCostSpaced = 12

// clockTicks is USER_HZ, the unit of /proc/PID/stat's utime and stime:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// polled is one server process under measurement.
type polled struct {
	name   string
	url    string
	accept string
	cmd    *exec.Cmd
	stderr strings.Builder
}

// exporterFor finds Debian's prometheus-node-exporter (or an upstream
// node_exporter), or skips.
func exporterFor(b *testing.B) string {
	b.Helper()
	for _, name := range []string{"prometheus-node-exporter", "node_exporter"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	b.Skip("node_exporter not installed: apt-get install -y --no-install-recommends prometheus-node-exporter")
	return ""
}

// BenchmarkPollCost runs lvs-agent (built from this package; host source)
// and node_exporter side by side on loopback and polls each
// b.N times, in turn, on a new connection per poll with the transport
// lvs-monitor uses (no keep-alive, no compression; the text format from
// node_exporter, as nodeexp asks for it). node_exporter runs twice: with
// the collectors the agent's report covers in its four loads (cpu,
// meminfo, diskstats, loadavg) and with the set docs/node-exporter.md
// recommends (those, stat, filesystem and pressure: everything the agent
// also reads), both without the exporter's own Go metrics. The agent runs
// twice too: with its defaults, reading when polled ("agent"), and
// reading every second whether polled or not ("agent-every1s": -sample
// interval). With LVS_AGENT_OLD set to another lvs-agent binary, that one
// runs as well with its defaults ("agent-old"), to compare builds side by
// side.
//
// For each process, from /proc/PID/stat (utime+stime): poll-us, the CPU
// per poll over the polls (background work during them included);
// idle-us/s, the CPU per second over a 30 s window without polls before
// them; and, since ticks are 10 ms, idle-sched-us/s, the same from the
// threads' /proc/PID/task/TID/schedstat (nanoseconds). at5s-us is the CPU
// one poll costs when lvs-monitor polls every 5 s (its default):
// poll-us + 5 × idle-sched-us/s. poll5s-us is measured: the CPU (schedstat)
// over pollCostSpaced polls of each, 5 s apart as lvs-monitor polls,
// everything between them included, per poll. VmHWM-MB is the peak RSS.
// Run with a fixed count, e.g. -benchtime 2000x: every run starts the
// processes anew, waits 30 s, and polls 5 s apart for 60 s after the
// polls. docs/developer/scale.md ("The agent") has the figures.
func BenchmarkPollCost(b *testing.B) {
	exporter := exporterFor(b)
	agentBin := buildAgent(b, b.TempDir())
	neFlags := []string{"--collector.disable-defaults", "--web.disable-exporter-metrics"}
	ne4 := []string{"--collector.cpu", "--collector.meminfo", "--collector.diskstats", "--collector.loadavg"}
	ne7 := append(ne4[:len(ne4):len(ne4)], "--collector.stat", "--collector.filesystem", "--collector.pressure")
	procs := []*polled{
		{name: "agent", accept: "application/json"},
		{name: "agent-every1s", accept: "application/json"},
		{name: "ne4", accept: "text/plain;version=0.0.4"},
		{name: "ne7", accept: "text/plain;version=0.0.4"},
	}
	oldAgent := os.Getenv("LVS_AGENT_OLD")
	if oldAgent != "" {
		procs = append(procs, &polled{name: "agent-old", accept: "application/json"})
	}
	for _, p := range procs {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
		switch p.name {
		case "agent", "agent-every1s", "agent-old":
			p.url = "http://" + addr + "/v1/load"
			switch p.name {
			case "agent":
				p.cmd = exec.Command(agentBin, "-listen", addr)
			case "agent-every1s":
				p.cmd = exec.Command(agentBin, "-listen", addr, "-sample", "interval", "-interval", "1s")
			default:
				p.cmd = exec.Command(oldAgent, "-listen", addr)
			}
		case "ne4", "ne7":
			flags := ne4
			if p.name == "ne7" {
				flags = ne7
			}
			p.url = "http://" + addr + "/metrics"
			p.cmd = exec.Command(exporter, append(append([]string{"--web.listen-address=" + addr}, flags...), neFlags...)...)
		}
		p.cmd.Stderr = &p.stderr
		if err := p.cmd.Start(); err != nil {
			b.Fatalf("start %s: %v", p.name, err)
		}
		b.Cleanup(func() {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		})
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}}
	// Ready: each answers 200 (the agent after its first window); up to
	// 300 tries 100 ms apart on a loaded machine.
	for _, p := range procs {
		for try := 0; ; try++ {
			if poll(client, p) == nil {
				break
			}
			if try == 300 {
				b.Fatalf("%s does not answer on %s: %v\n%s", p.name, p.url, poll(client, p), p.stderr.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		for range 20 { // warm-up: first-use allocations are not steady cost
			if err := poll(client, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	type reading struct{ ticks, schedNs int64 }
	read := func() []reading {
		out := make([]reading, len(procs))
		for i, p := range procs {
			t, err := cpuTicks(p.cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			s, err := schedNs(p.cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			out[i] = reading{t, s}
		}
		return out
	}
	idle0 := read()
	time.Sleep(pollCostIdle)
	idle1 := read()
	n := 0
	for b.Loop() {
		for k := range procs {
			p := procs[(n+k)%len(procs)] // each goes first in turn
			if err := poll(client, p); err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
	polls1 := read()
	b.StopTimer()
	// As lvs-monitor polls: each once every 5 s.
	for range pollCostSpaced {
		time.Sleep(pollCostInterval)
		for _, p := range procs {
			if err := poll(client, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	spaced1 := read()
	for i, p := range procs {
		pollUs := float64(polls1[i].ticks-idle1[i].ticks) * 1e6 / clockTicks / float64(n)
		idleUs := float64(idle1[i].ticks-idle0[i].ticks) * 1e6 / clockTicks / pollCostIdle.Seconds()
		idleSchedUs := float64(idle1[i].schedNs-idle0[i].schedNs) / 1e3 / pollCostIdle.Seconds()
		hwm, err := vmHWM(p.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(pollUs, p.name+"-poll-us")
		b.ReportMetric(idleUs, p.name+"-idle-us/s")
		b.ReportMetric(idleSchedUs, p.name+"-idle-sched-us/s")
		b.ReportMetric(pollUs+pollCostInterval.Seconds()*idleSchedUs, p.name+"-at5s-us")
		b.ReportMetric(float64(spaced1[i].schedNs-polls1[i].schedNs)/1e3/pollCostSpaced, p.name+"-poll5s-us")
		b.ReportMetric(float64(hwm)/1024, p.name+"-VmHWM-MB")
	}
}

// poll GETs p's URL on a new connection and reads the whole reply.
func poll(client *http.Client, p *polled) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", p.accept)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("poll %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return fmt.Errorf("poll %s: %w", p.name, err)
	}
	if resp.StatusCode != http.StatusOK || n == 0 {
		return fmt.Errorf("poll %s: status %d, %d bytes", p.name, resp.StatusCode, n)
	}
	return nil
}

// cpuTicks is utime + stime of pid from /proc/PID/stat, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	// comm, in parentheses, may hold blanks: fields count from its end.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after comm", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of stat
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return ut + st, nil
}

// schedNs sums the time on CPU of pid's threads from their schedstat, in
// nanoseconds (threads that exited are missing: Go's runtime keeps them).
func schedNs(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no /proc/%d/task/*/schedstat: %v", pid, err)
	}
	var sum int64
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited since the listing
		}
		f := strings.Fields(string(raw))
		if len(f) == 0 {
			return 0, fmt.Errorf("%s: empty", t)
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		sum += v
	}
	return sum, nil
}

// vmHWM is pid's peak resident set size from /proc/PID/status, in kB.
func vmHWM(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}
