package monitor

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

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
// changed until the recorder gives it back, so the goroutine reads it as
// it is). Once a report is written — or failed to be — the recorder gives
// its entries back (spare): it never reads them again, and the monitor
// fills them in a later cycle instead of allocating new ones. Disk
// errors are logged once until writing works again, counted in
// lvs_monitor_history_write_errors_total, and never stop a cycle. Create
// it with OpenRecorder, pass it in Deps.History, Close it after Run.
type Recorder struct {
	w       *history.Writer
	log     *slog.Logger
	metrics *Metrics
	queue   chan historyItem
	// written holds the entries of reports written, oldest first, for
	// the monitor to take (spare); one that finds it full is left to the
	// collector.
	written chan []DestStatus
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
	r := &Recorder{w: w, log: log, metrics: metrics, queue: make(chan historyItem, historyQueue),
		written: make(chan []DestStatus, historyQueue+1), done: make(chan struct{})}
	go r.run()
	return r, nil
}

// Path is the current history file.
func (r *Recorder) Path() string { return r.w.Path() }

func (r *Recorder) run() {
	defer close(r.done)
	var b recordBuilder
	for it := range r.queue {
		if it.flushed != nil {
			close(it.flushed)
			continue
		}
		err := r.w.Write(b.records(it.rep))
		// The records are encoded: nothing here reads the report again.
		select {
		case r.written <- it.rep.Dests:
		default:
		}
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

// spare returns the entries of a report the recorder has written and
// will not read again, the oldest first, or nil when there is none. The
// caller owns them, but others may still read them: the monitor's latest
// report stays readable (Status, Explain) until the next cycle replaces
// it. A nil Recorder has none.
func (r *Recorder) spare() []DestStatus {
	if r == nil {
		return nil
	}
	select {
	case s := <-r.written:
		return s
	default:
		return nil
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

// recording says whether the recorder gets the cycles' reports: not in
// a dry run.
func (m *Monitor) recording() bool { return m.deps.History != nil && !m.dryRun }

// recordHistory hands the cycle's report to the recorder.
func (m *Monitor) recordHistory(rep CycleReport) {
	if m.recording() {
		m.deps.History.record(rep)
	}
}

// recordBuilder turns each cycle's report into records, reusing its
// memory from one cycle to the next (at 10,000 destinations, a dozen
// allocations a record were most of the recorder's cost): the records it
// returns are valid until its next call. A destination's names are
// formatted again only when another one takes its place in the report.
type recordBuilder struct {
	recs  []history.Record
	parts []recordParts
}

// destNames are a destination's service and server as a record spells
// them, formatted once.
type destNames struct{ service, server string }

// recordParts holds what a record's pointers point to, and the names of
// the destination it was last built for.
type recordParts struct {
	key                                DestKey
	names                              destNames
	named                              bool
	newConns                           int64
	probe, load, ctrlBefore, ctrlAfter float64
	factor, fLoad, fStep, fRaw, fAfter float64
	ratio, median                      float64
	agent                              history.Agent
	inputs                             history.Inputs
	capacity                           history.Capacity
	formula                            history.Formula
	compare                            history.Compare
	guard                              history.Guard
}

// records returns the records of rep's destinations: every figure as the
// cycle's report holds it, none recomputed.
func (b *recordBuilder) records(rep CycleReport) []history.Record {
	n := len(rep.Dests)
	if cap(b.parts) < n {
		b.parts = append(b.parts[:cap(b.parts)], make([]recordParts, n-cap(b.parts))...)
		b.recs = make([]history.Record, n)
	}
	b.parts, b.recs = b.parts[:n], b.recs[:n]
	start := rep.Start.UTC()
	for i := range rep.Dests {
		d, p := &rep.Dests[i], &b.parts[i]
		if !p.named || p.key != d.Key {
			p.key, p.names, p.named = d.Key, destNames{d.Key.Service.String(), d.Key.Dest.String()}, true
		}
		fillRecord(&b.recs[i], p, start, p.names, d)
	}
	return b.recs
}

// historyRecord is the record of d in rep, in memory of its own.
func historyRecord(rep CycleReport, d *DestStatus) history.Record {
	var r history.Record
	fillRecord(&r, new(recordParts), rep.Start.UTC(), destNames{d.Key.Service.String(), d.Key.Dest.String()}, d)
	return r
}

// fillRecord sets *r to d's record, its pointers into p.
func fillRecord(r *history.Record, p *recordParts, start time.Time, nm destNames, d *DestStatus) {
	dec, tr := &d.Decision, &d.Decision.Trace
	*r = history.Record{
		V: history.SchemaVersion, Time: start,
		Service: nm.service, Server: nm.server,
		State: string(d.State), Configured: d.Configured, DefaultWeight: d.DefaultWeight,
		WeightBefore: d.Kernel, WeightTo: dec.To, WeightAfter: d.KernelWeight,
		Write: dec.Write, Wrote: d.Outcome.Wrote, WriteError: errText(d.Outcome.Err), Reason: d.Reason,

		Counter: d.Counter, ActiveConns: d.ActiveConns, InactiveConns: d.InactiveConns, ActiveDelta: d.ActiveDelta,
		ProbeError: errText(d.ProbeErr), ProbeTimedOut: d.ProbeTimedOut, Fails: tr.Fails, Passes: tr.Passes,

		Polled: d.Polled, AgentError: errText(d.AgentErr), AgentStale: d.AgentStale, AgentSeconds: d.AgentDuration.Seconds(),

		Load: finiteIn(&p.load, tr.Load), DirectorOnly: tr.DirectorOnly, Ramp: tr.Ramp, Frozen: tr.Frozen,
		CtrlBefore: finiteIn(&p.ctrlBefore, tr.CtrlBefore), CtrlAfter: finiteIn(&p.ctrlAfter, tr.CtrlAfter),
	}
	if d.NewConns >= 0 {
		p.newConns = d.NewConns
		r.NewConns = &p.newConns
	}
	if d.Probed && d.ProbeErr == nil {
		p.probe = d.ProbeRTT.Seconds()
		r.ProbeSeconds = &p.probe
	}
	if d.Polled && d.AgentErr == nil {
		rp := &d.Report
		p.agent = history.Agent{Source: rp.Source, Time: rp.Time.UTC(), CPU: rp.CPU, Memory: rp.Memory, Disk: rp.Disk, Processes: rp.Processes,
			CPUUsed: d.CPU, CPUSpan: d.CPUSpan, Raw: history.AgentRaw(rp.Raw)}
		r.Agent = &p.agent
	}
	if !math.IsNaN(tr.Load) {
		in := tr.Inputs
		p.inputs = history.Inputs{Input: in.Input, CPU: in.CPU, Memory: in.Memory, Disk: in.Disk, Response: in.Response, Process: in.Process}
		r.Inputs = &p.inputs
	}
	if c := tr.Capacity; c != nil {
		p.capacity = history.Capacity{Weight: c.Weight, Factor: finiteIn(&p.factor, c.Factor), SaturatedAlone: c.SaturatedAlone, BacklogCut: c.BacklogCut, CPU: c.CPU, Busy: c.Busy, Bottleneck: c.Bottleneck, Estimate: c.Estimate, Error: c.Error, Rule: c.Rule}
		if c.Driver != "" {
			p.capacity.Reading, p.capacity.Driver = c.Reading, c.Driver
		}
		r.Capacity = &p.capacity
	}
	if f := tr.Formula; f != nil {
		p.formula = history.Formula{Before: f.Before, Load: finiteIn(&p.fLoad, f.Load), Step: finiteIn(&p.fStep, f.Step), Raw: finiteIn(&p.fRaw, f.Raw),
			Min: f.Min, Max: f.Max, After: finiteIn(&p.fAfter, f.After), Ramp: f.Ramp, Next: f.Next}
		r.Formula = &p.formula
	}
	if c := tr.Compare; c != nil {
		p.compare = history.Compare{Next: c.Next, Rule: c.Rule, Passes: c.Passes, Overrule: c.Overrule}
		r.Compare = &p.compare
	}
	if g := tr.Guard; g != nil {
		p.guard = history.Guard{Event: guardEventName(g.Event), Held: g.Held, From: g.From, Raised: g.Raised,
			Ratio: finiteIn(&p.ratio, g.Ratio), Median: finiteIn(&p.median, g.Median), Active: g.Active, Restore: g.Restore, Controller: g.Controller}
		r.Guard = &p.guard
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// finiteIn stores v in *dst and returns dst, or nil when v is not a
// figure a record holds (NaN: not computed).
func finiteIn(dst *float64, v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	*dst = v
	return dst
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
