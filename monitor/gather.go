package monitor

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/nodeexp"
	"lvs-feedback/policy"
)

// gatherJob is a probe or (agent) an agent poll of one row.
type gatherJob struct {
	r     *destRow
	agent bool
}

// gather probes every row that is not drained and polls the agent of every
// managed row, concurrently (at most cfg.Concurrency at once), each call
// bounded by its timeout.
func (m *Monitor) gather(ctx context.Context, rows []destRow) {
	// One job per probe and per agent poll, run by a fixed pool of
	// cfg.Concurrency workers (not a goroutine per job: at 10,000 servers
	// that is 20,000 goroutines a cycle).
	jobs := m.jobs[:0]
	for i := range rows {
		r := &rows[i]
		if r.st.Record.State == policy.DrainedByOperator {
			continue
		}
		jobs = append(jobs, gatherJob{r: r})
		if r.st.Record.State == policy.Managed {
			jobs = append(jobs, gatherJob{r: r, agent: true})
		}
	}
	m.jobs = jobs
	// Each poll is timed on the monotonic clock from here: a duration
	// needs no wall clock, which time.Now reads too, 10,000 times a cycle.
	epoch := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	work := func() { // one closure for all the workers
		for {
			i := int(next.Add(1)) - 1
			if i >= len(jobs) {
				return
			}
			j := jobs[i]
			if j.agent {
				m.pollAgent(ctx, j.r, epoch)
			} else {
				m.probe(ctx, j.r)
			}
		}
	}
	for range min(m.cfg.Concurrency, len(jobs)) {
		wg.Go(work)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopped: the failures are ours; Cycle decides nothing
	}
	var notes []agentNote
	now := m.deps.Now()
	for i := range rows {
		r := &rows[i]
		if !r.st.Polled {
			continue
		}
		// One line when an agent starts or stops failing, or expires; not
		// every interval.
		// A node_exporter that answered but has no earlier scrape to
		// compare with is not failing: its load is not measured yet.
		failing := r.st.AgentErr != nil && !errors.Is(r.st.AgentErr, nodeexp.ErrNoBaseline)
		switch {
		case failing && !r.seen.agentFailing:
			level := slog.LevelWarn
			if now.Sub(r.seen.failLogged) < agentFlapGap {
				level = slog.LevelDebug // a flapping agent: one warning a minute
			} else {
				r.seen.failLogged = now
			}
			notes = append(notes, agentNote{r, level, "agent not answering: the server's weight is kept while the server answers probes, until agent_expiry"})
		case !failing && r.seen.agentFailing:
			notes = append(notes, agentNote{r, slog.LevelInfo, "agent answering again: its figures count again"})
		case failing:
			m.log.Debug("agent poll failed", "service", r.st.Key.Service, "server", r.st.Key.Dest, "agent", r.server.AgentAddr, "error", r.st.AgentErr)
		}
		r.seen.agentFailing = failing
		if !failing {
			r.seen.agentOK, r.seen.agentStale = now, false
			continue
		}
		last := r.seen.agentOK
		if last.IsZero() {
			last = m.started
		}
		r.st.AgentStale = now.Sub(last) > m.cfg.Availability.AgentExpiry
		if r.st.AgentStale && !r.seen.agentStale {
			notes = append(notes, agentNote{r, slog.LevelWarn, "agent silent for longer than agent_expiry: the server's load now comes from the director's own inputs (INPUT, RESPONSE) alone"})
		}
		r.seen.agentStale = r.st.AgentStale
	}
	m.logAgentNotes(notes)
}

// agentNote is one agent's change in a cycle, for the log.
type agentNote struct {
	r     *destRow
	level slog.Level
	msg   string
}

// maxAgentLines is how many agents' changes are logged a line each in one
// cycle; the rest go to the debug level, counted in one line, so that a
// network blip across a large fleet does not flood the log.
const maxAgentLines = 50

// agentFlapGap is how often at most an agent that fails again is warned
// about.
const agentFlapGap = time.Minute

func (m *Monitor) logAgentNotes(notes []agentNote) {
	ctx := context.Background()
	for i, n := range notes {
		attrs := []any{"service", n.r.st.Key.Service, "server", n.r.st.Key.Dest, "agent", n.r.server.AgentAddr}
		if err := n.r.st.AgentErr; err != nil {
			attrs = append(attrs, "error", err)
		}
		level := n.level
		if i >= maxAgentLines {
			level = slog.LevelDebug
		}
		m.log.Log(ctx, level, n.msg, attrs...)
	}
	if more := len(notes) - maxAgentLines; more > 0 {
		m.log.Warn("more agents changed this cycle than are logged one by one; the rest are at the debug level", "logged", maxAgentLines, "more", more)
	}
}

// probe measures r's response time, bounded by probe_timeout.
func (m *Monitor) probe(ctx context.Context, r *destRow) {
	r.st.ProbeRTT, r.st.ProbeErr = m.deps.Prober.Probe(ctx, r.st.Key.Dest, r.svc.Probe, m.cfg.ProbeTimeout)
	r.st.ProbeTimedOut = timedOut(r.st.ProbeErr)
	r.st.Probed = true
}

// pollAgent fetches r's agent report, or scrapes its node_exporter,
// bounded by agent_timeout, and times it from epoch. A node_exporter
// scrape is compared with the previous one when that is at most
// nodeExpMaxAge intervals old.
func (m *Monitor) pollAgent(ctx context.Context, r *destRow, epoch time.Time) {
	start := time.Since(epoch)
	if r.server.Source == nodeexp.SourceName {
		r.st.Report, r.st.AgentErr = m.nodeExp.Poll(ctx, r.server.AgentAddr, m.cfg.AgentTimeout, nodeExpMaxAge*m.cfg.Interval, &r.seen.nodeExp)
	} else {
		r.st.Report, r.st.AgentErr = m.deps.Agents.Fetch(ctx, r.server.AgentAddr, m.cfg.AgentTimeout)
	}
	r.st.AgentDuration = time.Since(epoch) - start
	r.st.Polled = true
	if r.st.AgentErr == nil {
		r.st.IOBusy, r.st.MemoryPressure = resourceFigures(r.st.Report.Raw)
	}
}

// resourceFigures are the capacity controller's resources besides the CPU
// in an agent's (or node_exporter's) raw figures: the busiest device's
// I/O busy fraction, and the PSI memory "some" share (0 without PSI), each
// within [0, 1]. The report's checks cover its normalised loads, not these
// raw figures, and a busy fraction beyond 1 (io_ticks rounding) or a
// nonsense value must not make a server look more than saturated.
func resourceFigures(raw agent.Raw) (ioBusy, memoryPressure float64) {
	ioBusy = unitShare(raw.DiskIOBusy)
	if p := raw.PSIMemorySome10; p != nil {
		memoryPressure = unitShare(*p / 100)
	}
	return ioBusy, memoryPressure
}

// unitShare is v within [0, 1]; NaN is 0.
func unitShare(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return min(v, 1)
}

// nodeExpMaxAge is how many intervals old a node_exporter baseline may be:
// one missed poll is bridged (the figures then average over two
// intervals), a longer gap starts afresh.
const nodeExpMaxAge = 3

// timedOut reports whether err is a timeout: the probe's deadline passed,
// or the network said so.
func timedOut(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
