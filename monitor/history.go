package monitor

import (
	"fmt"
	"log/slog"
	"math"
	"sync"

	"lvs-feedback/history"
	"lvs-feedback/policy"
)

// HistoryConfig is the [history] section: the cycle history, one record
// per configured server per cycle in the state directory (docs/history.md).
type HistoryConfig struct {
	Enabled bool `toml:"enabled"`
	FileMiB int  `toml:"file_mib"` // size of one file, MiB
	Files   int  `toml:"files"`    // files kept, the current one included
}

// Limits are the writer's bounds for c.
func (c HistoryConfig) Limits() history.Limits {
	return history.Limits{MaxSize: int64(c.FileMiB) << 20, Files: c.Files}
}

// defaultHistory is on, with 4 files of 16 MiB: at most 64 MiB, about 11
// hours of a director with 10 servers at a 5 s interval (docs/history.md).
func defaultHistory() HistoryConfig { return HistoryConfig{Enabled: true, FileMiB: 16, Files: 4} }

// check checks the [history] section.
func (c HistoryConfig) check(bad func(key, format string, a ...any)) {
	if c.FileMiB < 1 || c.FileMiB > 1024 {
		bad("history.file_mib", "must be from 1 to 1024 (MiB per file), got %d", c.FileMiB)
	}
	if c.Files < 2 || c.Files > 100 {
		bad("history.files", "must be from 2 (the current file and one rotated) to 100, got %d", c.Files)
	}
}

// historyQueue is how many cycles may wait for the recorder; a cycle
// finding the queue full is not recorded (counted), so that a slow disk
// never holds up the cycle.
const historyQueue = 4

// Recorder writes each cycle's report to the history, on a goroutine of
// its own: the cycle only hands its report over (the report is not
// changed after the cycle, so the goroutine reads it as it is). Disk
// errors are logged once until writing works again, counted in
// lvs_monitor_history_write_errors_total, and never stop a cycle. Create
// it with OpenRecorder, pass it in Deps.History, Close it after Run.
type Recorder struct {
	w       *history.Writer
	log     *slog.Logger
	metrics *Metrics
	queue   chan historyItem
	done    chan struct{}
	failing bool // the last write failed (and was logged)

	closeOnce sync.Once
}

// historyItem is a report to record, or (flushed set) a request to say
// when everything queued before it is written.
type historyItem struct {
	rep     CycleReport
	flushed chan struct{}
}

// OpenRecorder opens the history in dir with c's bounds and starts its
// goroutine. log and metrics may be nil.
func OpenRecorder(dir string, c HistoryConfig, log *slog.Logger, metrics *Metrics) (*Recorder, error) {
	w, err := history.Open(dir, c.Limits())
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{w: w, log: log, metrics: metrics, queue: make(chan historyItem, historyQueue), done: make(chan struct{})}
	go r.run()
	return r, nil
}

// Path is the current history file.
func (r *Recorder) Path() string { return r.w.Path() }

func (r *Recorder) run() {
	defer close(r.done)
	var recs []history.Record
	for it := range r.queue {
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		recs = historyRecords(it.rep, recs[:0])
		err := r.w.Write(recs)
		switch {
		case err != nil:
			r.metrics.historyError()
			if !r.failing {
				r.log.Error("history: records not written (logged once until writing works again; lvs_monitor_history_write_errors_total counts them)",
					"file", r.w.Path(), "error", err)
			}
			r.failing = true
		case r.failing:
			r.log.Info("history: writing again", "file", r.w.Path())
			r.failing = false
		}
	}
}

// record hands rep to the goroutine; when the queue is full, the cycle
// goes unrecorded. A nil Recorder records nothing.
func (r *Recorder) record(rep CycleReport) {
	if r == nil {
		return
	}
	select {
	case r.queue <- historyItem{rep: rep}:
	default:
		r.metrics.historyDropped()
	}
}

// Flush waits until every report handed over before it is written. Not
// after Close.
func (r *Recorder) Flush() {
	done := make(chan struct{})
	r.queue <- historyItem{flushed: done}
	<-done
}

// Close writes what is queued, stops the goroutine and closes the file.
// No cycle may run after it.
func (r *Recorder) Close() error {
	var err error
	r.closeOnce.Do(func() {
		close(r.queue)
		<-r.done
		err = r.w.Close()
	})
	return err
}

// recordHistory hands the cycle's report to the recorder; a dry run
// records nothing.
func (m *Monitor) recordHistory(rep CycleReport) {
	if !m.dryRun {
		m.deps.History.record(rep)
	}
}

// historyRecords appends the records of rep's destinations to out: every
// figure as the cycle's report holds it, none recomputed.
func historyRecords(rep CycleReport, out []history.Record) []history.Record {
	for i := range rep.Dests {
		out = append(out, historyRecord(rep, &rep.Dests[i]))
	}
	return out
}

func historyRecord(rep CycleReport, d *DestStatus) history.Record {
	dec, tr := &d.Decision, &d.Decision.Trace
	r := history.Record{
		V: history.SchemaVersion, Time: rep.Start.UTC(),
		Service: d.Key.Service.String(), Server: d.Key.Dest.String(),
		State: string(d.State), Configured: d.Configured, DefaultWeight: d.DefaultWeight,
		WeightBefore: d.Kernel, WeightTo: dec.To, WeightAfter: d.KernelWeight,
		Write: dec.Write, Wrote: d.Outcome.Wrote, WriteError: errText(d.Outcome.Err), Reason: d.Reason,

		Counter: d.Counter, ActiveConns: d.ActiveConns, InactiveConns: d.InactiveConns, ActiveDelta: d.ActiveDelta,
		ProbeError: errText(d.ProbeErr), ProbeTimedOut: d.ProbeTimedOut, Fails: tr.Fails, Passes: tr.Passes,

		Polled: d.Polled, AgentError: errText(d.AgentErr), AgentStale: d.AgentStale, AgentSeconds: d.AgentDuration.Seconds(),

		Load: finite(tr.Load), DirectorOnly: tr.DirectorOnly, Ramp: tr.Ramp, Frozen: tr.Frozen,
		CtrlBefore: finite(tr.CtrlBefore), CtrlAfter: finite(tr.CtrlAfter),
	}
	if d.NewConns >= 0 {
		r.NewConns = new(d.NewConns)
	}
	if d.Probed && d.ProbeErr == nil {
		r.ProbeSeconds = new(d.ProbeRTT.Seconds())
	}
	if d.Polled && d.AgentErr == nil {
		rp := &d.Report
		a := &history.Agent{Source: rp.Source, Time: rp.Time.UTC(), CPU: rp.CPU, Memory: rp.Memory, Disk: rp.Disk, Processes: rp.Processes,
			CPUUsed: d.CPU, CPUSpan: d.CPUSpan}
		a.Raw = history.AgentRaw(rp.Raw)
		r.Agent = a
	}
	if !math.IsNaN(tr.Load) {
		in := tr.Inputs
		r.Inputs = &history.Inputs{Input: in.Input, CPU: in.CPU, Memory: in.Memory, Disk: in.Disk, Response: in.Response, Process: in.Process}
	}
	if c := tr.Capacity; c != nil {
		r.Capacity = &history.Capacity{Weight: c.Weight, Factor: finite(c.Factor), SaturatedAlone: c.SaturatedAlone, BacklogCut: c.BacklogCut, CPU: c.CPU, Busy: c.Busy, Bottleneck: c.Bottleneck, Estimate: c.Estimate, Error: c.Error, Rule: c.Rule}
		if c.Driver != "" {
			r.Capacity.Reading, r.Capacity.Driver = c.Reading, c.Driver
		}
	}
	if f := tr.Formula; f != nil {
		r.Formula = &history.Formula{Before: f.Before, Load: finite(f.Load), Step: finite(f.Step), Raw: finite(f.Raw),
			Min: f.Min, Max: f.Max, After: finite(f.After), Ramp: f.Ramp, Next: f.Next}
	}
	if c := tr.Compare; c != nil {
		r.Compare = &history.Compare{Next: c.Next, Rule: c.Rule, Passes: c.Passes, Overrule: c.Overrule}
	}
	if g := tr.Guard; g != nil {
		r.Guard = &history.Guard{Event: guardEventName(g.Event), Held: g.Held, From: g.From, Raised: g.Raised,
			Ratio: finite(g.Ratio), Median: finite(g.Median), Active: g.Active, Restore: g.Restore, Controller: g.Controller}
	}
	return r
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// finite is v, or nil when JSON cannot hold it (NaN: not computed).
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// guardEventName is the history's name of a guard event.
func guardEventName(e policy.GuardEvent) string {
	switch e {
	case policy.GuardNone:
		return ""
	case policy.GuardCutNow:
		return "cut"
	case policy.GuardRaiseNow:
		return "raise"
	case policy.GuardKept:
		return "kept"
	case policy.GuardReleased:
		return "released"
	case policy.GuardDropped:
		return "dropped"
	case policy.GuardSink:
		return "sink"
	case policy.GuardReset:
		return "reset"
	case policy.GuardUnanswered:
		return "unanswered"
	}
	return fmt.Sprintf("event %d", e)
}
