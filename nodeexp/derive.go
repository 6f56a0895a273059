package nodeexp

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"lvs-feedback/agent"
)

// SourceName is the Report.Source of figures read from node_exporter, and
// the value of a server's `source` key that selects it.
const SourceName = "node_exporter"

// ErrNoBaseline means a scrape could not be compared with an earlier one —
// the first scrape, the server rebooted (its counters started again), its
// CPUs changed, the earlier scrape is too old — so CPU busy and disk I/O
// are not measured for this poll. The scrape becomes the baseline and the
// next poll measures.
var ErrNoBaseline = errors.New("not measured yet: CPU busy and disk I/O need two scrapes")

// idleModes are the node_cpu_seconds_total modes that count as idle; the
// busyModes as busy. Steal is busy, as lvs-agent counts it: time the
// hypervisor did not give is capacity the server does not have. Guest time
// is inside user and nice already (and is a family of its own). Other
// modes, if a future node_exporter adds any, are left out of both.
var (
	idleModes = []string{"idle", "iowait"}
	busyModes = []string{"user", "nice", "system", "irq", "softirq", "steal"}
)

// bootTimeSlack is how far node_boot_time_seconds may move between two
// scrapes of one boot: the kernel derives it from the wall clock, which
// NTP adjusts.
const bootTimeSlack = 2.0

// counterSlack is how far one CPU's total may step back before it counts
// as a reboot: iowait steps back by a few ticks on some kernels.
const counterSlack = 1.0

// Derive computes a server's loads from two of its scrapes, prev the
// earlier, the way lvs-agent's host source computes them from /proc:
//
//   - CPU: the busy share of the CPU time that passed between the scrapes,
//     Σ busy-mode deltas ÷ Σ busy- and idle-mode deltas over every CPU. A
//     mode counter that steps back (iowait does on some kernels) counts 0.
//   - Memory: 1 − MemAvailable ÷ MemTotal, of cur.
//   - Disk: the larger of the busiest block device's I/O-busy share over
//     the server's elapsed time (the CPU time that passed ÷ CPUs — the
//     server's clock, so that network and director delays do not count)
//     and the fullest filesystem's used share (df's Use%) in cur. Loop,
//     RAM and zram devices do not count.
//   - Processes: runnable tasks (node_procs_running minus node_exporter's
//     own reading thread) per CPU, in cur.
//
// Raw carries the figures behind them, PSI as the share of the elapsed
// time some task waited (percent, like the kernel's avg10 but over the
// poll interval). The error wraps ErrNoBaseline when prev cannot be
// compared with: none, another target, older than maxAge, a reboot (boot
// time moved or a CPU's total went back), a different set of CPUs, or no
// CPU time passed. Report.Time is cur.At.
func Derive(prev, cur Snapshot, maxAge time.Duration) (agent.Report, error) {
	if err := comparable(prev, cur, maxAge); err != nil {
		return agent.Report{}, err
	}
	var busy, idle float64
	for cpu, modes := range cur.CPU {
		before := prev.CPU[cpu]
		if total(modes) < total(before)-counterSlack {
			return agent.Report{}, fmt.Errorf("cpu %s time went back (server rebooted?): %w", clip(cpu), ErrNoBaseline)
		}
		busy += deltas(before, modes, busyModes)
		idle += deltas(before, modes, idleModes)
	}
	if math.IsInf(busy+idle, 0) {
		return agent.Report{}, fmt.Errorf("CPU seconds between the two scrapes overflow: %w", ErrNoBaseline)
	}
	if !(busy+idle > 0) {
		return agent.Report{}, fmt.Errorf("no CPU time passed between the two scrapes: %w", ErrNoBaseline)
	}
	cpus := float64(len(cur.CPU))
	elapsed := (busy + idle) / cpus
	r := agent.Report{
		Schema: agent.SchemaVersion,
		Time:   cur.At.Round(0).UTC(),
		Source: SourceName,
	}
	r.CPU = busy / (busy + idle)
	r.Raw.CPUBusy, r.Raw.CPUs, r.Raw.WindowSeconds = r.CPU, cpus, elapsed

	r.Memory = 1 - math.Min(cur.MemAvailable/cur.MemTotal, 1)
	r.Raw.MemTotalBytes, r.Raw.MemAvailableBytes = toUint(cur.MemTotal), toUint(cur.MemAvailable)

	r.Raw.DiskIOBusy, r.Raw.DiskIODevice = ioBusy(prev.DiskIOTime, cur.DiskIOTime, elapsed)
	r.Disk = r.Raw.DiskIOBusy
	if len(cur.Filesystems) > 0 {
		r.Raw.DiskSpaceUsed = make(map[string]float64, len(cur.Filesystems))
		for mp, fs := range cur.Filesystems {
			u := spaceUsed(fs)
			r.Raw.DiskSpaceUsed[mp] = u
			r.Disk = math.Max(r.Disk, u)
		}
	}

	// node_exporter's thread reading /proc/stat is itself running.
	r.Raw.RunnableTasks = int(math.Min(math.Max(cur.ProcsRunning-1, 0), maxTasks))
	r.Processes = math.Min(float64(r.Raw.RunnableTasks)/cpus, agent.MaxLoad)

	if cur.Load != nil {
		r.Raw.Load1, r.Raw.Load5, r.Raw.Load15 = cur.Load[0], cur.Load[1], cur.Load[2]
	}
	r.Raw.PSICPUSome10 = pressure(prev, cur, "cpu", elapsed)
	r.Raw.PSIMemorySome10 = pressure(prev, cur, "memory", elapsed)
	r.Raw.PSIIOSome10 = pressure(prev, cur, "io", elapsed)
	return r, nil
}

// comparable checks that prev is a baseline cur can be compared with.
func comparable(prev, cur Snapshot, maxAge time.Duration) error {
	switch {
	case prev.CPU == nil:
		return fmt.Errorf("first scrape: %w", ErrNoBaseline)
	case prev.Target != cur.Target:
		return fmt.Errorf("first scrape of %s: %w", cur.Target, ErrNoBaseline)
	case !cur.At.After(prev.At):
		return fmt.Errorf("scrape not later than the previous one: %w", ErrNoBaseline)
	case cur.At.Sub(prev.At) > maxAge:
		return fmt.Errorf("previous scrape %v old, more than %v: %w", cur.At.Sub(prev.At).Round(time.Millisecond), maxAge, ErrNoBaseline)
	case math.Abs(cur.BootTime-prev.BootTime) > bootTimeSlack:
		return fmt.Errorf("boot time moved from %.0f to %.0f (server rebooted): %w", prev.BootTime, cur.BootTime, ErrNoBaseline)
	}
	if !sameKeys(prev.CPU, cur.CPU) {
		return fmt.Errorf("CPUs changed from %d to %d: %w", len(prev.CPU), len(cur.CPU), ErrNoBaseline)
	}
	return nil
}

func sameKeys(a, b map[string]map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// total is one CPU's time in the modes that count.
func total(modes map[string]float64) float64 {
	var t float64
	for _, set := range [][]string{busyModes, idleModes} {
		for _, m := range set {
			t += modes[m]
		}
	}
	return t
}

// deltas sums the growth of the given modes from prev to cur; a counter
// that steps back, or a mode missing from either, counts 0.
func deltas(prev, cur map[string]float64, modes []string) float64 {
	var d float64
	for _, m := range modes {
		p, ok1 := prev[m]
		c, ok2 := cur[m]
		if ok1 && ok2 && c > p {
			d += c - p
		}
	}
	return d
}

// ioBusy is the busy share of the busiest counted block device over
// elapsed seconds, capped at 1; ties go to the first name. Devices absent
// from prev, or whose counter went back (device replaced), are skipped.
func ioBusy(prev, cur map[string]float64, elapsed float64) (busy float64, device string) {
	names := make([]string, 0, len(cur))
	for dev := range cur {
		if countedDevice(dev) {
			names = append(names, dev)
		}
	}
	sort.Strings(names)
	for _, dev := range names {
		p, ok := prev[dev]
		c := cur[dev]
		if !ok || c < p {
			continue
		}
		if f := math.Min((c-p)/elapsed, 1); f > busy || device == "" {
			busy, device = f, dev
		}
	}
	return busy, device
}

// countedDevice reports whether a block device counts towards the disk
// load, by the rule lvs-agent applies: loop, RAM and compressed-RAM
// devices are not disks.
func countedDevice(name string) bool {
	for _, p := range []string{"loop", "ram", "zram"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// spaceUsed is df's Use% as a fraction: bytes in use over the bytes a
// normal user could use (root's reserve excluded), 0 for an empty
// filesystem.
func spaceUsed(fs Filesystem) float64 {
	used := fs.Size - fs.Free
	if used <= 0 || used+fs.Avail <= 0 {
		return 0
	}
	return math.Min(used/(used+fs.Avail), 1)
}

// pressure is the percentage of elapsed seconds some task waited on res,
// or nil when either scrape lacks it or its counter went back.
func pressure(prev, cur Snapshot, res string, elapsed float64) *float64 {
	p, ok1 := prev.Pressure[res]
	c, ok2 := cur.Pressure[res]
	if !ok1 || !ok2 || c < p {
		return nil
	}
	v := math.Min(100*(c-p)/elapsed, 100)
	return &v
}

// maxTasks bounds the runnable-task count a reply can claim, so that the
// conversion to int stays defined; far above any real server.
const maxTasks = 1 << 30

// toUint converts a byte count, checked finite and ≥ 0 by Parse, saturating
// where a float exceeds uint64.
func toUint(v float64) uint64 {
	if v >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(v)
}
