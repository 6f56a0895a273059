package agent

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestCPUBusy(t *testing.T) {
	base := procfs.CPUStat{User: 100, Nice: 10, System: 50, Idle: 800, Iowait: 20, IRQ: 5, SoftIRQ: 5, Steal: 10}
	add := func(d procfs.CPUStat) procfs.CPUStat {
		return procfs.CPUStat{
			User: base.User + d.User, Nice: base.Nice + d.Nice, System: base.System + d.System,
			Idle: base.Idle + d.Idle, Iowait: base.Iowait + d.Iowait, IRQ: base.IRQ + d.IRQ,
			SoftIRQ: base.SoftIRQ + d.SoftIRQ, Steal: base.Steal + d.Steal,
			Guest: base.Guest + d.Guest, GuestNice: base.GuestNice + d.GuestNice,
		}
	}
	tests := []struct {
		name    string
		delta   procfs.CPUStat
		want    float64
		wantErr bool
	}{
		{"idle", procfs.CPUStat{Idle: 2}, 0, false},
		{"all user", procfs.CPUStat{User: 2}, 1, false},
		{"half", procfs.CPUStat{User: 1, Idle: 1}, 0.5, false},
		// 1 user + 0.5 system + 0.25 irq + 0.25 softirq = 2 busy of 4.
		{"mixed busy", procfs.CPUStat{User: 1, System: 0.5, IRQ: 0.25, SoftIRQ: 0.25, Idle: 2}, 0.5, false},
		// iowait is idle: 1 busy of 1+2+1 = 0.25.
		{"iowait is idle", procfs.CPUStat{User: 1, Idle: 2, Iowait: 1}, 0.25, false},
		// steal is busy: 1 user + 1 steal of 4.
		{"steal is busy", procfs.CPUStat{User: 1, Steal: 1, Idle: 2}, 0.5, false},
		// guest is inside user already: not added again. 1 of 2.
		{"guest not double counted", procfs.CPUStat{User: 1, Guest: 1, Idle: 1}, 0.5, false},
		// nice counts as busy.
		{"nice", procfs.CPUStat{Nice: 3, Idle: 1}, 0.75, false},
		{"nothing elapsed", procfs.CPUStat{}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cpuBusy(base, add(tt.delta))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			near(t, "busy", got, tt.want)
		})
	}
	t.Run("iowait steps back", func(t *testing.T) {
		cur := add(procfs.CPUStat{User: 1, Idle: 1})
		cur.Iowait -= 5 // seen on NO_HZ kernels: must not make busy > 1
		got, err := cpuBusy(base, cur)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "busy", got, 0.5)
	})
}

func TestIOBusy(t *testing.T) {
	prev := map[string]uint64{"sda": 1000, "sdb": 0, "sdc": 500, "nvme0n1": 10}
	tests := []struct {
		name    string
		cur     map[string]uint64
		w       time.Duration
		want    float64
		wantDev string
	}{
		{"busiest wins", map[string]uint64{"sda": 1250, "sdb": 600, "sdc": 500, "nvme0n1": 10}, time.Second, 0.6, "sdb"},
		{"capped at 1", map[string]uint64{"sda": 4000}, time.Second, 1, "sda"},
		{"new device skipped", map[string]uint64{"sde": 900, "sda": 1100}, time.Second, 0.1, "sda"},
		{"counter went back skipped", map[string]uint64{"sda": 10, "sdc": 600}, 2 * time.Second, 0.05, "sdc"},
		{"idle", map[string]uint64{"sda": 1000}, time.Second, 0, "sda"},
		{"no devices", map[string]uint64{}, time.Second, 0, ""},
		{"zero window", map[string]uint64{"sda": 2000}, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dev := ioBusy(prev, tt.cur, tt.w)
			near(t, "busy", got, tt.want)
			if dev != tt.wantDev {
				t.Errorf("device = %q, want %q", dev, tt.wantDev)
			}
		})
	}
}

func TestSpaceUsed(t *testing.T) {
	tests := []struct {
		blocks, bfree, bavail uint64
		want                  float64
	}{
		{1000, 1000, 950, 0},          // empty (5 % reserved for root)
		{1000, 500, 450, 500.0 / 950}, // df: used / (used + avail)
		{1000, 50, 0, 1},              // only root's reserve left: full for users
		{0, 0, 0, 0},                  // pseudo filesystem
		{10, 20, 20, 0},               // nonsense: free > blocks
	}
	for _, tt := range tests {
		near(t, "spaceUsed", spaceUsed(tt.blocks, tt.bfree, tt.bavail), tt.want)
	}
}

func TestMemUsed(t *testing.T) {
	for _, tt := range []struct {
		total, avail uint64
		want         float64
		wantErr      bool
	}{
		{8 << 30, 2 << 30, 0.75, false},
		{8 << 30, 8 << 30, 0, false},
		{8 << 30, 0, 1, false},
		{8 << 30, 9 << 30, 0, false},
		{0, 0, 0, true},
	} {
		got, err := memUsed(tt.total, tt.avail)
		if (err != nil) != tt.wantErr {
			t.Errorf("memUsed(%d, %d) err = %v", tt.total, tt.avail, err)
		}
		near(t, "memUsed", got, tt.want)
	}
}

func TestRunnableHost(t *testing.T) {
	for in, want := range map[uint64]int{0: 0, 1: 0, 2: 1, 9: 8} {
		if got := runnableHost(in); got != want {
			t.Errorf("runnableHost(%d) = %d, want %d", in, got, want)
		}
	}
}

// readFixture reads a source built by mk on testdata/t0 then testdata/t1
// (two seconds apart) and returns the report.
func readFixture[S Source](t *testing.T, mk func(o Options) (S, error), host func(S) *hostReader) Report {
	t.Helper()
	var readings []Reading
	for i, name := range []string{"t0", "t1"} {
		src, err := mk(fixtureOptions(name))
		if err != nil {
			t.Fatal(err)
		}
		fixHost(host(src), fixtureT0.Add(time.Duration(i)*2*time.Second))
		r, err := src.Read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		readings = append(readings, r)
	}
	rep, err := readings[1].Report(readings[0])
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkHostShared checks what every source takes from the host fixtures.
func checkHostShared(t *testing.T, rep Report) {
	t.Helper()
	if rep.Schema != SchemaVersion || !rep.Time.Equal(fixtureT0.Add(2*time.Second)) {
		t.Errorf("schema %d time %v", rep.Schema, rep.Time)
	}
	near(t, "window", rep.Raw.WindowSeconds, 2)
	// sdb: 1200 ms busy of 2000; loop0 (2000 of 2000) is not a disk.
	near(t, "disk_io_busy", rep.Raw.DiskIOBusy, 0.6)
	if rep.Raw.DiskIODevice != "sdb" {
		t.Errorf("disk_io_device = %q", rep.Raw.DiskIODevice)
	}
	near(t, "space /", rep.Raw.DiskSpaceUsed["/"], 500.0/900)
	near(t, "space /var", rep.Raw.DiskSpaceUsed["/var"], 90.0/95)
	near(t, "disk", rep.Disk, 90.0/95) // max of space and I/O
	near(t, "load1", rep.Raw.Load1, 1.5)
	near(t, "load5", rep.Raw.Load5, 1)
	near(t, "load15", rep.Raw.Load15, 0.5)
}

func TestHostFixture(t *testing.T) {
	rep := readFixture(t, NewHostSource, func(s *HostSource) *hostReader { return s.h })
	checkHostShared(t, rep)
	if rep.Source != "host" {
		t.Errorf("source %q", rep.Source)
	}
	// user +150, system +50, idle +150, iowait +50 (ticks): 200 busy of 400.
	near(t, "cpu", rep.CPU, 0.5)
	near(t, "cpus", rep.Raw.CPUs, 2)
	// MemAvailable 2000000 kB of 8000000 kB.
	near(t, "memory", rep.Memory, 0.75)
	if rep.Raw.MemTotalBytes != 8000000*1024 || rep.Raw.MemAvailableBytes != 2000000*1024 {
		t.Errorf("mem raw %d %d", rep.Raw.MemTotalBytes, rep.Raw.MemAvailableBytes)
	}
	// procs_running 3, minus the reader: 2 runnable on 2 CPUs.
	if rep.Raw.RunnableTasks != 2 {
		t.Errorf("runnable = %d, want 2", rep.Raw.RunnableTasks)
	}
	near(t, "processes", rep.Processes, 1)
	if rep.Raw.PSICPUSome10 == nil || *rep.Raw.PSICPUSome10 != 1.5 ||
		rep.Raw.PSIMemorySome10 == nil || *rep.Raw.PSIMemorySome10 != 0.25 {
		t.Errorf("psi cpu %v memory %v", rep.Raw.PSICPUSome10, rep.Raw.PSIMemorySome10)
	}
	if rep.Raw.PSIIOSome10 != nil {
		t.Errorf("psi io = %v, want nil (no /proc/pressure/io)", *rep.Raw.PSIIOSome10)
	}
}

func TestHostFixtureErrors(t *testing.T) {
	src, err := NewHostSource(fixtureOptions("t0"))
	if err != nil {
		t.Fatal(err)
	}
	fixHost(src.h, fixtureT0)
	r0, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	// Same counters, same clock: no window.
	if _, err := r0.Report(r0); err == nil {
		t.Error("zero window accepted")
	}
	// A mount that cannot be statfs'd is an error, not 0 %.
	src.h.mounts = []string{"/nonexistent"}
	if _, err := src.Read(); err == nil {
		t.Error("statfs failure swallowed")
	}
	if _, err := NewHostSource(Options{ProcRoot: "testdata/none"}); err == nil {
		t.Error("missing proc root accepted")
	}
	if _, err := NewHostSource(Options{DiskMounts: []string{"relative"}}); err == nil {
		t.Error("relative mount accepted")
	}
}

// TestHostRealProc samples this machine's /proc and checks the figures are
// plausible.
func TestHostRealProc(t *testing.T) {
	src, err := NewHostSource(Options{})
	if err != nil {
		t.Fatal(err)
	}
	r0, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	r1, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r1.Report(r0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host report: %+v", rep)
	inRange := func(name string, v, lo, hi float64) {
		t.Helper()
		if math.IsNaN(v) || v < lo || v > hi {
			t.Errorf("%s = %v, want %v..%v", name, v, lo, hi)
		}
	}
	inRange("cpu", rep.CPU, 0, 1)
	inRange("memory", rep.Memory, 0.0001, 1)
	inRange("disk", rep.Disk, 0, 1)
	inRange("processes", rep.Processes, 0, 64)
	inRange("window", rep.Raw.WindowSeconds, 0.25, 5)
	inRange("cpus", rep.Raw.CPUs, 1, 4096)
	if int(rep.Raw.CPUs) < runtime.NumCPU() {
		t.Errorf("cpus %v < runtime.NumCPU %d", rep.Raw.CPUs, runtime.NumCPU())
	}
	if rep.Raw.MemTotalBytes < 64<<20 || rep.Raw.MemAvailableBytes > rep.Raw.MemTotalBytes {
		t.Errorf("mem total %d available %d", rep.Raw.MemTotalBytes, rep.Raw.MemAvailableBytes)
	}
	if _, ok := rep.Raw.DiskSpaceUsed["/"]; !ok {
		t.Error("no space figure for /")
	}
	if time.Since(rep.Time) > time.Minute || time.Since(rep.Time) < 0 {
		t.Errorf("time %v", rep.Time)
	}
}

// TestHostDiskDevices reads the fixtures (t0 to t1, 2 s: loop0 +2000 ms,
// sda +500, sda1 +400, sdb +1200) with a device list: only the named
// devices count, loop devices included when named.
func TestHostDiskDevices(t *testing.T) {
	for _, tt := range []struct {
		devices []string
		busy    float64
		device  string
	}{
		{nil, 0.6, "sdb"},                      // default: every disk but loop0
		{[]string{"sda"}, 0.25, "sda"},         // sdb, busier, not counted
		{[]string{"sda1", "sda"}, 0.25, "sda"}, // the busiest of those named
		{[]string{"loop0"}, 1, "loop0"},        // named: counted though a loop device
		{[]string{"sda", "nvme9n1"}, 0.25, "sda"},
		{[]string{"nvme9n1"}, 0, ""}, // absent: nothing counts
	} {
		mk := func(o Options) (*HostSource, error) {
			o.DiskDevices = tt.devices
			return NewHostSource(o)
		}
		rep := readFixture(t, mk, func(s *HostSource) *hostReader { return s.h })
		near(t, fmt.Sprintf("%v: disk_io_busy", tt.devices), rep.Raw.DiskIOBusy, tt.busy)
		if rep.Raw.DiskIODevice != tt.device {
			t.Errorf("%v: disk_io_device = %q, want %q", tt.devices, rep.Raw.DiskIODevice, tt.device)
		}
	}
}

func TestDiskDevicesRefused(t *testing.T) {
	many := make([]string, maxDiskDevices+1)
	for i := range many {
		many[i] = fmt.Sprintf("sd%d", i)
	}
	for _, tt := range []struct {
		devices []string
		want    string
	}{
		{[]string{""}, "empty disk device name"},
		{[]string{"sda", ""}, "empty disk device name"},
		{[]string{"/dev/sda"}, `disk device "/dev/sda": want a name as in /proc/diskstats (sda, not /dev/sda)`},
		{[]string{"sd a"}, `disk device "sd a" contains a blank`},
		{[]string{"sda", "sdb", "sda"}, `disk device "sda" named twice`},
		{many, "65 disk devices, at most 64"},
	} {
		o := fixtureOptions("t0")
		o.DiskDevices = tt.devices
		_, err := NewHostSource(o)
		if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("%q: err %v, want %q", tt.devices, err, tt.want)
		}
		if _, err := AbsentDiskDevices(o); err == nil || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("AbsentDiskDevices %q: err %v, want %q", tt.devices, err, tt.want)
		}
	}
}

func TestAbsentDiskDevices(t *testing.T) {
	for _, tt := range []struct {
		devices, absent []string
	}{
		{nil, nil},
		{[]string{"sda", "loop0"}, nil},
		{[]string{"nvme9n1", "sdb", "dm-3"}, []string{"nvme9n1", "dm-3"}},
	} {
		o := fixtureOptions("t0")
		o.DiskDevices = tt.devices
		got, err := AbsentDiskDevices(o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.absent) {
			t.Errorf("%q: absent %q, want %q", tt.devices, got, tt.absent)
		}
	}
	if _, err := AbsentDiskDevices(Options{ProcRoot: "testdata/none", DiskDevices: []string{"sda"}}); err == nil {
		t.Error("missing /proc/diskstats accepted")
	}
}
