package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lvs-feedback/agent"
	"lvs-feedback/history"
	"lvs-feedback/ipvs"
)

// readHistory returns every record in dir, failing on a skipped line.
func readHistory(t *testing.T, dir string) []history.Record {
	t.Helper()
	var recs []history.Record
	notes, err := history.Read(dir, history.Filter{}, func(r history.Record) { recs = append(recs, r) })
	if err != nil || len(notes) > 0 {
		t.Fatalf("read history: %v %v", err, notes)
	}
	return recs
}

// The history holds, for every configured server of every cycle, the
// figures of the cycle's report: real agents, real HTTP probes, the
// in-memory table's counters.
func TestHistoryRecordsRealCycles(t *testing.T) {
	agentAddr, _ := startAgent(t)
	rs1, _ := startBackend(t, "127.0.0.1:0")
	rs2, stopRS2 := startBackend(t, "127.0.0.1:0")
	dir := t.TempDir()
	cfg, err := ParseConfig("history.toml", []byte(fmt.Sprintf(`
interval = "2s"
agent_timeout = "1s"
probe_timeout = "1s"
state_dir = %q
[weight]
controller = "lvs"
[availability]
fall = 1
slow_start = "0s"
[[service]]
address = "192.0.2.1:80/tcp"
[service.probe]
type = "http"
[[service.server]]
address = %q
weight = 10
agent = %q
[[service.server]]
address = %q
weight = 10
agent = %q
`, dir, rs1, agentAddr, rs2, agentAddr)))
	must(t, err)
	table := ipvs.NewMem()
	svc := cfg.Services[0].Key
	must(t, table.AddService(svc, "wrr"))
	must(t, table.AddDestination(svc, rs1, 10))
	must(t, table.AddDestination(svc, rs2, 10))
	store, err := NewFileStore(dir)
	must(t, err)
	rec, err := OpenRecorder(dir, cfg.History, nil, nil)
	must(t, err)
	defer rec.Close()
	m, err := New(cfg, Deps{Table: table, Agents: NewHTTPAgentClient(), Prober: NetProber{}, Store: store, History: rec}, false)
	must(t, err)

	// Clones: a report lasts through the next cycle only (CycleReport).
	rep1 := cycle(t, m).Clone()
	must(t, table.AddConnections(svc, rs1, 30))
	must(t, table.AddConnections(svc, rs2, 10))
	must(t, table.SetActive(svc, rs1, 5, 7))
	rep2 := cycle(t, m).Clone()
	stopRS2()
	rep3 := cycle(t, m)
	rec.Flush()

	recs := readHistory(t, dir)
	if len(recs) != 6 {
		t.Fatalf("%d records, want 2 servers × 3 cycles", len(recs))
	}
	reps := []CycleReport{rep1, rep1, rep2, rep2, rep3, rep3}
	for i, r := range recs {
		d := reps[i].Dests[i%2]
		tr := d.Decision.Trace
		where := fmt.Sprintf("record %d (%s)", i, r.Server)
		if r.V != 1 || !r.Time.Equal(reps[i].Start) || r.Service != "192.0.2.1:80/tcp" || r.Server != d.Key.Dest.String() {
			t.Errorf("%s: v %d time %v service %s, want 1 %v 192.0.2.1:80/tcp", where, r.V, r.Time, r.Service, reps[i].Start)
		}
		if r.WeightBefore != d.Kernel || r.WeightTo != d.Decision.To || r.WeightAfter != d.KernelWeight || r.Wrote != d.Outcome.Wrote ||
			r.Write != d.Decision.Write || r.State != string(d.State) || r.Configured != 10 || r.Reason != d.Reason {
			t.Errorf("%s: weights %d→%d→%d wrote %v state %s, report %d→%d→%d %v %s", where,
				r.WeightBefore, r.WeightTo, r.WeightAfter, r.Wrote, r.State, d.Kernel, d.Decision.To, d.KernelWeight, d.Outcome.Wrote, d.State)
		}
		if r.Counter != d.Counter || r.ActiveConns != d.ActiveConns || r.InactiveConns != d.InactiveConns || r.Fails != tr.Fails || r.Passes != tr.Passes {
			t.Errorf("%s: counter %d active %d inactive %d fails %d passes %d, report %d %d %d %d %d", where,
				r.Counter, r.ActiveConns, r.InactiveConns, r.Fails, r.Passes, d.Counter, d.ActiveConns, d.InactiveConns, tr.Fails, tr.Passes)
		}
		if d.ProbeErr == nil && (r.ProbeSeconds == nil || *r.ProbeSeconds != d.ProbeRTT.Seconds() || *r.ProbeSeconds <= 0) {
			t.Errorf("%s: probe %v, report %v", where, r.ProbeSeconds, d.ProbeRTT)
		}
		if r.Agent == nil || r.Agent.CPU != d.Report.CPU || r.Agent.CPUUsed != d.CPU || r.Agent.Source != d.Report.Source || r.AgentSeconds != d.AgentDuration.Seconds() {
			t.Fatalf("%s: agent %+v, report %+v cpu used %v", where, r.Agent, d.Report, d.CPU)
		}
		if raw := r.Agent.Raw; raw.CPUs != d.Report.Raw.CPUs || raw.CPUs <= 0 || raw.RunnableTasks != d.Report.Raw.RunnableTasks {
			t.Errorf("%s: raw %+v, want the report's %+v", where, raw, d.Report.Raw)
		}
		if r.Load != nil {
			if *r.Load != tr.Load || r.Inputs == nil || r.Inputs.CPU != tr.Inputs.CPU || r.Inputs.Response != tr.Inputs.Response ||
				r.Formula == nil || r.Formula.Next != tr.Formula.Next || *r.CtrlAfter != tr.CtrlAfter {
				t.Errorf("%s: load %v inputs %+v formula %+v, report %v %+v %+v", where, *r.Load, r.Inputs, r.Formula, tr.Load, tr.Inputs, tr.Formula)
			}
		}
	}
	// Cycle 1: no earlier counter reading.
	for _, r := range recs[:2] {
		if r.NewConns != nil || r.Load == nil || r.Inputs.Input != 1 {
			t.Errorf("cycle 1 %s: new_conns %v load %v, want null and a load with neutral input 1", r.Server, r.NewConns, r.Load)
		}
	}
	// Cycle 2: the table's counters and connections, and the input they
	// give (30 and 10 against a mean of 20).
	if r := recs[2]; r.NewConns == nil || *r.NewConns != 30 || r.ActiveConns != 5 || r.InactiveConns != 7 || r.ActiveDelta != 5 || r.Inputs.Input != 1.5 {
		t.Errorf("cycle 2 %s: new %v active %d inactive %d Δ %d input %v, want 30 5 7 5 1.5", r.Server, r.NewConns, r.ActiveConns, r.InactiveConns, r.ActiveDelta, r.Inputs.Input)
	}
	if r := recs[3]; r.NewConns == nil || *r.NewConns != 10 || r.Inputs.Input != 0.5 {
		t.Errorf("cycle 2 %s: new %v input %v, want 10 0.5", r.Server, r.NewConns, r.Inputs.Input)
	}
	// Cycle 3: the stopped server is down at 0, written; no probe time, no
	// load.
	r := recs[5]
	if r.State != "down" || r.WeightAfter != 0 || !r.Wrote || r.ProbeSeconds != nil || r.ProbeError == "" || r.Load != nil || r.Inputs != nil || r.Fails != 1 || r.Reason == "" {
		t.Errorf("cycle 3 %s: %+v, want down at 0, written, probe error, no load", r.Server, r)
	}
}

// A dry run records nothing, even with a recorder.
func TestHistoryDryRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	m, _, _ := historyRig(t, dir, true)
	for range 3 {
		cycle(t, m)
	}
	m.deps.History.Flush()
	if fi, err := os.Stat(filepath.Join(dir, history.FileName)); err != nil || fi.Size() != 0 {
		t.Fatalf("history after a dry run: %v %v, want an empty file", fi, err)
	}
}

// A disk error is logged once until writing works again, counted for
// every cycle, and never fails a cycle. The error is the kernel's: the
// file is grown (sparse) to the largest size its file system allows, so
// every write fails with EFBIG. (The writer does not write through a
// link, so a link to /dev/full cannot stand for a full disk.)
func TestHistoryDiskErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, history.FileName)
	m, logs, metrics := historyRig(t, dir, false)
	growToLimit(t, path) // every write: file too large
	for range 3 {
		if _, err := m.Cycle(t.Context()); err != nil {
			t.Fatal(err)
		}
		m.deps.History.Flush()
	}
	if got := testutil.ToFloat64(metrics.historyErrors); got != 3 {
		t.Errorf("history_write_errors_total %v, want 3", got)
	}
	if n := strings.Count(logs.String(), "history: records not written"); n != 1 {
		t.Errorf("error logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "file too large") {
		t.Errorf("log does not say why:\n%s", logs)
	}
	must(t, os.Truncate(path, 0)) // room again
	cycle(t, m)
	m.deps.History.Flush()
	if !strings.Contains(logs.String(), "history: writing again") {
		t.Errorf("recovery not logged:\n%s", logs)
	}
	if recs := readHistory(t, dir); len(recs) != 2 {
		t.Errorf("%d records after recovery, want the cycle's 2", len(recs))
	}
	if got := testutil.ToFloat64(metrics.historyErrors); got != 3 {
		t.Errorf("history_write_errors_total %v after recovery, want 3", got)
	}
}

// growToLimit makes the file at path as large as its file system allows
// (sparse: no block is written), found by halving: a truncate past the
// limit fails with EFBIG.
func growToLimit(t *testing.T, path string) {
	t.Helper()
	lo, hi := int64(0), int64(math.MaxInt64) // lo fits, hi is past the limit or the limit itself
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if os.Truncate(path, mid) == nil {
			lo = mid
		} else {
			hi = mid
		}
	}
	if os.Truncate(path, hi) == nil {
		lo = hi
	}
	must(t, os.Truncate(path, lo))
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		_, err = f.Write([]byte("\n"))
		f.Close()
		if !errors.Is(err, syscall.EFBIG) {
			t.Fatalf("a write at %d bytes: %v, want EFBIG", lo, err)
		}
	}
}

// historyRig is a monitor of two servers with stub agents and probes and
// a recorder in dir, with its log and metrics.
func historyRig(t *testing.T, dir string, dryRun bool) (*Monitor, *bytes.Buffer, *Metrics) {
	t.Helper()
	cfg, err := ParseConfig("history.toml", []byte(fmt.Sprintf(`state_dir = %q
[[service]]
address = "192.0.2.1:80/tcp"
[[service.server]]
address = "10.0.0.1:80"
weight = 10
[[service.server]]
address = "10.0.0.2:80"
weight = 10
`, dir)))
	must(t, err)
	table := ipvs.NewMem()
	svc := cfg.Services[0].Key
	must(t, table.AddService(svc, "wrr"))
	must(t, table.AddDestination(svc, netip.MustParseAddrPort("10.0.0.1:80"), 10))
	must(t, table.AddDestination(svc, netip.MustParseAddrPort("10.0.0.2:80"), 10))
	agents := &stubAgents{reports: map[string]agent.Report{}}
	agents.set("10.0.0.1:9771", 0.5)
	agents.set("10.0.0.2:9771", 0.5)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	metrics := NewMetrics(prometheus.NewRegistry())
	rec, err := OpenRecorder(dir, cfg.History, log, metrics)
	must(t, err)
	t.Cleanup(func() { rec.Close() })
	store := NewReadOnlyFileStore(dir)
	if !dryRun {
		store.ReadOnly = false
	}
	m, err := New(cfg, Deps{Table: table, Agents: agents, Prober: &stubProber{}, Store: store, Logger: log, Metrics: metrics, History: rec}, dryRun)
	must(t, err)
	return m, &logs, metrics
}

// The history is on by default, bounded to 4 × 16 MiB, in the state
// directory lvsctl history reads by default.
func TestHistoryDefaults(t *testing.T) {
	cfg, err := ParseConfig("min.toml", []byte(minimal))
	must(t, err)
	if h := cfg.History; !h.Enabled || h.FileMiB != 16 || h.Files != 4 || h.Limits() != (history.Limits{MaxSize: 16 << 20, Files: 4}) {
		t.Errorf("default history %+v", h)
	}
	if cfg.StateDir != history.DefaultDir {
		t.Errorf("state_dir %q, history.DefaultDir %q: lvsctl history would look elsewhere", cfg.StateDir, history.DefaultDir)
	}
	off, err := ParseConfig("off.toml", []byte(minimal+"[history]\nenabled = false\n"))
	must(t, err)
	if off.History.Enabled {
		t.Error("enabled = false ignored")
	}
}

// The history's copy of the agent's raw figures has the same fields (the
// conversion in historyRecord compiles only then) and the same JSON form.
func TestHistoryAgentRawMatchesTheAgents(t *testing.T) {
	psi := 1.5
	raw := agent.Raw{PID: 7, WindowSeconds: 1, CPUs: 4, CPUBusy: 0.5, MemTotalBytes: 1 << 30, MemAvailableBytes: 1 << 29,
		DiskSpaceUsed: map[string]float64{"/": 0.4}, DiskIOBusy: 0.2, DiskIODevice: "vda", RunnableTasks: 3,
		Load1: 1, Load5: 2, Load15: 3, PSICPUSome10: &psi, PSIMemorySome10: &psi, PSIIOSome10: &psi}
	want, err := json.Marshal(raw)
	must(t, err)
	got, err := json.Marshal(history.AgentRaw(raw))
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Errorf("history.AgentRaw encodes as\n%s\nagent.Raw as\n%s", got, want)
	}
}

// The recorder's builder reuses its memory from cycle to cycle: a record
// after a cycle that had more figures, or another destination in its
// place, holds exactly what a record built afresh does, nothing left
// over.
func TestHistoryBuilderReuse(t *testing.T) {
	m, _, _ := historyRig(t, t.TempDir(), false)
	full := cycle(t, m)
	if len(full.Dests) != 2 || full.Dests[0].Decision.Trace.Formula == nil && full.Dests[0].Decision.Trace.Capacity == nil {
		t.Fatalf("the rig's cycle: %d destinations, want 2 with a controller step", len(full.Dests))
	}
	bare := full
	bare.Dests = append([]DestStatus(nil), full.Dests...)
	bare.Start = full.Start.Add(time.Second)
	for i := range bare.Dests {
		d := &bare.Dests[i]
		d.Polled, d.NewConns, d.Probed = false, -1, false
		d.Decision.Trace.Load, d.Decision.Trace.CtrlBefore, d.Decision.Trace.CtrlAfter = math.NaN(), math.NaN(), math.NaN()
		d.Decision.Trace.Capacity, d.Decision.Trace.Formula, d.Decision.Trace.Compare, d.Decision.Trace.Guard = nil, nil, nil, nil
	}
	// Another destination in a place: its own names, not the last one's.
	swapped := full
	swapped.Dests = []DestStatus{full.Dests[1], full.Dests[0]}
	var b recordBuilder
	for _, rep := range []CycleReport{full, bare, full, swapped, {Start: full.Start}, full} {
		got := b.records(rep)
		for i := range rep.Dests {
			want := historyRecord(rep, &rep.Dests[i])
			if !reflect.DeepEqual(got[i], want) {
				t.Errorf("record %d of the cycle at %v:\n%+v\nwant\n%+v", i, rep.Start, got[i], want)
			}
		}
	}
	if got := b.records(bare); got[0].Agent != nil || got[0].NewConns != nil || got[0].Load != nil || got[0].Formula != nil {
		t.Errorf("bare record after a full one: %+v", got[0])
	}
}
