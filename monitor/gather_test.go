package monitor

import (
	"context"
	"testing"
	"time"

	"lvs-feedback/agent"
)

// slowAgents delays the polls of one agent address.
type slowAgents struct {
	*stubAgents
	slow  string
	delay time.Duration
}

func (s slowAgents) Fetch(ctx context.Context, addr string, timeout time.Duration) (agent.Report, error) {
	if addr == s.slow {
		time.Sleep(s.delay)
	}
	return s.stubAgents.Fetch(ctx, addr, timeout)
}

// Each poll's duration is its own: with one worker, the poll after a
// slow one does not count the slow one's time.
func TestAgentDurationIsEachPolls(t *testing.T) {
	r := newRig(t)
	r.cfg.Concurrency = 1
	const delay = 300 * time.Millisecond
	r.cfg.AgentTimeout = 10 * delay
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(r.cfg, Deps{Table: r.table, Agents: slowAgents{r.agents, agentOf(rsA), delay}, Prober: r.prober, Store: store, Now: r.clock}, false)
	must(t, err)
	rep := cycle(t, m)
	got := map[string]time.Duration{}
	for _, d := range rep.Dests {
		got[d.Key.Dest.String()] = d.AgentDuration
	}
	if got[rsA.String()] < delay {
		t.Errorf("the slow agent's poll took %v, want at least %v", got[rsA.String()], delay)
	}
	if b := got[rsB.String()]; b <= 0 || b >= delay {
		t.Errorf("the poll after the slow one took %v, want its own time (above 0, below %v)", b, delay)
	}
}
