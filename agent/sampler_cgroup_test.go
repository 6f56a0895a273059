package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseCPUMax(t *testing.T) {
	for in, want := range map[string]float64{
		"max 100000\n":    0,
		"max":             0,
		"150000 100000\n": 1.5,
		"50000 100000":    0.5,
		"200000":          2, // period defaults to 100000
	} {
		got, err := parseCPUMax(in)
		if err != nil {
			t.Errorf("parseCPUMax(%q): %v", in, err)
		}
		near(t, in, got, want)
	}
	for _, bad := range []string{"", "x 100000", "100 0", "1 2 3", "-5 100000"} {
		if _, err := parseCPUMax(bad); err == nil {
			t.Errorf("parseCPUMax(%q) accepted", bad)
		}
	}
}

func TestParseMemoryMax(t *testing.T) {
	for in, want := range map[string]uint64{"max\n": 0, "1073741824\n": 1 << 30} {
		if got, err := parseMemoryMax(in); err != nil || got != want {
			t.Errorf("parseMemoryMax(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := parseMemoryMax("lots"); err == nil {
		t.Error("parseMemoryMax(lots) accepted")
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0-3\n": 4, "0": 1, "0-1,4,6-7": 5, "": 0, "\n": 0} {
		if got, err := countCPUList(in); err != nil || got != want {
			t.Errorf("countCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"3-1", "a", "0-", "-1"} {
		if _, err := countCPUList(bad); err == nil {
			t.Errorf("countCPUList(%q) accepted", bad)
		}
	}
}

func TestParsePSISome10(t *testing.T) {
	v, err := parsePSISome10([]byte("some avg10=12.50 avg60=1 avg300=0 total=5\nfull avg10=3.00 avg60=0 avg300=0 total=1\n"))
	if err != nil || v == nil || *v != 12.5 {
		t.Errorf("got %v, %v", v, err)
	}
	if v, err := parsePSISome10([]byte("full avg10=3.00\n")); v != nil || err != nil {
		t.Errorf("no some line: %v, %v", v, err)
	}
	for _, bad := range []string{"some avg10=NaN", "some avg10=-1", "some total=5"} {
		if _, err := parsePSISome10([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if v, err := readPSIFile("testdata/none/cpu.pressure"); v != nil || err != nil {
		t.Errorf("absent file: %v, %v", v, err)
	}
}

func TestCgroupCPUs(t *testing.T) {
	for _, tt := range []struct {
		host   int
		quota  float64
		cpuset int
		want   float64
	}{
		{8, 0, 0, 8},     // no limits: the host
		{8, 2.5, 0, 2.5}, // quota
		{8, 0, 4, 4},     // cpuset
		{8, 6, 4, 4},     // the tighter of both
		{8, 1.5, 4, 1.5},
		{2, 16, 0, 2}, // a quota above the host is the host
	} {
		near(t, "cgroupCPUs", cgroupCPUs(tt.host, tt.quota, tt.cpuset), tt.want)
	}
}

func TestCgroupReport(t *testing.T) {
	h0 := hostCounters{at: fixtureT0, cpus: 4, memTotal: 4000}
	h1 := hostCounters{at: fixtureT0.Add(time.Second), cpus: 4, memTotal: 4000}
	prev := cgroupCounters{usageUsec: 1_000_000}
	tests := []struct {
		name                  string
		cur                   cgroupCounters
		cpu, mem, procs, cpus float64
		memTotal, memAvail    uint64
		wantErr               bool
	}{
		// 2 CPU-seconds in 1 s on 4 host CPUs; memory against host total.
		{"unlimited", cgroupCounters{usageUsec: 3_000_000, memCurrent: 1000, runnable: 2}, 0.5, 0.25, 0.5, 4, 4000, 3000, false},
		// Quota 1 CPU: 0.5 CPU-s in 1 s = 0.5. Limit 2000, working set
		// 1500 − 500 inactive file = 1000.
		{"limited", cgroupCounters{usageUsec: 1_500_000, quotaCPUs: 1, memCurrent: 1500, inactiveFile: 500, memLimit: 2000, runnable: 3}, 0.5, 0.5, 3, 1, 2000, 1000, false},
		// A limit above host RAM is host RAM.
		{"limit above RAM", cgroupCounters{usageUsec: 1_000_000, memCurrent: 2000, memLimit: 1 << 40}, 0, 0.5, 0, 4, 4000, 2000, false},
		// Over the limit (reclaim lags): > 1, available 0.
		{"over limit", cgroupCounters{usageUsec: 1_000_000, memCurrent: 3000, memLimit: 2000}, 0, 1.5, 0, 4, 2000, 0, false},
		{"inactive above current", cgroupCounters{usageUsec: 1_000_000, memCurrent: 100, inactiveFile: 200}, 0, 0, 0, 4, 4000, 4000, false},
		{"counter back", cgroupCounters{usageUsec: 10}, 0, 0, 0, 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := cgroupReport("cgroup:/x", h0, h1, prev, tt.cur)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			near(t, "cpu", rep.CPU, tt.cpu)
			near(t, "memory", rep.Memory, tt.mem)
			near(t, "processes", rep.Processes, tt.procs)
			near(t, "cpus", rep.Raw.CPUs, tt.cpus)
			if rep.Raw.MemTotalBytes != tt.memTotal || rep.Raw.MemAvailableBytes != tt.memAvail {
				t.Errorf("mem total %d available %d, want %d %d", rep.Raw.MemTotalBytes, rep.Raw.MemAvailableBytes, tt.memTotal, tt.memAvail)
			}
		})
	}
}

func TestCgroupFixture(t *testing.T) {
	var dir string
	rep := readFixture(t, func(o Options) (*CgroupSource, error) {
		dir, _ = filepath.Abs(filepath.Join(filepath.Dir(o.ProcRoot), "cgroup", "slice", "app"))
		return NewCgroupSource(dir, o)
	}, func(s *CgroupSource) *hostReader { return s.host })
	checkHostShared(t, rep)
	if rep.Source != "cgroup:"+dir {
		t.Errorf("source %q", rep.Source)
	}
	// app: cpu.max 1.5 CPUs (slice has none; cpuset 2; host 2).
	near(t, "cpus", rep.Raw.CPUs, 1.5)
	// usage +1.5 s over 2 s on 1.5 CPUs.
	near(t, "cpu", rep.CPU, 0.5)
	// Limit from the parent slice, 1e9; working set 600e6 − 100e6.
	near(t, "memory", rep.Memory, 0.5)
	if rep.Raw.MemTotalBytes != 1e9 || rep.Raw.MemAvailableBytes != 5e8 {
		t.Errorf("mem raw %d %d", rep.Raw.MemTotalBytes, rep.Raw.MemAvailableBytes)
	}
	// Runnable: 4243 (app) and 4250 (app/worker); 4242 sleeps.
	if rep.Raw.RunnableTasks != 2 {
		t.Errorf("runnable = %d, want 2", rep.Raw.RunnableTasks)
	}
	near(t, "processes", rep.Processes, 2/1.5)
	if rep.Raw.PSICPUSome10 == nil || *rep.Raw.PSICPUSome10 != 12.5 || rep.Raw.PSIMemorySome10 != nil {
		t.Errorf("psi cpu %v memory %v", rep.Raw.PSICPUSome10, rep.Raw.PSIMemorySome10)
	}
}

func TestCgroupSourceRefuses(t *testing.T) {
	o := fixtureOptions("t0")
	abs, _ := filepath.Abs("testdata/t0/cgroup")
	for _, dir := range []string{
		"testdata/t0/cgroup/slice/app", // relative
		abs + "/nonexistent",
		abs, // root group: no memory.current
		os.TempDir(),
	} {
		if _, err := NewCgroupSource(dir, o); err == nil {
			t.Errorf("NewCgroupSource(%q) accepted", dir)
		} else {
			t.Logf("%s: %v", dir, err)
		}
	}
}
