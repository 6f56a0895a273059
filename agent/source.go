package agent

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// A Source is one kind of load an agent can measure: the host, a cgroup or a
// process tree. Read is called from the [Sampler]'s goroutine only.
type Source interface {
	// Name is the value of Report.Source, for example "host" or
	// "process:1234".
	Name() string
	// Read takes one snapshot of the source's counters.
	Read() (Reading, error)
}

// A Reading is one snapshot of a [Source]'s counters. Utilisation is a rate,
// so a Report needs two of them.
type Reading interface {
	// Report computes the loads over the window from prev, an earlier
	// Reading of the same Source, to this one.
	Report(prev Reading) (Report, error)
}

// Options configure a Source. The zero value reads the real /proc and
// measures disk space on "/".
type Options struct {
	// ProcRoot is where procfs is mounted. Default "/proc".
	ProcRoot string
	// DiskMounts are the mount points whose space use counts towards the
	// disk load. Default ["/"].
	DiskMounts []string
	// DiskDevices, when not empty, are the only block devices (names as in
	// /proc/diskstats, such as sda or nvme0n1) whose I/O busy time counts
	// towards the disk load; a named device absent from /proc/diskstats
	// counts nothing until it appears. Empty: every device except loop,
	// RAM and compressed-RAM devices.
	DiskDevices []string
}

// maxDiskMounts bounds the mount list so a reply stays far below
// MaxReportBytes.
const maxDiskMounts = 32

// maxDiskDevices bounds the device list; a real server has a handful.
const maxDiskDevices = 64

func (o Options) withDefaults() (Options, error) {
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if len(o.DiskMounts) == 0 {
		o.DiskMounts = []string{"/"}
	}
	if len(o.DiskMounts) > maxDiskMounts {
		return o, fmt.Errorf("%d disk mounts, at most %d", len(o.DiskMounts), maxDiskMounts)
	}
	for _, m := range o.DiskMounts {
		if !filepath.IsAbs(m) {
			return o, fmt.Errorf("disk mount %q is not an absolute path", m)
		}
	}
	if err := CheckDiskDevices(o.DiskDevices); err != nil {
		return o, err
	}
	return o, nil
}

// CheckDiskDevices refuses a list for [Options.DiskDevices] that cannot
// name /proc/diskstats entries: an empty name, a path (/dev/sda instead of
// sda), blanks, a name given twice, or more than 64 names.
func CheckDiskDevices(names []string) error {
	if len(names) > maxDiskDevices {
		return fmt.Errorf("%d disk devices, at most %d", len(names), maxDiskDevices)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		switch {
		case n == "":
			return errors.New("empty disk device name")
		case strings.Contains(n, "/"):
			return fmt.Errorf("disk device %q: want a name as in /proc/diskstats (sda, not /dev/sda)", n)
		case strings.ContainsFunc(n, unicode.IsSpace):
			return fmt.Errorf("disk device %q contains a blank", n)
		case seen[n]:
			return fmt.Errorf("disk device %q named twice", n)
		}
		seen[n] = true
	}
	return nil
}

// ParseSource builds the Source named by spec:
//
//	host           the whole host (default)
//	cgroup:PATH    one cgroup v2 directory, e.g. cgroup:/sys/fs/cgroup/system.slice/nginx.service
//	process:PID    one process and its descendants
//	pidfile:PATH   like process:, the PID re-read from PATH at every sample
func ParseSource(spec string, opts Options) (Source, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch {
	case kind == "host" && !hasArg:
		return NewHostSource(opts)
	case kind == "cgroup" && hasArg:
		return NewCgroupSource(arg, opts)
	case kind == "process" && hasArg:
		pid, err := strconv.Atoi(arg)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("source %q: PID must be a positive integer", spec)
		}
		return NewProcessSource(pid, opts)
	case kind == "pidfile" && hasArg:
		return NewPidfileSource(arg, opts)
	}
	return nil, fmt.Errorf("source %q: want host, cgroup:PATH, process:PID or pidfile:PATH", spec)
}

// errNoBaseline is returned by Reading.Report when prev is of another kind.
var errNoBaseline = errors.New("previous reading is from another source")

// window returns the time between two readings, refusing a clock that did
// not move forward.
func window(prev, cur time.Time) (time.Duration, error) {
	w := cur.Sub(prev)
	if w <= 0 {
		return 0, fmt.Errorf("sampling window %v is not positive", w)
	}
	return w, nil
}

// capLoad bounds a computed load to [0, MaxLoad] and refuses NaN or ±Inf,
// which would mean a bug or a corrupt counter.
func capLoad(name string, v float64) (float64, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s load is %v", name, v)
	}
	if v < 0 {
		return 0, fmt.Errorf("%s load %v is negative", name, v)
	}
	return math.Min(v, MaxLoad), nil
}

// finish caps the four loads of r, stamps the schema and returns it.
func finish(r Report) (Report, error) {
	var err error
	for _, f := range []struct {
		name string
		v    *float64
	}{{"cpu", &r.CPU}, {"memory", &r.Memory}, {"disk", &r.Disk}, {"processes", &r.Processes}} {
		if *f.v, err = capLoad(f.name, *f.v); err != nil {
			return Report{}, err
		}
	}
	r.Schema = SchemaVersion
	return r, nil
}
