package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"
	"golang.org/x/sys/unix"
)

// hostCounters is one reading of the host-wide counters that every source
// uses (memory total, disk, load averages, PSI) plus the host CPU counters.
type hostCounters struct {
	at           time.Time      // when read (monotonic clock)
	cpu          procfs.CPUStat // summed over all CPUs, seconds
	cpus         int            // online CPUs: per-CPU lines in /proc/stat
	procsRunning uint64         // procs_running, including the reader itself
	memTotal     uint64         // bytes
	memAvailable uint64         // bytes
	load         procfs.LoadAvg
	ioTicks      map[string]uint64  // block device -> IOsTotalTicks (ms)
	spaceUsed    map[string]float64 // mount point -> used fraction
	psiCPU       *float64           // some avg10, percent; nil without PSI
	psiMemory    *float64
	psiIO        *float64
}

// hostReader reads hostCounters from a procfs root.
type hostReader struct {
	proc      procfs.FS // for the cgroup and process sources
	root      string    // where procfs is mounted
	files     procFile  // the host's own files (procfile.go)
	diskstats string    // path of /proc/diskstats
	mounts    []string
	devices   map[string]bool // the only devices counted; nil: countedDevice's default
	now       func() time.Time
	statfs    func(path string, st *unix.Statfs_t) error
}

func newHostReader(o Options) (*hostReader, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := procfs.NewFS(o.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	h := &hostReader{proc: p, root: o.ProcRoot, diskstats: filepath.Join(o.ProcRoot, "diskstats"), mounts: o.DiskMounts, now: time.Now, statfs: unix.Statfs}
	if len(o.DiskDevices) > 0 {
		h.devices = make(map[string]bool, len(o.DiskDevices))
		for _, d := range o.DiskDevices {
			h.devices[d] = true
		}
	}
	return h, nil
}

// AbsentDiskDevices returns the devices of o.DiskDevices that
// /proc/diskstats (under o.ProcRoot) does not list now, in the order given.
// The agent warns about them at start: such a device counts nothing until
// it appears.
func AbsentDiskDevices(o Options) ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(o.DiskDevices) == 0 {
		return nil, nil
	}
	b, err := blockdevice.NewFS(o.ProcRoot, o.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	ds, err := b.ProcDiskstats()
	if err != nil {
		return nil, fmt.Errorf("read /proc/diskstats: %w", err)
	}
	present := make(map[string]bool, len(ds))
	for _, d := range ds {
		present[d.DeviceName] = true
	}
	var absent []string
	for _, d := range o.DiskDevices {
		if !present[d] {
			absent = append(absent, d)
		}
	}
	return absent, nil
}

func (h *hostReader) read() (hostCounters, error) {
	c := hostCounters{at: h.now()}
	b, err := h.files.read(filepath.Join(h.root, "stat"))
	if err == nil {
		c.cpu, c.cpus, c.procsRunning, err = parseStat(b)
	}
	if err != nil {
		return c, fmt.Errorf("read /proc/stat: %w", err)
	}
	if c.cpus == 0 {
		return c, errors.New("read /proc/stat: no per-CPU lines")
	}
	ok := false
	b, err = h.files.read(filepath.Join(h.root, "meminfo"))
	if err == nil {
		c.memTotal, c.memAvailable, ok, err = parseMeminfo(b)
	}
	if err != nil {
		return c, fmt.Errorf("read /proc/meminfo: %w", err)
	}
	if !ok {
		return c, errors.New("read /proc/meminfo: no MemTotal or MemAvailable (kernel older than 3.14?)")
	}
	b, err = h.files.read(filepath.Join(h.root, "loadavg"))
	if err == nil {
		c.load, err = parseLoadavg(b)
	}
	if err != nil {
		return c, fmt.Errorf("read /proc/loadavg: %w", err)
	}
	ds, err := h.files.read(h.diskstats)
	if err != nil {
		return c, fmt.Errorf("read /proc/diskstats: %w", err)
	}
	if c.ioTicks, err = diskIOTicks(ds, h.devices); err != nil {
		return c, fmt.Errorf("read /proc/diskstats: %w", err)
	}
	c.spaceUsed = make(map[string]float64, len(h.mounts))
	for _, m := range h.mounts {
		var sfs unix.Statfs_t
		if err := h.statfs(m, &sfs); err != nil {
			return c, fmt.Errorf("statfs %s: %w", m, err)
		}
		c.spaceUsed[m] = spaceUsed(sfs.Blocks, sfs.Bfree, sfs.Bavail)
	}
	for _, p := range []struct {
		res string
		dst **float64
	}{{"cpu", &c.psiCPU}, {"memory", &c.psiMemory}, {"io", &c.psiIO}} {
		if *p.dst, err = h.psi(p.res); err != nil {
			return c, err
		}
	}
	return c, nil
}

// psi returns "some avg10" of /proc/pressure/res, or nil when the kernel has
// no PSI (file absent, or present but disabled).
func (h *hostReader) psi(res string) (*float64, error) {
	path := filepath.Join(h.root, "pressure", res)
	b, err := h.files.read(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	v, err := parsePSISome10(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// countedDevice reports whether a /proc/diskstats device counts towards the
// disk load: with only (the operator's list) set, the devices it names and
// no other, loop devices included if named; without it, every device but
// loop, RAM and compressed-RAM devices, which are not disks.
func countedDevice(name string, only map[string]bool) bool {
	if only != nil {
		return only[name]
	}
	for _, p := range []string{"loop", "ram", "zram"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// spaceUsed is df's "Use%" as a fraction: blocks in use over the blocks a
// normal user could use (root's reserve excluded). A filesystem without
// blocks (pseudo filesystems) is 0.
func spaceUsed(blocks, bfree, bavail uint64) float64 {
	if bfree > blocks {
		return 0
	}
	used := blocks - bfree
	if used+bavail == 0 {
		return 0
	}
	return float64(used) / float64(used+bavail)
}

// cpuBusy is the busy fraction of the CPU time that passed between two
// /proc/stat readings: busy = total − idle − iowait, where steal counts as
// busy (time the hypervisor did not give us is capacity we do not have).
// Guest time is already inside user and nice and is not added again. A
// counter that steps back (iowait does on some kernels) contributes 0.
func cpuBusy(prev, cur procfs.CPUStat) (float64, error) {
	d := func(a, b float64) float64 { return math.Max(b-a, 0) }
	idle := d(prev.Idle, cur.Idle) + d(prev.Iowait, cur.Iowait)
	busy := d(prev.User, cur.User) + d(prev.Nice, cur.Nice) + d(prev.System, cur.System) +
		d(prev.IRQ, cur.IRQ) + d(prev.SoftIRQ, cur.SoftIRQ) + d(prev.Steal, cur.Steal)
	if idle+busy <= 0 {
		return 0, errors.New("no CPU time elapsed between two /proc/stat readings")
	}
	return busy / (idle + busy), nil
}

// ioBusy is the busy fraction of the busiest block device over w: the
// IOsTotalTicks delta (ms the device had I/O in flight) divided by the
// window in ms, capped at 1. Devices absent from prev or whose counter went
// back (device replaced) are skipped.
func ioBusy(prev, cur map[string]uint64, w time.Duration) (busy float64, device string) {
	ms := float64(w) / float64(time.Millisecond)
	if ms <= 0 {
		return 0, ""
	}
	for dev, c := range cur {
		p, ok := prev[dev]
		if !ok || c < p {
			continue
		}
		f := math.Min(float64(c-p)/ms, 1)
		if f > busy || (f == busy && dev < device) || device == "" {
			busy, device = f, dev
		}
	}
	return busy, device
}

// memUsed is 1 − available/total.
func memUsed(total, available uint64) (float64, error) {
	if total == 0 {
		return 0, errors.New("memory total is 0")
	}
	if available > total {
		return 0, nil
	}
	return 1 - float64(available)/float64(total), nil
}

// runnableHost is procs_running minus the reading thread itself, which is
// necessarily running while it reads /proc/stat.
func runnableHost(procsRunning uint64) int {
	if procsRunning == 0 {
		return 0
	}
	return int(procsRunning - 1)
}

// hostShared fills the parts of a report every source takes from the host:
// disk (space and I/O), load averages, PSI, and the window. It returns the
// window.
func hostShared(r *Report, prev, cur hostCounters) (time.Duration, error) {
	w, err := window(prev.at, cur.at)
	if err != nil {
		return 0, err
	}
	r.Time = cur.at.Round(0).UTC()
	r.Raw.WindowSeconds = w.Seconds()
	r.Raw.DiskIOBusy, r.Raw.DiskIODevice = ioBusy(prev.ioTicks, cur.ioTicks, w)
	r.Disk = r.Raw.DiskIOBusy
	if len(cur.spaceUsed) > 0 {
		r.Raw.DiskSpaceUsed = make(map[string]float64, len(cur.spaceUsed))
		for m, f := range cur.spaceUsed {
			r.Raw.DiskSpaceUsed[m] = f
			r.Disk = math.Max(r.Disk, f)
		}
	}
	r.Raw.Load1, r.Raw.Load5, r.Raw.Load15 = cur.load.Load1, cur.load.Load5, cur.load.Load15
	r.Raw.PSICPUSome10, r.Raw.PSIMemorySome10, r.Raw.PSIIOSome10 = cur.psiCPU, cur.psiMemory, cur.psiIO
	return w, nil
}

// hostReport turns two host readings into a Report.
func hostReport(prev, cur hostCounters) (Report, error) {
	r := Report{Source: "host"}
	if _, err := hostShared(&r, prev, cur); err != nil {
		return Report{}, err
	}
	busy, err := cpuBusy(prev.cpu, cur.cpu)
	if err != nil {
		return Report{}, err
	}
	r.CPU, r.Raw.CPUBusy, r.Raw.CPUs = busy, busy, float64(cur.cpus)
	if r.Memory, err = memUsed(cur.memTotal, cur.memAvailable); err != nil {
		return Report{}, err
	}
	r.Raw.MemTotalBytes, r.Raw.MemAvailableBytes = cur.memTotal, cur.memAvailable
	r.Raw.RunnableTasks = runnableHost(cur.procsRunning)
	r.Processes = float64(r.Raw.RunnableTasks) / float64(cur.cpus)
	return finish(r)
}

// HostSource samples the whole host. Use it when the real server runs one
// service that owns the machine.
type HostSource struct{ h *hostReader }

// NewHostSource returns the host source.
func NewHostSource(o Options) (*HostSource, error) {
	h, err := newHostReader(o)
	if err != nil {
		return nil, fmt.Errorf("host source: %w", err)
	}
	return &HostSource{h: h}, nil
}

// Name returns "host".
func (s *HostSource) Name() string { return "host" }

// Read reads the host counters.
func (s *HostSource) Read() (Reading, error) {
	c, err := s.h.read()
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	return hostReading(c), nil
}

type hostReading hostCounters

func (cur hostReading) Report(prev Reading) (Report, error) {
	p, ok := prev.(hostReading)
	if !ok {
		return Report{}, errNoBaseline
	}
	r, err := hostReport(hostCounters(p), hostCounters(cur))
	if err != nil {
		return Report{}, fmt.Errorf("host: %w", err)
	}
	return r, nil
}
