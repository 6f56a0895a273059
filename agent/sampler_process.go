package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// userHZ is the unit of the tick counters in /proc/PID/stat. It is 100 on
// every Linux platform Go supports (procfs makes the same assumption).
const userHZ = 100

// procKey names one process over time: a PID alone can be reused.
type procKey struct {
	pid   int
	start uint64 // start time, ticks since boot
}

// treeCounters is one reading of a process tree.
type treeCounters struct {
	pid       int                // the tree's root
	rootStart uint64             // the root's start time, ticks since boot
	uptime    float64            // seconds since boot, read before the tree
	ticks     map[procKey]uint64 // utime+stime of each process (all its threads)
	rssBytes  uint64             // summed resident set size
	runnable  int                // threads in state R, the reader excluded
}

// treeReader reads process trees from a procfs root.
type treeReader struct {
	proc procfs.FS
	root string
}

// errExited marks a process that is gone (or a zombie).
var errExited = errors.New("process has exited")

// read reads the tree rooted at pid: pid and every descendant (found by
// scanning the PPIDs of all processes). selfTID, the reading thread, is not
// counted as runnable.
func (t *treeReader) read(pid, selfTID int) (treeCounters, error) {
	c := treeCounters{pid: pid, ticks: map[procKey]uint64{}}
	up, err := readUptime(t.root)
	if err != nil {
		return c, err
	}
	c.uptime = up
	rootStat, err := t.stat(pid)
	if err != nil {
		return c, err
	}
	c.rootStart = rootStat.Starttime
	tree := []procfs.ProcStat{rootStat}
	all, err := t.proc.AllProcs()
	if err != nil {
		return c, fmt.Errorf("list processes: %w", err)
	}
	children := map[int][]procfs.ProcStat{}
	for _, p := range all {
		if p.PID == pid {
			continue
		}
		st, err := p.Stat()
		if err != nil {
			continue // exited while we scanned
		}
		children[st.PPID] = append(children[st.PPID], st)
	}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i].PID]...)
	}
	for i, st := range tree {
		c.ticks[procKey{st.PID, st.Starttime}] = uint64(st.UTime) + uint64(st.STime)
		c.rssBytes += uint64(max(st.ResidentMemory(), 0))
		threads, err := t.proc.AllThreads(st.PID)
		if err != nil {
			if i == 0 {
				return c, fmt.Errorf("%w (PID %d): %w", errExited, pid, err)
			}
			continue
		}
		for _, th := range threads {
			if th.PID == selfTID {
				continue
			}
			ts, err := th.Stat()
			if err == nil && ts.State == "R" {
				c.runnable++
			}
		}
	}
	return c, nil
}

// stat reads /proc/PID/stat of a live process.
func (t *treeReader) stat(pid int) (procfs.ProcStat, error) {
	p, err := t.proc.Proc(pid)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return procfs.ProcStat{}, fmt.Errorf("%w (PID %d)", errExited, pid)
		}
		return procfs.ProcStat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	st, err := p.Stat()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return procfs.ProcStat{}, fmt.Errorf("%w (PID %d)", errExited, pid)
		}
		return procfs.ProcStat{}, fmt.Errorf("process %d: read stat: %w", pid, err)
	}
	if st.State == "Z" || st.State == "X" {
		return procfs.ProcStat{}, fmt.Errorf("%w (PID %d, state %s)", errExited, pid, st.State)
	}
	return st, nil
}

// readUptime returns the first field of /proc/uptime in seconds.
func readUptime(procRoot string) (float64, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "uptime"))
	if err != nil {
		return 0, fmt.Errorf("read /proc/uptime: %w", err)
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, errors.New("read /proc/uptime: empty")
	}
	up, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil {
		return 0, fmt.Errorf("read /proc/uptime: %w", err)
	}
	return up, nil
}

// treeCPUSeconds is the CPU time the tree used between two readings. A
// process present in both contributes its delta; one that appeared and
// started after prev was read contributes all its time; one that exited
// during the window loses its last partial window (its time moves to the
// parent's cutime, which is not counted, to avoid counting it twice).
func treeCPUSeconds(prev, cur treeCounters) float64 {
	var ticks uint64
	for k, c := range cur.ticks {
		if p, ok := prev.ticks[k]; ok {
			if c >= p {
				ticks += c - p
			}
			continue
		}
		if float64(k.start)/userHZ >= prev.uptime {
			ticks += c
		}
	}
	return float64(ticks) / userHZ
}

// processReport turns two process-tree readings (with the host readings
// taken at the same time) into a Report.
func processReport(name string, prevHost, curHost hostCounters, prev, cur treeCounters) (Report, error) {
	r := Report{Source: name}
	w, err := hostShared(&r, prevHost, curHost)
	if err != nil {
		return Report{}, err
	}
	cpus := float64(curHost.cpus)
	r.CPU = treeCPUSeconds(prev, cur) / (w.Seconds() * cpus)
	r.Raw.CPUBusy, r.Raw.CPUs = r.CPU, cpus
	if curHost.memTotal == 0 {
		return Report{}, errors.New("memory total is 0")
	}
	r.Memory = float64(cur.rssBytes) / float64(curHost.memTotal)
	r.Raw.MemTotalBytes, r.Raw.MemAvailableBytes = curHost.memTotal, curHost.memAvailable
	r.Raw.RunnableTasks = cur.runnable
	r.Processes = float64(cur.runnable) / cpus
	r.Raw.PID = cur.pid
	return finish(r)
}

// ProcessSource samples one process and its descendants. Use it when several
// services share a host (the demo runs one per "server"), or to follow one
// daemon. CPU, memory and runnable threads are the tree's; disk, load
// averages and PSI are the host's.
type ProcessSource struct {
	name    string
	host    *hostReader
	tree    *treeReader
	pid     int    // fixed PID (process:), 0 with a pidfile
	start   uint64 // the fixed PID's start time, to notice PID reuse
	pidfile string
}

// NewProcessSource follows process pid, which must exist now. If it exits,
// every later Read fails, even if the PID is reused.
func NewProcessSource(pid int, o Options) (*ProcessSource, error) {
	s, err := newProcessSource(fmt.Sprintf("process:%d", pid), o)
	if err != nil {
		return nil, err
	}
	st, err := s.tree.stat(pid)
	if errors.Is(err, errExited) {
		return nil, fmt.Errorf("%s: no such process", s.name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	s.pid, s.start = pid, st.Starttime
	return s, nil
}

// NewPidfileSource follows the process whose PID is in the file at path,
// re-read at every sample so a restarted service is followed. The file need
// not exist yet: until it does, Read fails.
func NewPidfileSource(path string, o Options) (*ProcessSource, error) {
	if path == "" {
		return nil, errors.New("pidfile source: empty path")
	}
	s, err := newProcessSource("pidfile:"+path, o)
	if err != nil {
		return nil, err
	}
	s.pidfile = path
	return s, nil
}

func newProcessSource(name string, o Options) (*ProcessSource, error) {
	h, err := newHostReader(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	o, _ = o.withDefaults()
	return &ProcessSource{name: name, host: h, tree: &treeReader{proc: h.proc, root: o.ProcRoot}}, nil
}

// Name returns "process:PID" or "pidfile:PATH".
func (s *ProcessSource) Name() string { return s.name }

// Read reads the process tree and the host counters.
func (s *ProcessSource) Read() (Reading, error) {
	pid := s.pid
	if s.pidfile != "" {
		var err error
		if pid, err = readPidfile(s.pidfile); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	tree, err := s.tree.read(pid, unix.Gettid())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if s.pidfile == "" && tree.rootStart != s.start {
		return nil, fmt.Errorf("%s: %w (PID now reused by another process)", s.name, errExited)
	}
	host, err := s.host.read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return processReading{name: s.name, host: host, tree: tree}, nil
}

// readPidfile reads a PID from a small file.
func readPidfile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read pidfile: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("read pidfile: %w", err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pidfile %s: %q is not a PID", path, bytes.TrimSpace(b))
	}
	return pid, nil
}

type processReading struct {
	name string
	host hostCounters
	tree treeCounters
}

func (cur processReading) Report(prev Reading) (Report, error) {
	p, ok := prev.(processReading)
	if !ok {
		return Report{}, errNoBaseline
	}
	r, err := processReport(cur.name, p.host, cur.host, p.tree, cur.tree)
	if err != nil {
		return Report{}, fmt.Errorf("%s: %w", cur.name, err)
	}
	return r, nil
}
