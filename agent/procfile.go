package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// The host source's /proc files (stat, meminfo, loadavg, pressure/*) are
// read here rather than through procfs: a sample is one read of each, and
// its cost is most of the agent's CPU. procfs opens each file with os.Open,
// which first offers the descriptor to the runtime's poller (a failing
// epoll_ctl per file), and parses every field of every line into new
// memory — all of /proc/meminfo and the interrupt counts of /proc/stat —
// where the agent uses a dozen figures. The files are the kernel's
// (proc(5)); the figures and units are procfs's (CPU times in seconds at
// USER_HZ 100, memory in bytes).

// maxProcFile bounds what one read of a /proc file keeps: these files are
// a few KiB (/proc/stat grows with CPUs and interrupts: about 20 KiB at
// 256 CPUs).
const maxProcFile = 1 << 20

// procFile reads small /proc files into one buffer it keeps; what read
// returns is valid until its next call.
type procFile struct{ buf []byte }

func (p *procFile) read(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if p.buf == nil {
		p.buf = make([]byte, 0, 8<<10)
	}
	b := p.buf[:0]
	for {
		if len(b) > maxProcFile {
			return nil, fmt.Errorf("read %s: more than %d bytes", path, maxProcFile)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
	}
	p.buf = b
	return b, nil
}

// nextLine cuts data's first line off.
func nextLine(data []byte) (line, rest []byte) {
	line, rest, _ = bytes.Cut(data, []byte{'\n'})
	return line, rest
}

// parseStat returns /proc/stat's total CPU times, its number of per-CPU
// lines and procs_running. The total's first four times (user, nice,
// system, idle) are required, the others (iowait and later) are 0 where an
// old kernel does not write them.
func parseStat(data []byte) (cpu procfs.CPUStat, cpus int, running uint64, err error) {
	total, hasRunning := false, false
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		switch {
		case bytes.HasPrefix(line, []byte("cpu ")):
			f := bytes.Fields(line[4:])
			if len(f) < 4 {
				return cpu, 0, 0, fmt.Errorf("line %d: %d CPU times, want at least 4", n, len(f))
			}
			dst := []*float64{&cpu.User, &cpu.Nice, &cpu.System, &cpu.Idle, &cpu.Iowait, &cpu.IRQ, &cpu.SoftIRQ, &cpu.Steal, &cpu.Guest, &cpu.GuestNice}
			for i := 0; i < len(f) && i < len(dst); i++ {
				v, err := strconv.ParseUint(string(f[i]), 10, 64)
				if err != nil {
					return cpu, 0, 0, fmt.Errorf("line %d: CPU time %q: %w", n, f[i], err)
				}
				*dst[i] = float64(v) / userHZ
			}
			total = true
		case len(line) > 3 && bytes.HasPrefix(line, []byte("cpu")) && line[3] >= '0' && line[3] <= '9':
			cpus++
		case bytes.HasPrefix(line, []byte("procs_running ")):
			v, err := strconv.ParseUint(string(bytes.TrimSpace(line[len("procs_running "):])), 10, 64)
			if err != nil {
				return cpu, 0, 0, fmt.Errorf("line %d: procs_running: %w", n, err)
			}
			running, hasRunning = v, true
		}
	}
	switch {
	case !total:
		return cpu, 0, 0, errors.New("no cpu line")
	case !hasRunning:
		return cpu, 0, 0, errors.New("no procs_running line")
	}
	return cpu, cpus, running, nil
}

// parseMeminfo returns /proc/meminfo's MemTotal and MemAvailable in bytes;
// ok is false when either is missing (kernels before 3.14 have no
// MemAvailable).
func parseMeminfo(data []byte) (total, available uint64, ok bool, err error) {
	hasTotal, hasAvail := false, false
	for n := 1; len(data) > 0 && !(hasTotal && hasAvail); n++ {
		var line []byte
		line, data = nextLine(data)
		var dst *uint64
		switch {
		case bytes.HasPrefix(line, []byte("MemTotal:")):
			dst, hasTotal = &total, true
		case bytes.HasPrefix(line, []byte("MemAvailable:")):
			dst, hasAvail = &available, true
		default:
			continue
		}
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[2]) != "kB" {
			return 0, 0, false, fmt.Errorf("line %d: %q, want NAME: VALUE kB", n, line)
		}
		v, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil || v > 1<<53 {
			return 0, 0, false, fmt.Errorf("line %d: %s %q: not a size in kB", n, f[0], f[1])
		}
		*dst = v * 1024
	}
	return total, available, hasTotal && hasAvail, nil
}

// parseLoadavg returns /proc/loadavg's three load averages.
func parseLoadavg(data []byte) (procfs.LoadAvg, error) {
	f := bytes.Fields(data)
	if len(f) < 3 {
		return procfs.LoadAvg{}, fmt.Errorf("%q: want three load averages", data)
	}
	var la procfs.LoadAvg
	for i, dst := range []*float64{&la.Load1, &la.Load5, &la.Load15} {
		v, err := strconv.ParseFloat(string(f[i]), 64)
		if err != nil {
			return procfs.LoadAvg{}, fmt.Errorf("load average %q: %w", f[i], err)
		}
		*dst = v
	}
	return la, nil
}
