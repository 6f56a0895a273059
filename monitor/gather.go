package monitor

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// gather probes every row that is not drained and polls the agent of every
// managed row, concurrently (at most cfg.Concurrency at once), each call
// bounded by its timeout.
func (m *Monitor) gather(ctx context.Context, rows []destRow) {
	// One job per probe and per agent poll, run by a fixed pool of
	// cfg.Concurrency workers (not a goroutine per job: at 10,000 servers
	// that is 20,000 goroutines a cycle).
	type job struct {
		r     *destRow
		agent bool
	}
	jobs := make([]job, 0, 2*len(rows))
	for i := range rows {
		r := &rows[i]
		if r.st.Record.State == policy.DrainedByOperator {
			continue
		}
		jobs = append(jobs, job{r: r})
		if r.st.Record.State == policy.Managed {
			jobs = append(jobs, job{r: r, agent: true})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(m.cfg.Concurrency, len(jobs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				if j.agent {
					m.pollAgent(ctx, j.r)
				} else {
					m.probe(ctx, j.r)
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopped: the failures are ours; Cycle decides nothing
	}
	var started, recovered []*destRow
	now := m.deps.Now()
	for i := range rows {
		r := &rows[i]
		if !r.st.Polled {
			continue
		}
		// Log when an agent starts or stops failing, not every interval.
		failing := r.st.AgentErr != nil
		switch {
		case failing && !r.seen.agentFailing:
			started = append(started, r)
		case !failing && r.seen.agentFailing:
			recovered = append(recovered, r)
		case failing:
			m.log.Debug("agent poll failed", "service", r.st.Key.Service, "server", r.st.Key.Dest, "agent", r.server.AgentAddr, "error", r.st.AgentErr)
		}
		r.seen.agentFailing = failing
		if !failing {
			r.seen.agentOK = now
		} else {
			last := r.seen.agentOK
			if last.IsZero() {
				last = m.started
			}
			r.st.AgentStale = now.Sub(last) > m.cfg.Availability.AgentExpiry
		}
	}
	m.logAgentChanges(started, "agent not answering; keeping the server's weight while its service answers", slog.LevelWarn)
	m.logAgentChanges(recovered, "agent answering again", slog.LevelInfo)
}

// maxAgentLines is how many agents' failures or recoveries are logged one
// line each in one cycle; more are summarised in one line per service, so
// that a network blip does not flood the log.
const maxAgentLines = 5

func (m *Monitor) logAgentChanges(rows []*destRow, msg string, level slog.Level) {
	ctx := context.Background()
	if len(rows) <= maxAgentLines {
		for _, r := range rows {
			attrs := []any{"service", r.st.Key.Service, "server", r.st.Key.Dest, "agent", r.server.AgentAddr}
			if r.st.AgentErr != nil {
				attrs = append(attrs, "error", r.st.AgentErr)
			}
			m.log.Log(ctx, level, msg, attrs...)
		}
		return
	}
	bySvc := map[ipvs.ServiceKey][]*destRow{}
	var order []ipvs.ServiceKey
	for _, r := range rows {
		if bySvc[r.st.Key.Service] == nil {
			order = append(order, r.st.Key.Service)
		}
		bySvc[r.st.Key.Service] = append(bySvc[r.st.Key.Service], r)
	}
	for _, svc := range order {
		rs := bySvc[svc]
		attrs := []any{"service", svc, "servers", len(rs), "first", rs[0].st.Key.Dest}
		if rs[0].st.AgentErr != nil {
			attrs = append(attrs, "error", rs[0].st.AgentErr)
		}
		m.log.Log(ctx, level, msg, attrs...)
	}
}

// probe measures r's response time, bounded by probe_timeout.
func (m *Monitor) probe(ctx context.Context, r *destRow) {
	r.st.ProbeRTT, r.st.ProbeErr = m.deps.Prober.Probe(ctx, r.st.Key.Dest, r.svc.Probe, m.cfg.ProbeTimeout)
	r.st.Probed = true
}

// pollAgent fetches r's agent report, bounded by agent_timeout.
func (m *Monitor) pollAgent(ctx context.Context, r *destRow) {
	start := time.Now()
	r.st.Report, r.st.AgentErr = m.deps.Agents.Fetch(ctx, r.server.AgentAddr, m.cfg.AgentTimeout)
	r.st.AgentDuration = time.Since(start)
	r.st.Polled = true
}
