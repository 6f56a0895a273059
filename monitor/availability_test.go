package monitor

import (
	"strings"
	"testing"
	"time"
)

func TestFailStaticFreezesInsteadOfZeroingThePool(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	cycle(t, m)
	// Two of three configured servers unreachable at once: 2/3 > 50 %.
	r.prober.setDown(rsA, true)
	r.prober.setDown(rsB, true)
	r.agents.set(agentOf(rsC), 1.95) // even C's load change is not applied
	rep := cycle(t, m)
	for _, rs := range []struct {
		name string
		w    int
	}{{"A", r.weight(rsA)}, {"B", r.weight(rsB)}, {"C", r.weight(rsC)}} {
		if rs.w != 10 {
			t.Errorf("frozen service: %s weight %d, want 10", rs.name, rs.w)
		}
	}
	if rep.Writes != 0 || !statusOf(t, rep, rsA).Frozen {
		t.Errorf("writes %d frozen %v, want 0 writes and frozen", rep.Writes, statusOf(t, rep, rsA).Frozen)
	}
	// A answers again: 1/3 ≤ 50 %, the service resumes; B goes to 0.
	r.prober.setDown(rsA, false)
	rep = cycle(t, m)
	if got := r.weight(rsB); got != 0 {
		t.Errorf("after unfreeze: unreachable B weight %d, want 0", got)
	}
	if got := r.weight(rsC); got != 5 {
		t.Errorf("after unfreeze: C weight %d, want 5", got)
	}
	if statusOf(t, rep, rsA).Frozen {
		t.Error("still frozen")
	}
}

func TestStaleAgent(t *testing.T) {
	// CPU only: a stale agent leaves nothing to compute from; the weight is kept.
	r := newRig(t)
	m := r.monitor(false)
	cycle(t, m)
	r.agents.remove(agentOf(rsA))
	r.advance(60 * time.Second)
	rep := cycle(t, m)
	if s := statusOf(t, rep, rsA); !s.AgentStale || r.weight(rsA) != 10 {
		t.Errorf("cpu-only, stale agent: stale=%v weight %d, want stale and 10 kept", s.AgentStale, r.weight(rsA))
	}

	// INPUT and CPU half each: a stale agent's load is INPUT alone
	// (renormalised 0.5/0.5). No traffic → INPUT 1 → load 1 →
	// 10 + 5·∛(0.95 − 1) = 10 − 1.842 = 8.158 → 8.
	r = newRig(t)
	cfg, err := ParseConfig("t.toml", []byte(strings.Replace(cpuOnlyConfig, "input = 0.0\ncpu = 1.0", "input = 0.5\ncpu = 0.5", 1)))
	must(t, err)
	cfg.StateDir = r.dir
	r.cfg = cfg
	for _, rs := range []string{agentOf(rsA), agentOf(rsB), agentOf(rsC)} {
		r.agents.set(rs, 0.9) // 0.5·INPUT 1 + 0.5·0.9 = 0.95: at target
	}
	m = r.monitor(false)
	cycle(t, m)
	r.agents.remove(agentOf(rsA))
	r.advance(20 * time.Second) // within agent_expiry (30 s): weight kept
	rep = cycle(t, m)
	if s := statusOf(t, rep, rsA); s.AgentStale || r.weight(rsA) != 10 {
		t.Errorf("agent silent 20 s: stale=%v weight %d, want not stale and 10", s.AgentStale, r.weight(rsA))
	}
	r.advance(20 * time.Second) // 40 s silent: stale
	rep = cycle(t, m)
	if s := statusOf(t, rep, rsA); !s.AgentStale || r.weight(rsA) != 8 {
		t.Errorf("agent silent 40 s: stale=%v weight %d load %v, want stale and 8", s.AgentStale, r.weight(rsA), s.Load)
	}
	// The agent is back at the target load: the controller continues from
	// 8.158 without a jump back to 10.
	r.agents.set(agentOf(rsA), 0.9)
	rep = cycle(t, m)
	if s := statusOf(t, rep, rsA); s.AgentStale || r.weight(rsA) != 8 {
		t.Errorf("agent back: stale=%v weight %d, want 8", s.AgentStale, r.weight(rsA))
	}
}
