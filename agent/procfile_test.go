package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
)

func TestParseStat(t *testing.T) {
	// Times in USER_HZ ticks: 250 ticks are 2.5 s.
	data := "cpu  250 10 120 9000 30 5 7 3 0 0\ncpu0 125 5 60 4500 15 2 3 1 0 0\ncpu1 125 5 60 4500 15 3 4 2 0 0\n" +
		"intr 123 0 0 5\nctxt 99\nbtime 1700000000\nprocesses 4000\nprocs_running 3\nprocs_blocked 0\nsoftirq 5 1 1\n"
	cpu, cpus, running, err := parseStat([]byte(data))
	want := procfs.CPUStat{User: 2.5, Nice: 0.1, System: 1.2, Idle: 90, Iowait: 0.3, IRQ: 0.05, SoftIRQ: 0.07, Steal: 0.03}
	if err != nil || cpu != want || cpus != 2 || running != 3 {
		t.Errorf("parseStat = %+v, %d CPUs, %d running, %v; want %+v, 2, 3", cpu, cpus, running, err, want)
	}
	// An old kernel's four times: the rest are 0.
	cpu, cpus, _, err = parseStat([]byte("cpu 100 0 50 800\ncpu0 100 0 50 800\nprocs_running 1\n"))
	if want := (procfs.CPUStat{User: 1, System: 0.5, Idle: 8}); err != nil || cpu != want || cpus != 1 {
		t.Errorf("four times: %+v, %d, %v; want %+v, 1", cpu, cpus, err, want)
	}
	for _, bad := range []string{
		"",
		"cpu0 1 2 3 4\nprocs_running 1\n",                    // no total
		"cpu  1 2 3\nprocs_running 1\n",                      // three times
		"cpu  1 2 x 4\nprocs_running 1\n",                    // not a number
		"cpu  1 2 -3 4\nprocs_running 1\n",                   // negative
		"cpu  1 2 3 4\ncpu0 1 2 3 4\n",                       // no procs_running
		"cpu  1 2 3 4\nprocs_running many\n",                 // not a number
		"cpu  1 2 3 4\nprocs_running 99999999999999999999\n", // out of range
	} {
		if _, _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	data := "MemTotal:        8000000 kB\nMemFree:         1000000 kB\nMemAvailable:    4000000 kB\nBuffers:  1 kB\n"
	total, avail, ok, err := parseMeminfo([]byte(data))
	if err != nil || !ok || total != 8_192_000_000 || avail != 4_096_000_000 {
		t.Errorf("parseMeminfo = %d, %d, %v, %v; want 8192000000, 4096000000", total, avail, ok, err)
	}
	if _, _, ok, err := parseMeminfo([]byte("MemTotal: 8 kB\nMemFree: 1 kB\n")); ok || err != nil {
		t.Errorf("no MemAvailable: ok %v, %v; want not ok, no error", ok, err)
	}
	for _, bad := range []string{"MemTotal: 8 MB\nMemAvailable: 1 kB\n", "MemTotal: x kB\n", "MemAvailable: 1\n", "MemTotal: 9007199254740993 kB\n"} {
		if _, _, _, err := parseMeminfo([]byte(bad)); err == nil {
			t.Errorf("parseMeminfo(%q) accepted", bad)
		}
	}
}

func TestParseLoadavg(t *testing.T) {
	la, err := parseLoadavg([]byte("1.00 0.80 0.40 2/200 4250\n"))
	if err != nil || la != (procfs.LoadAvg{Load1: 1, Load5: 0.8, Load15: 0.4}) {
		t.Errorf("parseLoadavg = %+v, %v", la, err)
	}
	for _, bad := range []string{"", "1.0 0.8\n", "1.0 x 0.4 1/2 3\n"} {
		if _, err := parseLoadavg([]byte(bad)); err == nil {
			t.Errorf("parseLoadavg(%q) accepted", bad)
		}
	}
}

// procFile reads a file of any size up to its bound into the one buffer,
// and says which file it could not open.
func TestProcFileRead(t *testing.T) {
	dir := t.TempDir()
	var p procFile
	for _, size := range []int{0, 5, 8 << 10, 8<<10 + 1, 100 << 10} {
		path := filepath.Join(dir, "f")
		want := strings.Repeat("x", size)
		if err := os.WriteFile(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := p.read(path)
		if err != nil || string(got) != want {
			t.Errorf("%d bytes: got %d bytes, %v", size, len(got), err)
		}
	}
	if _, err := p.read(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "absent") || !os.IsNotExist(err) {
		t.Errorf("absent file: %v, want a not-exist error naming it", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxProcFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.read(big); err == nil {
		t.Error("a file over the bound was read")
	}
}
