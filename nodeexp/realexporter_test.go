package nodeexp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// recommendedFlags are the node_exporter flags docs/node-exporter.md
// recommends for a server polled by lvs-monitor: only the collectors the
// loads come from, and none of the exporter's own Go metrics.
var recommendedFlags = []string{
	"--collector.disable-defaults",
	"--collector.cpu", "--collector.meminfo", "--collector.stat",
	"--collector.diskstats", "--collector.filesystem",
	"--collector.loadavg", "--collector.pressure",
	"--web.disable-exporter-metrics",
}

// exporterBinary finds Debian's prometheus-node-exporter (or an upstream
// node_exporter), or skips: it is installed by .ci/run.
func exporterBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"prometheus-node-exporter", "node_exporter"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("node_exporter not installed: apt-get install -y --no-install-recommends prometheus-node-exporter (.ci/run does)")
	return ""
}

// startExporter runs node_exporter on a free loopback port with flags and
// returns its metrics URL and process, stopped when the test ends. It is
// never the system's service: its own process, its own port.
func startExporter(t *testing.T, flags ...string) (string, *os.Process) {
	t.Helper()
	bin := exporterBinary(t)
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(bin, append([]string{"--web.listen-address=" + addr}, flags...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		url := "http://" + addr + "/metrics"
		// Up to 100 tries, 100 ms apart: a loaded machine starts it slowly.
		for range 100 {
			select {
			case err := <-exited:
				if attempt < 3 && strings.Contains(stderr.String(), "address already in use") {
					goto retry // the port was taken between Close and its bind
				}
				t.Fatalf("node_exporter exited: %v\n%s", err, stderr.String())
			default:
			}
			if resp, err := http.Get(url); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return url, cmd.Process
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("node_exporter did not answer on %s\n%s", url, stderr.String())
	retry:
	}
}

// startHogs starts n shell busy loops, killed when the test ends.
func startHogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// hostCPU reads the first line of /proc/stat: busy and idle seconds
// summed over all CPUs, split as lvs-agent and Derive split them.
func hostCPU(t *testing.T) (busy, idle float64) {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) // cpu user nice system idle iowait irq softirq steal …
	for i := 1; i <= 8 && i < len(f); i++ {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			t.Fatalf("/proc/stat: %q", f)
		}
		if i == 4 || i == 5 {
			idle += v
		} else {
			busy += v
		}
	}
	return busy, idle
}

// The real node_exporter, scraped over loopback: the first poll measures
// nothing; every later poll's CPU figure matches the busy share the test
// reads from /proc/stat itself over the same polls (within 0.1: the two
// windows are a few milliseconds apart); with a busy loop on every CPU
// the figure rises to (nearly) all CPUs busy and the runnable tasks
// include the loops. Counted in polls, 1 s apart. Thresholds hold on a
// shared machine: every CPU with a runnable busy loop has no idle time at
// all. When the machine is already saturated by others before the loops
// start (idle reading above 0.7), a rise cannot be shown; the test then
// says so and checks the rest.
func TestRealNodeExporterSeesCPUHog(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts node_exporter and burns every CPU for a few seconds")
	}
	url, _ := startExporter(t, recommendedFlags...)
	c := NewClient()
	var base Snapshot
	var lastBusy, lastIdle float64
	poll := func() (float64, int, error) {
		time.Sleep(time.Second)
		r, err := c.Poll(context.Background(), url, 10*time.Second, time.Minute, &base)
		busy, idle := hostCPU(t)
		if err == nil {
			if own := (busy - lastBusy) / (busy - lastBusy + idle - lastIdle); math.Abs(own-r.CPU) > 0.1 {
				t.Errorf("node_exporter's figure %.3f, /proc/stat over the same poll %.3f", r.CPU, own)
			}
		}
		lastBusy, lastIdle = busy, idle
		return r.CPU, r.Raw.RunnableTasks, err
	}
	if _, _, err := poll(); !errors.Is(err, ErrNoBaseline) {
		t.Fatalf("first poll: %v, want ErrNoBaseline", err)
	}
	idle := 1.0
	for range 3 {
		cpu, _, err := poll()
		if err != nil {
			t.Fatal(err)
		}
		idle = min(idle, cpu)
	}
	hogs := runtime.NumCPU()
	startHogs(t, hogs)
	want := min(idle+0.25, 0.95)
	var seen []string
	for i := range 10 {
		cpu, runnable, err := poll()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, fmt.Sprintf("%.3f/%d", cpu, runnable))
		// The first poll may straddle the loops' start.
		if i > 0 && cpu >= want && runnable >= hogs {
			t.Logf("idle reading %.3f; with %d busy loops, polls (cpu/runnable): %v", idle, hogs, seen)
			if idle > 0.7 {
				t.Logf("the machine was already busy before the loops started: no rise to show, only that the figure reads saturation")
			}
			return
		}
	}
	t.Fatalf("idle reading %.3f; with %d busy loops the polls read (cpu/runnable) %v, want cpu ≥ %.3f and runnable ≥ %d", idle, hogs, seen, want, hogs)
}

// cpuTicks is a process's user+system CPU time in clock ticks, from
// /proc/PID/stat.
func cpuTicks(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces), from field 3.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return utime + stime
}

// scrapeCost GETs url n times in a row and returns the reply size and the
// serving process's CPU milliseconds per request (ticks of 10 ms, so n
// should be a thousand or so).
func scrapeCost(t *testing.T, url string, pid, n int) (size int, msPerRequest float64) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	before := cpuTicks(t, pid)
	for range n {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %d", url, err, resp.StatusCode)
		}
		size = len(b)
	}
	ticks := cpuTicks(t, pid) - before
	return size, ticks * 10 / float64(n) // USER_HZ is 100 on Linux
}

// TestMeasureScrapeCost prints the table in docs/node-exporter.md: reply
// size and CPU per request of node_exporter with its default collectors,
// with the recommended ones, and of lvs-agent (built from this tree). Run
// it on purpose:
//
//	NODEEXP_MEASURE=1 go test -count=1 -run TestMeasureScrapeCost -v ./nodeexp/
func TestMeasureScrapeCost(t *testing.T) {
	if os.Getenv("NODEEXP_MEASURE") == "" {
		t.Skip("a measurement, not a test: NODEEXP_MEASURE=1 to run it")
	}
	const n = 1000 // ticks are 10 ms: lvs-agent needs this many to count a few
	def, defProc := startExporter(t)
	rec, recProc := startExporter(t, recommendedFlags...)
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", dir, "../cmd/lvs-agent").CombinedOutput(); err != nil {
		t.Fatalf("build lvs-agent: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	agentAddr := ln.Addr().String()
	ln.Close()
	agentCmd := exec.Command(filepath.Join(dir, "lvs-agent"), "-listen", agentAddr)
	if err := agentCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agentCmd.Process.Kill(); _ = agentCmd.Wait() })
	agentURL := "http://" + agentAddr + "/v1/load"
	for range 100 { // until its first sample is served
		if resp, err := http.Get(agentURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, row := range []struct {
		name string
		url  string
		pid  int
	}{
		{"node_exporter, default collectors", def, defProc.Pid},
		{"node_exporter, recommended flags", rec, recProc.Pid},
		{"lvs-agent /v1/load", agentURL, agentCmd.Process.Pid},
	} {
		size, ms := scrapeCost(t, row.url, row.pid, n)
		t.Logf("| %s | %d B | %.2f ms |", row.name, size, ms)
	}
}
