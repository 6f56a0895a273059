package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// cgroupCounters is one reading of a cgroup v2 directory.
type cgroupCounters struct {
	usageUsec    uint64  // cpu.stat usage_usec
	quotaCPUs    float64 // tightest cpu.max quota/period of the group and its ancestors; 0 = none
	cpusetCPUs   int     // CPUs in cpuset.cpus.effective; 0 = unknown
	memCurrent   uint64  // memory.current, bytes
	inactiveFile uint64  // memory.stat inactive_file, bytes
	memLimit     uint64  // tightest memory.max of the group and its ancestors; 0 = none
	runnable     int     // threads of the group and its descendants in state R
	psiCPU       *float64
	psiMemory    *float64
	psiIO        *float64
}

type cgroupReader struct {
	dir  string
	proc procfs.FS
}

func (g *cgroupReader) path(name string) string { return filepath.Join(g.dir, name) }

func (g *cgroupReader) read(selfTID int) (cgroupCounters, error) {
	var c cgroupCounters
	kv, err := readKeyValues(g.path("cpu.stat"))
	if err != nil {
		return c, err
	}
	var ok bool
	if c.usageUsec, ok = kv["usage_usec"]; !ok {
		return c, fmt.Errorf("%s: no usage_usec", g.path("cpu.stat"))
	}
	if c.memCurrent, err = readUint(g.path("memory.current")); err != nil {
		return c, err
	}
	if kv, err = readKeyValues(g.path("memory.stat")); err != nil {
		return c, err
	}
	c.inactiveFile = kv["inactive_file"]
	if c.quotaCPUs, c.memLimit, err = cgroupLimits(g.dir); err != nil {
		return c, err
	}
	if b, err := os.ReadFile(g.path("cpuset.cpus.effective")); err == nil {
		if c.cpusetCPUs, err = countCPUList(string(b)); err != nil {
			return c, fmt.Errorf("%s: %w", g.path("cpuset.cpus.effective"), err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return c, fmt.Errorf("read cpuset: %w", err)
	}
	for _, p := range []struct {
		file string
		dst  **float64
	}{{"cpu.pressure", &c.psiCPU}, {"memory.pressure", &c.psiMemory}, {"io.pressure", &c.psiIO}} {
		if *p.dst, err = readPSIFile(g.path(p.file)); err != nil {
			return c, err
		}
	}
	if c.runnable, err = g.runnable(selfTID); err != nil {
		return c, err
	}
	return c, nil
}

// runnable counts the threads in state R of the group and all its
// descendants (cgroup.threads lists only a group's own threads).
func (g *cgroupReader) runnable(selfTID int) (int, error) {
	n := 0
	err := filepath.WalkDir(g.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != g.dir && errors.Is(err, fs.ErrNotExist) {
				return nil // a child group removed while we walked
			}
			return err
		}
		if d.IsDir() || d.Name() != "cgroup.threads" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV) {
				return nil
			}
			return err
		}
		for _, f := range bytes.Fields(b) {
			tid, err := strconv.Atoi(string(f))
			if err != nil || tid == selfTID {
				continue
			}
			p, err := g.proc.Proc(tid)
			if err != nil {
				continue // exited
			}
			if st, err := p.Stat(); err == nil && st.State == "R" {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count runnable threads: %w", err)
	}
	return n, nil
}

// cgroupLimits walks from dir up to the cgroup mount root (the last
// directory with a cgroup.controllers file) and returns the tightest CPU
// quota (in CPUs) and memory limit (bytes); 0 means unlimited.
func cgroupLimits(dir string) (quotaCPUs float64, memLimit uint64, err error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err != nil {
			break
		}
		if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
			q, err := parseCPUMax(string(b))
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %w", filepath.Join(d, "cpu.max"), err)
			}
			if q > 0 && (quotaCPUs == 0 || q < quotaCPUs) {
				quotaCPUs = q
			}
		}
		if b, err := os.ReadFile(filepath.Join(d, "memory.max")); err == nil {
			m, err := parseMemoryMax(string(b))
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %w", filepath.Join(d, "memory.max"), err)
			}
			if m > 0 && (memLimit == 0 || m < memLimit) {
				memLimit = m
			}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return quotaCPUs, memLimit, nil
}

// parseCPUMax parses cpu.max ("QUOTA PERIOD" or "max PERIOD") into CPUs;
// 0 means no quota.
func parseCPUMax(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 {
		return 0, fmt.Errorf("malformed cpu.max %q", s)
	}
	if f[0] == "max" {
		return 0, nil
	}
	quota, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed cpu.max %q", s)
	}
	period := uint64(100000)
	if len(f) == 2 {
		if period, err = strconv.ParseUint(f[1], 10, 64); err != nil || period == 0 {
			return 0, fmt.Errorf("malformed cpu.max %q", s)
		}
	}
	return float64(quota) / float64(period), nil
}

// parseMemoryMax parses memory.max ("max" or bytes); 0 means no limit.
func parseMemoryMax(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed memory.max %q", s)
	}
	return v, nil
}

// countCPUList counts the CPUs in a list such as "0-3,6,8-9". An empty list
// (a group with no cpuset of its own) is 0, meaning unknown.
func countCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("malformed CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("malformed CPU list %q", s)
			}
		}
		n += b - a + 1
	}
	return n, nil
}

// readUint reads a file holding one unsigned integer.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}

// readKeyValues reads a flat-keyed file ("key value" per line).
func readKeyValues(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	kv := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			kv[f[0]] = v
		}
	}
	return kv, nil
}

// readPSIFile returns "some avg10" of a cgroup pressure file, nil if the
// file is absent or PSI is disabled.
func readPSIFile(path string) (*float64, error) {
	b, err := os.ReadFile(path)
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

// parsePSISome10 extracts avg10 from the "some" line of a PSI file.
func parsePSISome10(b []byte) (*float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "avg10="); ok {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
					return nil, fmt.Errorf("malformed PSI line %q", sc.Text())
				}
				return &x, nil
			}
		}
		return nil, fmt.Errorf("malformed PSI line %q", sc.Text())
	}
	return nil, nil
}

// cgroupCPUs is the number of CPUs the group may use: the host's CPUs,
// narrowed by its cpuset and its CPU quota.
func cgroupCPUs(hostCPUs int, quotaCPUs float64, cpusetCPUs int) float64 {
	n := float64(hostCPUs)
	if cpusetCPUs > 0 && float64(cpusetCPUs) < n {
		n = float64(cpusetCPUs)
	}
	if quotaCPUs > 0 && quotaCPUs < n {
		n = quotaCPUs
	}
	return n
}

// cgroupReport turns two cgroup readings (with host readings taken at the
// same time) into a Report.
func cgroupReport(name string, prevHost, curHost hostCounters, prev, cur cgroupCounters) (Report, error) {
	r := Report{Source: name}
	w, err := hostShared(&r, prevHost, curHost)
	if err != nil {
		return Report{}, err
	}
	if cur.usageUsec < prev.usageUsec {
		return Report{}, errors.New("cpu.stat usage_usec went back (cgroup recreated?)")
	}
	cpus := cgroupCPUs(curHost.cpus, cur.quotaCPUs, cur.cpusetCPUs)
	r.CPU = float64(cur.usageUsec-prev.usageUsec) / (float64(w.Microseconds()) * cpus)
	r.Raw.CPUBusy, r.Raw.CPUs = r.CPU, cpus

	limit := curHost.memTotal
	if cur.memLimit > 0 && cur.memLimit < limit {
		limit = cur.memLimit
	}
	if limit == 0 {
		return Report{}, errors.New("memory limit is 0")
	}
	ws := cur.memCurrent - min(cur.inactiveFile, cur.memCurrent) // working set
	r.Memory = float64(ws) / float64(limit)
	r.Raw.MemTotalBytes, r.Raw.MemAvailableBytes = limit, limit-min(ws, limit)

	r.Raw.RunnableTasks = cur.runnable
	r.Processes = float64(cur.runnable) / cpus
	r.Raw.PSICPUSome10, r.Raw.PSIMemorySome10, r.Raw.PSIIOSome10 = cur.psiCPU, cur.psiMemory, cur.psiIO
	return finish(r)
}

// CgroupSource samples one cgroup v2 group and its descendants. Use it when
// the service runs in a container or a systemd unit with its own limits:
// CPU and memory are measured against the group's quota and limit, not the
// host's. Disk and load averages are the host's; PSI is the group's own.
type CgroupSource struct {
	name string
	host *hostReader
	cg   *cgroupReader
}

// NewCgroupSource samples the cgroup v2 directory dir, which must exist and
// have the memory controller enabled.
func NewCgroupSource(dir string, o Options) (*CgroupSource, error) {
	name := "cgroup:" + dir
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%s: path is not absolute", name)
	}
	h, err := newHostReader(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, f := range []struct{ file, why string }{
		{"cgroup.controllers", "not a cgroup v2 directory"},
		{"cpu.stat", "not a cgroup v2 directory"},
		{"memory.current", "memory controller not enabled for this group (or it is the root group: use -source host)"},
	} {
		if _, err := os.Stat(filepath.Join(dir, f.file)); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, f.why, err)
		}
	}
	return &CgroupSource{name: name, host: h, cg: &cgroupReader{dir: filepath.Clean(dir), proc: h.proc}}, nil
}

// Name returns "cgroup:PATH".
func (s *CgroupSource) Name() string { return s.name }

// Read reads the group's and the host's counters.
func (s *CgroupSource) Read() (Reading, error) {
	cg, err := s.cg.read(unix.Gettid())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	host, err := s.host.read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return cgroupReading{name: s.name, host: host, cg: cg}, nil
}

type cgroupReading struct {
	name string
	host hostCounters
	cg   cgroupCounters
}

func (cur cgroupReading) Report(prev Reading) (Report, error) {
	p, ok := prev.(cgroupReading)
	if !ok {
		return Report{}, errNoBaseline
	}
	r, err := cgroupReport(cur.name, p.host, cur.host, p.cg, cur.cg)
	if err != nil {
		return Report{}, fmt.Errorf("%s: %w", cur.name, err)
	}
	return r, nil
}
