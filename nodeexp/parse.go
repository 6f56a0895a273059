package nodeexp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MaxExpositionBytes bounds one scrape. node_exporter with the collectors
// docs/node-exporter.md recommends answers about 20 KB on a 2-CPU server
// (about 0.6 KB more per CPU); with every default collector, 58 KB. A larger
// answer is refused rather than parsed: the parser holds the whole
// exposition in memory, and up to `concurrency` polls run at once.
const MaxExpositionBytes = 1 << 20

// The metric families a Snapshot is made of, as node_exporter names them.
const (
	famCPU          = "node_cpu_seconds_total"          // counter {cpu, mode}: cpu collector
	famMemTotal     = "node_memory_MemTotal_bytes"      // gauge: meminfo
	famMemAvailable = "node_memory_MemAvailable_bytes"  // gauge: meminfo
	famProcsRunning = "node_procs_running"              // gauge: stat
	famBootTime     = "node_boot_time_seconds"          // gauge: stat
	famDiskIOTime   = "node_disk_io_time_seconds_total" // counter {device}: diskstats
	famFSSize       = "node_filesystem_size_bytes"      // gauge {device, fstype, mountpoint}: filesystem
	famFSFree       = "node_filesystem_free_bytes"
	famFSAvail      = "node_filesystem_avail_bytes"
	famLoad1        = "node_load1" // gauges: loadavg (optional)
	famLoad5        = "node_load5"
	famLoad15       = "node_load15"
	famCollectorOK  = "node_scrape_collector_success" // gauge {collector}: to name a failed collector
)

// pressureFamilies are the PSI "some" counters (pressure collector,
// optional: kernels without PSI have none), by resource.
var pressureFamilies = map[string]string{
	"cpu":    "node_pressure_cpu_waiting_seconds_total",
	"memory": "node_pressure_memory_waiting_seconds_total",
	"io":     "node_pressure_io_waiting_seconds_total",
}

// Snapshot is one scrape of one server: the figures the loads are derived
// from, as node_exporter reported them (seconds and bytes).
type Snapshot struct {
	// Target is the URL scraped and At when the reply was read (the
	// director's clock); Poll sets them. A baseline from another target
	// is never compared with.
	Target string
	At     time.Time

	// CPU holds node_cpu_seconds_total: cpu label → mode → seconds.
	CPU          map[string]map[string]float64
	MemTotal     float64 // bytes
	MemAvailable float64 // bytes
	ProcsRunning float64 // runnable tasks, node_exporter's own reader included
	BootTime     float64 // Unix seconds
	// DiskIOTime holds node_disk_io_time_seconds_total: device → seconds
	// with I/O in flight.
	DiskIOTime map[string]float64
	// Filesystems holds the filesystem collector's figures by mount point.
	Filesystems map[string]Filesystem
	// Load is node_load1, 5 and 15; nil without the loadavg collector.
	Load *[3]float64
	// Pressure holds the PSI "some" totals in seconds by resource (cpu,
	// memory, io); absent where the kernel or the collector has none.
	Pressure map[string]float64
}

// Filesystem is one mount point's sizes, in bytes.
type Filesystem struct {
	Size, Free, Avail float64
}

// family is one metric family looked up for a Snapshot.
type family struct {
	name string
	mf   *dto.MetricFamily
}

// Parse reads one exposition in the Prometheus text format and checks it:
// at most MaxExpositionBytes; valid text format (expfmt's parser);
// node_cpu_seconds_total, node_memory_MemTotal_bytes and
// node_memory_MemAvailable_bytes, node_procs_running,
// node_boot_time_seconds, node_disk_io_time_seconds_total and the
// filesystem sizes present with the type node_exporter gives them, each
// value finite and ≥ 0, and no series twice. Families it does not use are
// parsed and otherwise ignored. A missing family names the collector to
// enable, and says when node_exporter reported that collector failing.
func Parse(r io.Reader) (Snapshot, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxExpositionBytes+1))
	if err != nil {
		return Snapshot{}, fmt.Errorf("read exposition: %w", err)
	}
	if len(b) > MaxExpositionBytes {
		return Snapshot{}, fmt.Errorf("exposition larger than %d bytes", MaxExpositionBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return Snapshot{}, errors.New("empty exposition")
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse exposition: %w", err)
	}
	return snapshot(fams)
}

// snapshot extracts and checks the families a Snapshot needs.
func snapshot(fams map[string]*dto.MetricFamily) (Snapshot, error) {
	need := func(name, collector string, typ dto.MetricType) (family, error) {
		mf, ok := fams[name]
		if !ok {
			msg := fmt.Sprintf("no %s in the exposition: enable node_exporter's %s collector", name, collector)
			if failed(fams, collector) {
				msg = fmt.Sprintf("no %s in the exposition: node_exporter's %s collector failed on the server", name, collector)
			}
			return family{}, errors.New(msg)
		}
		return typed(name, mf, typ)
	}
	var s Snapshot
	cpu, err := need(famCPU, "cpu", dto.MetricType_COUNTER)
	if err != nil {
		return Snapshot{}, err
	}
	if s.CPU, err = cpuSeconds(cpu); err != nil {
		return Snapshot{}, err
	}
	for _, g := range []struct {
		name, collector string
		dst             *float64
	}{
		{famMemTotal, "meminfo", &s.MemTotal}, {famMemAvailable, "meminfo", &s.MemAvailable},
		{famProcsRunning, "stat", &s.ProcsRunning}, {famBootTime, "stat", &s.BootTime},
	} {
		f, err := need(g.name, g.collector, dto.MetricType_GAUGE)
		if err != nil {
			return Snapshot{}, err
		}
		if *g.dst, err = single(f); err != nil {
			return Snapshot{}, err
		}
	}
	if s.MemTotal == 0 {
		return Snapshot{}, fmt.Errorf("%s is 0", famMemTotal)
	}
	disk, err := need(famDiskIOTime, "diskstats", dto.MetricType_COUNTER)
	if err != nil {
		return Snapshot{}, err
	}
	if s.DiskIOTime, err = byLabel(disk, "device"); err != nil {
		return Snapshot{}, err
	}
	if s.Filesystems, err = filesystems(need); err != nil {
		return Snapshot{}, err
	}
	if s.Load, err = loadAverages(fams); err != nil {
		return Snapshot{}, err
	}
	for res, name := range pressureFamilies {
		mf, ok := fams[name]
		if !ok {
			continue
		}
		f, err := typed(name, mf, dto.MetricType_COUNTER)
		if err != nil {
			return Snapshot{}, err
		}
		v, err := single(f)
		if err != nil {
			return Snapshot{}, err
		}
		if s.Pressure == nil {
			s.Pressure = map[string]float64{}
		}
		s.Pressure[res] = v
	}
	return s, nil
}

// failed reports whether node_exporter said collector failed in this
// scrape (node_scrape_collector_success{collector=…} 0).
func failed(fams map[string]*dto.MetricFamily, collector string) bool {
	for _, m := range fams[famCollectorOK].GetMetric() {
		if label(m, "collector") == collector && m.GetGauge().GetValue() == 0 {
			return true
		}
	}
	return false
}

// typed checks that mf has type typ.
func typed(name string, mf *dto.MetricFamily, typ dto.MetricType) (family, error) {
	if mf.GetType() != typ {
		return family{}, fmt.Errorf("%s is a %s, want a %s", name, strings.ToLower(mf.GetType().String()), strings.ToLower(typ.String()))
	}
	return family{name: name, mf: mf}, nil
}

// value returns m's value, checked finite and ≥ 0.
func (f family) value(m *dto.Metric) (float64, error) {
	var v float64
	if f.mf.GetType() == dto.MetricType_COUNTER {
		v = m.GetCounter().GetValue()
	} else {
		v = m.GetGauge().GetValue()
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%s%s = %v, want a finite number ≥ 0", f.name, labelString(m), v)
	}
	return v, nil
}

// single returns the value of a family that must have exactly one series.
func single(f family) (float64, error) {
	if n := len(f.mf.GetMetric()); n != 1 {
		return 0, fmt.Errorf("%s has %d series, want 1", f.name, n)
	}
	return f.value(f.mf.GetMetric()[0])
}

// byLabel returns f's values by the value of one label, refusing a series
// without it and two series with the same value.
func byLabel(f family, key string) (map[string]float64, error) {
	out := make(map[string]float64, len(f.mf.GetMetric()))
	for _, m := range f.mf.GetMetric() {
		k := label(m, key)
		if k == "" {
			return nil, fmt.Errorf("%s%s has no %s label", f.name, labelString(m), key)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s has two series with %s=%s", f.name, key, clip(k))
		}
		v, err := f.value(m)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// cpuSeconds reads node_cpu_seconds_total into cpu → mode → seconds. Every
// CPU must report its idle time.
func cpuSeconds(f family) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for _, m := range f.mf.GetMetric() {
		cpu, mode := label(m, "cpu"), label(m, "mode")
		if cpu == "" || mode == "" {
			return nil, fmt.Errorf("%s%s: want cpu and mode labels", f.name, labelString(m))
		}
		v, err := f.value(m)
		if err != nil {
			return nil, err
		}
		modes := out[cpu]
		if modes == nil {
			modes = map[string]float64{}
			out[cpu] = modes
		}
		if _, dup := modes[mode]; dup {
			return nil, fmt.Errorf("%s has two series with cpu=%s, mode=%s", f.name, clip(cpu), clip(mode))
		}
		modes[mode] = v
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no series", f.name)
	}
	for cpu, modes := range out {
		if _, ok := modes["idle"]; !ok {
			return nil, fmt.Errorf("%s has no idle time for cpu %s", f.name, clip(cpu))
		}
	}
	return out, nil
}

// filesystems reads the filesystem collector's sizes by mount point. A
// mount point whose three sizes are not all reported (node_exporter skips
// them when statfs fails) is left out. Two devices mounted on one mount
// point (one over the other) are both kept, under "MOUNTPOINT (DEVICE)"
// for all but the first in device order, so that no reading is dropped.
func filesystems(need func(name, collector string, typ dto.MetricType) (family, error)) (map[string]Filesystem, error) {
	type key struct{ mountpoint, device string }
	var vals [3]map[key]float64
	for i, name := range []string{famFSSize, famFSFree, famFSAvail} {
		f, err := need(name, "filesystem", dto.MetricType_GAUGE)
		if err != nil {
			return nil, err
		}
		vals[i] = make(map[key]float64, len(f.mf.GetMetric()))
		for _, m := range f.mf.GetMetric() {
			k := key{label(m, "mountpoint"), label(m, "device")}
			if k.mountpoint == "" {
				return nil, fmt.Errorf("%s%s has no mountpoint label", name, labelString(m))
			}
			if _, dup := vals[i][k]; dup {
				return nil, fmt.Errorf("%s has two series with mountpoint=%s, device=%s", name, clip(k.mountpoint), clip(k.device))
			}
			if vals[i][k], err = f.value(m); err != nil {
				return nil, err
			}
		}
	}
	keys := make([]key, 0, len(vals[0]))
	for k := range vals[0] {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].mountpoint < keys[j].mountpoint || keys[i].mountpoint == keys[j].mountpoint && keys[i].device < keys[j].device
	})
	out := make(map[string]Filesystem, len(keys))
	for _, k := range keys {
		free, ok1 := vals[1][k]
		avail, ok2 := vals[2][k]
		if !ok1 || !ok2 {
			continue
		}
		name := k.mountpoint
		if _, taken := out[name]; taken {
			name = fmt.Sprintf("%s (%s)", k.mountpoint, k.device)
		}
		out[name] = Filesystem{Size: vals[0][k], Free: free, Avail: avail}
	}
	return out, nil
}

// loadAverages reads node_load1, 5 and 15: all three or none.
func loadAverages(fams map[string]*dto.MetricFamily) (*[3]float64, error) {
	var out [3]float64
	found := 0
	for i, name := range []string{famLoad1, famLoad5, famLoad15} {
		mf, ok := fams[name]
		if !ok {
			continue
		}
		f, err := typed(name, mf, dto.MetricType_GAUGE)
		if err != nil {
			return nil, err
		}
		if out[i], err = single(f); err != nil {
			return nil, err
		}
		found++
	}
	switch found {
	case 0:
		return nil, nil
	case 3:
		return &out, nil
	}
	return nil, fmt.Errorf("%d of node_load1, node_load5 and node_load15 present, want all or none", found)
}

// label returns the value of m's label name, "" if absent.
func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// labelString renders m's labels for an error message, sorted.
func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		parts = append(parts, lp.GetName()+"="+clip(lp.GetValue()))
	}
	sort.Strings(parts)
	if len(parts) > maxLabels {
		parts = append(parts[:maxLabels], "…")
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// maxQuoted is how much of a label value an error message quotes: a
// hostile exposition may carry megabyte-long values, which must not reach
// the log whole.
const maxQuoted = 64

// maxLabels is how many of a series' labels an error message shows.
const maxLabels = 4

// clip quotes v for an error message, cut to maxQuoted bytes.
func clip(v string) string {
	if len(v) > maxQuoted {
		return strconv.Quote(strings.ToValidUTF8(v[:maxQuoted], "")) + "…"
	}
	return strconv.Quote(v)
}
