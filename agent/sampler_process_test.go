package agent

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestTreeCPUSeconds(t *testing.T) {
	a, b, c := procKey{10, 500}, procKey{11, 900}, procKey{12, 100250}
	prev := treeCounters{uptime: 1000, ticks: map[procKey]uint64{a: 1000, b: 300}}
	tests := []struct {
		name string
		cur  map[procKey]uint64
		want float64
	}{
		{"deltas", map[procKey]uint64{a: 1100, b: 350}, 1.5},
		// c started at 1002.5 s, after prev (1000 s): all its 40 ticks count.
		{"new child counted whole", map[procKey]uint64{a: 1100, c: 40}, 1.4},
		// A process that was already running but not seen before (started
		// at 5 s): its history is not this window's work.
		{"old stranger not counted", map[procKey]uint64{a: 1100, {13, 500}: 7000}, 1},
		// PID 10 reused by a new process (other start time) that started
		// after prev: its own ticks only.
		{"pid reused", map[procKey]uint64{{10, 100100}: 20}, 0.2},
		{"counter back", map[procKey]uint64{a: 900}, 0},
		{"exited", map[procKey]uint64{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near(t, "cpu seconds", treeCPUSeconds(prev, treeCounters{uptime: 1003, ticks: tt.cur}), tt.want)
		})
	}
}

func TestProcessReport(t *testing.T) {
	h0 := hostCounters{at: fixtureT0, cpus: 4, memTotal: 1000}
	h1 := hostCounters{at: fixtureT0.Add(500 * time.Millisecond), cpus: 4, memTotal: 1000, memAvailable: 400}
	k := procKey{7, 1}
	prev := treeCounters{pid: 7, ticks: map[procKey]uint64{k: 100}}
	cur := treeCounters{pid: 7, ticks: map[procKey]uint64{k: 300}, rssBytes: 250, runnable: 6}
	rep, err := processReport("process:7", h0, h1, prev, cur)
	if err != nil {
		t.Fatal(err)
	}
	// 200 ticks = 2 s of CPU in 0.5 s on 4 CPUs = 1 (all CPUs busy).
	near(t, "cpu", rep.CPU, 1)
	near(t, "memory", rep.Memory, 0.25)
	near(t, "processes", rep.Processes, 1.5)
	if rep.Raw.PID != 7 || rep.Source != "process:7" || rep.Raw.RunnableTasks != 6 {
		t.Errorf("raw %+v", rep.Raw)
	}
	// More CPU than the window allows (tick rounding, or a wrong clock)
	// is > 1, not an error; it is capped at MaxLoad.
	cur.ticks[k] = 100 + 1e6
	if rep, err = processReport("process:7", h0, h1, prev, cur); err != nil || rep.CPU != MaxLoad {
		t.Errorf("cpu %v err %v, want %v", rep.CPU, err, MaxLoad)
	}
	if _, err := processReport("process:7", h0, h0, prev, cur); err == nil {
		t.Error("zero window accepted")
	}
}

func TestProcessFixture(t *testing.T) {
	rep := readFixture(t, func(o Options) (*ProcessSource, error) { return NewProcessSource(4242, o) },
		func(s *ProcessSource) *hostReader { return s.host })
	checkHostShared(t, rep)
	if rep.Source != "process:4242" || rep.Raw.PID != 4242 {
		t.Errorf("source %q pid %d", rep.Source, rep.Raw.PID)
	}
	// 4242: +100 ticks, child 4250: +60, grandchild 4260 (new, started
	// after t0): 40. 200 ticks = 2 s over 2 s on 2 CPUs.
	near(t, "cpu", rep.CPU, 0.5)
	// RSS 1000+500+500 pages of 8000000 kB.
	near(t, "memory", rep.Memory, float64(2000*os.Getpagesize())/(8000000*1024))
	// Threads in R: 4243, 4250, 4260 on 2 CPUs.
	if rep.Raw.RunnableTasks != 3 {
		t.Errorf("runnable = %d, want 3", rep.Raw.RunnableTasks)
	}
	near(t, "processes", rep.Processes, 1.5)
}

func TestProcessFixtureGone(t *testing.T) {
	for _, pid := range []int{4300 /* zombie */, 999 /* absent */} {
		if _, err := NewProcessSource(pid, fixtureOptions("t0")); err == nil {
			t.Errorf("NewProcessSource(%d) accepted a dead process", pid)
		}
	}
	// 4260 exists at t1 only: follow it there, then "it exits" (t0).
	src, err := NewProcessSource(4260, fixtureOptions("t1"))
	if err != nil {
		t.Fatal(err)
	}
	fixHost(src.host, fixtureT0)
	if _, err := src.Read(); err != nil {
		t.Fatal(err)
	}
	src.tree.proc = mustFixtureFS(t, "t0")
	if _, err := src.Read(); !errors.Is(err, errExited) {
		t.Errorf("read of exited process: %v, want errExited", err)
	}
}

func TestPidfile(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(dir, "server.pid")
	src, err := NewPidfileSource(pf, fixtureOptions("t0"))
	if err != nil {
		t.Fatal(err)
	}
	fixHost(src.host, fixtureT0)
	if _, err := src.Read(); err == nil {
		t.Error("missing pidfile: no error")
	}
	for _, bad := range []string{"", "abc", "-4", "0", "4242 4250"} {
		os.WriteFile(pf, []byte(bad), 0o644)
		if _, err := src.Read(); err == nil {
			t.Errorf("pidfile %q accepted", bad)
		}
	}
	os.WriteFile(pf, []byte("4242\n"), 0o644)
	r, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := r.(processReading).tree.pid; got != 4242 {
		t.Errorf("pid %d", got)
	}
	if src.Name() != "pidfile:"+pf {
		t.Errorf("name %q", src.Name())
	}
}

// TestProcessRealExit follows a real child process, then kills it: the
// source must report an error, as a zombie and once reaped.
func TestProcessRealExit(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot run sleep:", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	src, err := NewProcessSource(cmd.Process.Pid, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r0, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	r1, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r1.Report(r0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.CPU > 0.2 || rep.Memory <= 0 || rep.Memory > 0.1 || rep.Raw.PID != cmd.Process.Pid {
		t.Errorf("sleeping process: %+v", rep)
	}
	cmd.Process.Kill()
	// Not yet reaped: a zombie.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := src.Read()
		if errors.Is(err, errExited) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombie still sampled: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Wait()
	if _, err := src.Read(); !errors.Is(err, errExited) {
		t.Errorf("reaped process: %v, want errExited", err)
	}
}

// TestProcessRealBusy samples this test process while a goroutine spins.
func TestProcessRealBusy(t *testing.T) {
	src, err := NewProcessSource(os.Getpid(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // one busy goroutine
		defer close(done)
		for !stop.Load() {
		}
	}()
	defer func() { stop.Store(true); <-done }()
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	r0, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	r1, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	rep, err := r1.Report(r0)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's own account of this process's CPU time over (about) the
	// same window, whatever share of the machine the spinner got.
	used := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	want := used.Seconds() / (rep.Raw.WindowSeconds * rep.Raw.CPUs)
	t.Logf("cpu %.3f, rusage says %.3f (%v in %.3fs on %v CPUs)", rep.CPU, want, used, rep.Raw.WindowSeconds, rep.Raw.CPUs)
	// rusage brackets the two reads, /proc ticks are 10 ms: allow for both.
	if tol := 0.05 + 0.15*want; rep.CPU <= 0 || math.Abs(rep.CPU-want) > tol {
		t.Errorf("cpu = %v, want %v ± %v", rep.CPU, want, tol)
	}
	if rep.Source != "process:"+strconv.Itoa(os.Getpid()) {
		t.Errorf("source %q", rep.Source)
	}
}
