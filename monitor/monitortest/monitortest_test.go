package monitortest

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/monitor"
)

func TestAgents(t *testing.T) {
	a := NewAgents()
	ctx := context.Background()
	if _, err := a.Fetch(ctx, "192.0.2.1:9771", time.Second); err == nil || err.Error() != "agent 192.0.2.1:9771: connection refused" {
		t.Fatalf("unset agent: %v, want a refusal", err)
	}
	a.Set("192.0.2.1:9771", agent.Report{CPU: 0.25})
	if rep, err := a.Fetch(ctx, "192.0.2.1:9771", time.Second); err != nil || rep.CPU != 0.25 {
		t.Fatalf("set agent: %+v, %v; want CPU 0.25", rep, err)
	}
	a.Fail("192.0.2.1:9771")
	if _, err := a.Fetch(ctx, "192.0.2.1:9771", time.Second); err == nil {
		t.Fatal("failed agent answered")
	}
}

func TestProber(t *testing.T) {
	p := NewProber(time.Millisecond)
	rs := netip.MustParseAddrPort("198.51.100.1:80")
	ctx := context.Background()
	if d, err := p.Probe(ctx, rs, monitor.ProbeConfig{}, time.Second); err != nil || d != time.Millisecond {
		t.Fatalf("default: %v, %v; want 1ms", d, err)
	}
	p.Set(rs, 95*time.Millisecond)
	if d, _ := p.Probe(ctx, rs, monitor.ProbeConfig{}, time.Second); d != 95*time.Millisecond {
		t.Fatalf("set: %v, want 95ms", d)
	}
	p.Down(rs, true)
	for typ, want := range map[string]string{"": "tcp probe 198.51.100.1:80: connection refused", "http": "http probe 198.51.100.1:80: connection refused"} {
		if _, err := p.Probe(ctx, rs, monitor.ProbeConfig{Type: typ}, time.Second); err == nil || err.Error() != want {
			t.Errorf("down, type %q: %v, want %q", typ, err, want)
		}
	}
	p.Down(rs, false)
	if d, err := p.Probe(ctx, rs, monitor.ProbeConfig{}, time.Second); err != nil || d != 95*time.Millisecond {
		t.Fatalf("up again: %v, %v; want 95ms", d, err)
	}
}
