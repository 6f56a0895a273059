package nodeexp

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// base is a 2-CPU server; later returns it 5 s of CPU time per CPU later:
// cpu0 3.5 s busy (user 3, system 0.5) and 1.5 s idle (idle 1, iowait
// 0.5), cpu1 1 s busy and 4 s idle — 4.5 of 10 CPU-seconds busy; sda
// 2 s of I/O, sdb 0.5 s, loop0 5 s (not a disk); 3 s more of CPU
// pressure.
func base() Snapshot {
	return Snapshot{
		Target: "http://192.0.2.1:9100/metrics", At: t0,
		CPU: map[string]map[string]float64{
			"0": {"idle": 100, "iowait": 10, "user": 50, "system": 20, "steal": 0},
			"1": {"idle": 120, "iowait": 0, "user": 30, "system": 10, "steal": 0},
		},
		MemTotal: 8e9, MemAvailable: 6e9, ProcsRunning: 4, BootTime: 1.7e9,
		DiskIOTime:  map[string]float64{"sda": 40, "sdb": 10, "loop0": 0},
		Filesystems: map[string]Filesystem{"/": {Size: 100e9, Free: 80e9, Avail: 75e9}},
		Load:        &[3]float64{1.5, 1.2, 1},
		Pressure:    map[string]float64{"cpu": 10, "io": 2},
	}
}

func later(s Snapshot) Snapshot {
	n := s
	n.At = s.At.Add(5 * time.Second)
	n.CPU = map[string]map[string]float64{
		"0": {"idle": 101, "iowait": 10.5, "user": 53, "system": 20.5, "steal": 0},
		"1": {"idle": 124, "iowait": 0, "user": 30.5, "system": 10.5, "steal": 0},
	}
	n.DiskIOTime = map[string]float64{"sda": 42, "sdb": 10.5, "loop0": 5}
	n.Pressure = map[string]float64{"cpu": 13, "io": 2}
	return n
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestDeriveHandComputed(t *testing.T) {
	type want struct {
		cpu, mem, disk, proc float64
		device               string
		runnable             int
	}
	cases := []struct {
		name   string
		change func(prev, cur *Snapshot)
		want   want
	}{
		// CPU 4.5/10; memory 1 − 6/8; disk: sda 2 s of 5 (df: 20/95 =
		// 0.21 less); processes (4 − 1)/2.
		{"two CPUs", nil, want{0.45, 0.25, 0.4, 1.5, "sda", 3}},
		// 70 GB used, 25 GB available: 70/95 beats sda's 0.4.
		{"full filesystem", func(_, c *Snapshot) {
			c.Filesystems = map[string]Filesystem{"/": {Size: 100e9, Free: 30e9, Avail: 25e9}}
		}, want{0.45, 0.25, 70.0 / 95, 1.5, "sda", 3}},
		// iowait stepping back by 0.2 counts 0: cpu0 idle 1 s, busy 3.5.
		{"iowait steps back", func(_, c *Snapshot) { c.CPU["0"]["iowait"] = 9.8 }, want{4.5 / 9.5, 0.25, 2 / 4.75, 1.5, "sda", 3}},
		// steal is busy: +0.5 s on cpu1 (total 10.5 CPU-seconds, 5 busy).
		{"steal is busy", func(_, c *Snapshot) { c.CPU["1"]["steal"] = 0.5 }, want{5 / 10.5, 0.25, 2 / 5.25, 1.5, "sda", 3}},
		// sda's counter went back (replaced): sdb's 0.5/5.
		{"disk counter back", func(p, _ *Snapshot) { p.DiskIOTime["sda"] = 50 }, want{0.45, 0.25, 0.21052631578947367, 1.5, "sdb", 3}},
		// a device that was not there before is skipped.
		{"new device", func(_, c *Snapshot) { c.DiskIOTime["sdc"] = 99 }, want{0.45, 0.25, 0.4, 1.5, "sda", 3}},
		// 7 s of I/O in 5 s (queue accounting): capped at 1.
		{"io capped", func(_, c *Snapshot) { c.DiskIOTime["sda"] = 47 }, want{0.45, 0.25, 1, 1.5, "sda", 3}},
		{"more available than total", func(_, c *Snapshot) { c.MemAvailable = 9e9 }, want{0.45, 0, 0.4, 1.5, "sda", 3}},
		{"no runnable task", func(_, c *Snapshot) { c.ProcsRunning = 0 }, want{0.45, 0.25, 0.4, 0, "sda", 0}},
		{"boot time jitter", func(_, c *Snapshot) { c.BootTime += 1 }, want{0.45, 0.25, 0.4, 1.5, "sda", 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev := base()
			cur := later(base())
			if tc.change != nil {
				tc.change(&prev, &cur)
			}
			r, err := Derive(prev, cur, 15*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got := want{r.CPU, r.Memory, r.Disk, r.Processes, r.Raw.DiskIODevice, r.Raw.RunnableTasks}
			if !near(got.cpu, tc.want.cpu) || !near(got.mem, tc.want.mem) || !near(got.disk, tc.want.disk) ||
				!near(got.proc, tc.want.proc) || got.device != tc.want.device || got.runnable != tc.want.runnable {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDeriveRaw(t *testing.T) {
	r, err := Derive(base(), later(base()), 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != SourceName || r.Schema != 1 || !r.Time.Equal(t0.Add(5*time.Second)) {
		t.Errorf("source %q schema %d time %v", r.Source, r.Schema, r.Time)
	}
	if r.CPUTime != nil {
		t.Errorf("CPUTime %+v, want none: the CPU figure already covers the poll interval", r.CPUTime)
	}
	x := r.Raw
	if x.CPUs != 2 || x.WindowSeconds != 5 || x.MemTotalBytes != 8e9 || x.MemAvailableBytes != 6e9 ||
		x.Load1 != 1.5 || x.Load15 != 1 || !near(x.DiskSpaceUsed["/"], 20.0/95) {
		t.Errorf("raw %+v", x)
	}
	// 3 s of CPU pressure in 5 s: 60 %; io unchanged: 0 %; memory not exposed.
	if x.PSICPUSome10 == nil || !near(*x.PSICPUSome10, 60) || x.PSIIOSome10 == nil || *x.PSIIOSome10 != 0 || x.PSIMemorySome10 != nil {
		t.Errorf("PSI cpu %v io %v memory %v", x.PSICPUSome10, x.PSIIOSome10, x.PSIMemorySome10)
	}
}

// A scrape that cannot be compared with the one before measures nothing:
// an error wrapping ErrNoBaseline, never a zero.
func TestDeriveNoBaseline(t *testing.T) {
	cases := []struct {
		name   string
		change func(prev, cur *Snapshot)
		msg    string
	}{
		{"first scrape", func(p, _ *Snapshot) { *p = Snapshot{} }, "first scrape"},
		{"another target", func(p, _ *Snapshot) { p.Target = "http://192.0.2.2:9100/metrics" }, "first scrape of http://192.0.2.1:9100/metrics"},
		{"too old", func(p, _ *Snapshot) { p.At = p.At.Add(-11 * time.Second) }, "previous scrape 16s old, more than 15s"},
		{"same time", func(p, c *Snapshot) { c.At = p.At }, "not later"},
		{"rebooted: boot time", func(_, c *Snapshot) { c.BootTime += 30 }, "server rebooted"},
		{"rebooted: counters back", func(_, c *Snapshot) {
			c.CPU["1"] = map[string]float64{"idle": 3, "iowait": 0, "user": 1, "system": 1}
		}, `cpu "1" time went back`},
		{"CPU added", func(_, c *Snapshot) { c.CPU["2"] = map[string]float64{"idle": 1} }, "CPUs changed from 2 to 3"},
		{"CPU replaced", func(_, c *Snapshot) { c.CPU["7"] = c.CPU["1"]; delete(c.CPU, "1") }, "CPUs changed from 2 to 2"},
		{"no CPU time passed", func(p, c *Snapshot) { c.CPU = p.CPU }, "no CPU time passed"},
		{"overflow", func(_, c *Snapshot) { c.CPU["0"]["user"], c.CPU["1"]["user"] = math.MaxFloat64, math.MaxFloat64 }, "overflow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev, cur := base(), later(base())
			tc.change(&prev, &cur)
			r, err := Derive(prev, cur, 15*time.Second)
			if !errors.Is(err, ErrNoBaseline) {
				t.Fatalf("got %+v, %v; want ErrNoBaseline", r, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}
