package monitor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
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
	if rep.Writes != 0 || !statusOf(t, rep, rsA).Decision.Trace.Frozen {
		t.Errorf("writes %d frozen %v, want 0 writes and frozen", rep.Writes, statusOf(t, rep, rsA).Decision.Trace.Frozen)
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
	if statusOf(t, rep, rsA).Decision.Trace.Frozen {
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
		t.Errorf("agent silent 40 s: stale=%v weight %d load %v, want stale and 8", s.AgentStale, r.weight(rsA), s.Decision.Trace.Load)
	}
	// The agent is back at the target load: the controller continues from
	// 8.158 without a jump back to 10.
	r.agents.set(agentOf(rsA), 0.9)
	rep = cycle(t, m)
	if s := statusOf(t, rep, rsA); s.AgentStale || r.weight(rsA) != 8 {
		t.Errorf("agent back: stale=%v weight %d, want 8", s.AgentStale, r.weight(rsA))
	}
}

// TestInterruptedCycleDecidesNothing: a cycle whose context ends while it
// gathers (the daemon is stopping) must not take the failed polls and probes
// for dead servers.
func TestInterruptedCycleDecidesNothing(t *testing.T) {
	r := newRig(t)
	m := r.monitor(false)
	cycle(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m2 := r.monitor(false)
	m2.deps.Prober = ctxProber{}
	rep, err := m2.Cycle(ctx)
	if !errors.Is(err, context.Canceled) || rep.Writes != 0 {
		t.Errorf("interrupted cycle: err %v writes %d", err, rep.Writes)
	}
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		if got := r.weight(rs); got != 10 {
			t.Errorf("%s: weight %d after an interrupted cycle, want 10", rs, got)
		}
	}
}

// ctxProber fails as a real probe does when its context is done.
type ctxProber struct{}

func (ctxProber) Probe(ctx context.Context, _ netip.AddrPort, _ ProbeConfig, _ time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return time.Millisecond, nil
}

// TestAgentChangesAreLoggedPerServer: each agent that starts failing,
// answers again, or stays silent past agent_expiry gets its own line, with
// its server and the reason; an agent that fails again within a minute is
// not warned about again; past maxAgentLines changes in one cycle the rest
// go to the debug level with one line that counts them.
func TestAgentChangesAreLoggedPerServer(t *testing.T) {
	r := newRig(t)
	var buf bytes.Buffer
	cfg, extra := withServersWithoutAgents(t, r, 6)
	m := monitorLoggingTo(t, r, cfg, &buf)
	lines := func(msg string) []string {
		var out []string
		for l := range strings.Lines(buf.String()) {
			if strings.Contains(l, msg) && strings.Contains(l, "level=WARN") || strings.Contains(l, msg) && strings.Contains(l, "level=INFO") {
				out = append(out, l)
			}
		}
		return out
	}
	wantPerServer := func(what, msg string, servers []netip.AddrPort) {
		t.Helper()
		got := lines(msg)
		if len(got) != len(servers) {
			t.Errorf("%s: %d lines %q, want %d:\n%s", what, len(got), msg, len(servers), buf.String())
			return
		}
		for _, rs := range servers {
			if !strings.Contains(strings.Join(got, ""), "server="+rs.String()+" ") {
				t.Errorf("%s: no line for %s", what, rs)
			}
		}
	}

	cycle(t, m)
	wantPerServer("six agents missing", "agent not answering", extra)
	if !strings.Contains(buf.String(), "connection refused") {
		t.Errorf("the lines do not say why:\n%s", buf.String())
	}
	buf.Reset()
	r.advance(cfg.Availability.AgentExpiry + time.Second)
	cycle(t, m)
	wantPerServer("past agent_expiry", "agent silent for longer than agent_expiry", extra)
	buf.Reset()
	cycle(t, m)
	if n := len(lines("agent")); n != 0 {
		t.Errorf("nothing changed, %d agent lines:\n%s", n, buf.String())
	}

	// The six answer, A, B and C stop.
	for _, rs := range extra {
		r.agents.set(agentOf(rs), 0.95)
	}
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		r.agents.remove(agentOf(rs))
	}
	buf.Reset()
	cycle(t, m)
	wantPerServer("six back", "agent answering again", extra)
	wantPerServer("three failing", "agent not answering", []netip.AddrPort{rsA, rsB, rsC})

	// A fails again within a minute of its warning: no second warning.
	r.agents.set(agentOf(rsA), 0.95)
	cycle(t, m)
	r.agents.remove(agentOf(rsA))
	buf.Reset()
	cycle(t, m)
	if n := len(lines("agent not answering")); n != 0 {
		t.Errorf("a flapping agent warned about again within a minute:\n%s", buf.String())
	}
}

// TestAgentLinesAreCapped: more agent changes in one cycle than
// maxAgentLines are logged up to the cap, and one line counts the rest.
func TestAgentLinesAreCapped(t *testing.T) {
	r := newRig(t)
	var buf bytes.Buffer
	cfg, _ := withServersWithoutAgents(t, r, maxAgentLines+7)
	m := monitorLoggingTo(t, r, cfg, &buf)
	cycle(t, m)
	if got := strings.Count(buf.String(), "level=WARN msg=\"agent not answering"); got != maxAgentLines {
		t.Errorf("%d warnings, want %d", got, maxAgentLines)
	}
	if !strings.Contains(buf.String(), "more=7") {
		t.Errorf("no line counts the 7 left out:\n%s", buf.String())
	}
}

// TestOneTimeoutIsNotDown: with the default fall (2) a server whose probe
// times out once — a busy director — keeps its weight; at the second
// timeout in a row it goes to 0; it comes back at its next answer (rise 1),
// to the weight it had, through slow start, and the log line says both. A
// refused connection is the server's own answer: down at once.
func TestOneTimeoutIsNotDown(t *testing.T) {
	r := newRig(t)
	cfg, err := ParseConfig("t.toml", []byte(strings.Replace(cpuOnlyConfig, "fall = 1\nrise = 1\n", "", 1)))
	must(t, err)
	cfg.StateDir = r.dir
	r.cfg = cfg
	var logs strings.Builder
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, false)
	must(t, err)
	r.agents.set(agentOf(rsB), 0.825) // 10 → 12.5 → 13
	cycle(t, m)
	r.agents.set(agentOf(rsB), 0.95) // at the target: 13 stays
	for i, step := range []struct {
		slow, refused bool
		want          int
	}{{true, false, 13}, {false, false, 13}, {true, false, 13}, {true, false, 0}, {false, false, 1},
		{false, true, 0}} {
		r.prober.setSlow(rsB, step.slow)
		r.prober.setDown(rsB, step.refused)
		r.advance(time.Second)
		cycle(t, m)
		if got := r.weight(rsB); got != step.want {
			t.Fatalf("cycle %d (timeout %v, refused %v): B at %d, want %d\n%s", i+1, step.slow, step.refused, got, step.want, logs.String())
		}
	}
	if !strings.Contains(logs.String(), `reason="reachable again: weight 1 written, slow start up to 13"`) {
		t.Errorf("the restore does not say the weight:\n%s", logs.String())
	}
}

// withServersWithoutAgents adds n servers (198.51.100.20…) to r's table
// and to a copy of its configuration, with no agent answering for them.
func withServersWithoutAgents(t *testing.T, r *rig, n int) (Config, []netip.AddrPort) {
	t.Helper()
	cfg := r.cfg
	cfg.Services = append([]ServiceConfig(nil), cfg.Services...)
	var added []netip.AddrPort
	for i := range n {
		rs := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100 + byte((20+i)/256), byte(20 + i)}), 80)
		must(t, r.table.AddDestination(svcKey, rs, 10))
		cfg.Services[0].Servers = append(cfg.Services[0].Servers, ServerConfig{Address: rs.String(), Weight: 10, Addr: rs, AgentAddr: agentOf(rs)})
		added = append(added, rs)
	}
	return cfg, added
}

// monitorLoggingTo is r's monitor for cfg, logging to w.
func monitorLoggingTo(t *testing.T, r *rig, cfg Config, w io.Writer) *Monitor {
	t.Helper()
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock,
		Logger: slog.New(slog.NewTextHandler(w, nil))}, false)
	must(t, err)
	return m
}
