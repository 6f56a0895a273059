package monitor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"lvs-feedback/policy"
)

// TestHealthCheckerNeighbour plays keepalived's checker against the
// monitor on the in-memory table, for a service configured with
// health_checker = "keepalived": its 0 is a down by the health checker (in
// the state file too), not an operator drain; an lvsctl drain stands over
// its remove and re-add and over its re-enable (inhibit_on_failure); a
// server it puts back gets slow start, and its weight never becomes a new
// default; every disappearance and return is logged; its restart (the
// service deleted and re-added) keeps the drain and slow-starts the rest.
func TestHealthCheckerNeighbour(t *testing.T) {
	r := newRig(t)
	r.cfg.Services[0].HealthChecker = "keepalived"
	var buf bytes.Buffer
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}, false)
	must(t, err)
	step := func() CycleReport { r.advance(time.Second); return cycle(t, m) }
	step()
	step()
	saved := func() State {
		st, err := store.Load()
		must(t, err)
		return st
	}
	key := func(rs interface{ String() string }) DestKey {
		for k := range saved() {
			if k.Dest.String() == rs.String() {
				return k
			}
		}
		t.Fatalf("%s not in the state file", rs)
		return DestKey{}
	}

	// keepalived's 0 (inhibit_on_failure) on C before the monitor's probe
	// failed: down by the health checker, not drained, and left at 0 while
	// the monitor's probe answers.
	r.operatorSets(rsC, 0)
	rep := step()
	if s := statusOf(t, rep, rsC); s.State != policy.Down || s.Record.SetBy != policy.ByHealthChecker {
		t.Fatalf("C zeroed by keepalived: %s set by %q, want down by the health checker", s.State, s.Record.SetBy)
	}
	if rec := saved()[key(rsC)]; rec.State != policy.Down || rec.SetBy != policy.ByHealthChecker {
		t.Errorf("state file: C %+v, want down set by the health checker", rec)
	}
	step()
	if w := r.weight(rsC); w != 0 {
		t.Errorf("C, down by keepalived, probe answering: weight %d, want 0 (keepalived puts it back)", w)
	}
	// keepalived puts C back at 10: slow start from the ramp's start.
	r.operatorSets(rsC, 10)
	rep = step()
	if w := r.weight(rsC); w != 1 {
		t.Errorf("C put back at 10 by keepalived: weight %d, want 1 (slow start, 10 %% of 10): %s", w, statusOf(t, rep, rsC).Reason)
	}
	if d := statusOf(t, rep, rsC).DefaultWeight; d != 10 {
		t.Errorf("C's default weight %d, want 10", d)
	}

	// An operator's drain of B (lvsctl), then keepalived removes B on a
	// failed check and re-adds it at 10: the drain stands.
	must(t, m.Drain(svcKey, rsB))
	must(t, r.table.RemoveDestination(svcKey, rsB))
	step()
	must(t, r.table.AddDestination(svcKey, rsB, 10))
	rep = step()
	if w := r.weight(rsB); w != 0 || statusOf(t, rep, rsB).State != policy.DrainedByOperator {
		t.Errorf("drained B re-added at 10 by keepalived: weight %d state %s, want 0, drained", w, statusOf(t, rep, rsB).State)
	}
	// ... and re-enabled at 10 (inhibit_on_failure: no removal, counter
	// where it was): the drain stands too.
	r.operatorSets(rsB, 10)
	rep = step()
	if w := r.weight(rsB); w != 0 || statusOf(t, rep, rsB).State != policy.DrainedByOperator {
		t.Errorf("drained B re-enabled at 10 by keepalived: weight %d state %s, want 0, drained", w, statusOf(t, rep, rsB).State)
	}

	// keepalived restarts: it deletes the service, then adds it back with
	// every server at its weight.
	for i := 0; r.weight(rsC) != 10; i++ { // let C's ramp finish first
		if i == 10 {
			t.Fatalf("C's slow start did not end: weight %d", r.weight(rsC))
		}
		r.advance(10 * time.Second)
		step()
	}
	must(t, r.table.RemoveService(svcKey))
	step()
	must(t, r.table.AddService(svcKey, "wrr"))
	must(t, r.table.AddDestination(svcKey, rsA, 10))
	must(t, r.table.AddDestination(svcKey, rsB, 10))
	must(t, r.table.AddDestination(svcKey, rsC, 10))
	rep = step()
	if a, b, c := r.weight(rsA), r.weight(rsB), r.weight(rsC); a != 1 || b != 0 || c != 1 {
		t.Errorf("after keepalived's restart: A %d B %d C %d, want 1 0 1 (slow start, the drain kept)", a, b, c)
	}
	for _, s := range rep.Dests {
		if s.Key.Dest == rsB {
			continue
		}
		if s.DefaultWeight != 10 || s.State != policy.Managed {
			t.Errorf("%s after keepalived's restart: %s, default %d, want managed, default 10", s.Key.Dest, s.State, s.DefaultWeight)
		}
	}

	log := buf.String()
	for _, want := range []string{
		`msg="configured real server not in the IPVS table; skipped until it appears" service=192.0.2.10:80/tcp server=198.51.100.12:80`,
		`msg="configured real server appeared in the IPVS table" service=192.0.2.10:80/tcp server=198.51.100.12:80 weight=10`,
		`msg="configured service not in the IPVS table; skipped until it appears"`,
		`server=198.51.100.13:80 weight=0 state=down set_by=health-checker reason="set to 0 by the health checker (keepalived) (lvs-monitor wrote 10): down by the health checker, not an operator drain`,
		`server=198.51.100.13:80 weight=10 state=managed set_by=health-checker reason="set to 10 by the health checker (keepalived): back in rotation, slow start`,
		`server=198.51.100.12:80 weight=10 state=drained set_by=operator reason="set to 10 by the health checker (keepalived): still drained by the operator`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// Each disappearance and each return of B is a line: two of each.
	if n := strings.Count(log, `msg="configured real server appeared in the IPVS table" service=192.0.2.10:80/tcp server=198.51.100.12:80`); n != 2 {
		t.Errorf("B's returns logged %d times, want 2", n)
	}
	for _, bad := range []string{"weight set to 0 by another tool", "undrained by operator", "new default weight"} {
		if strings.Contains(log, bad) {
			t.Errorf("a health checker's move taken for an operator's (%q)", bad)
		}
	}
	if t.Failed() {
		t.Log(log)
	}
}

// TestHealthCheckerConfig: health_checker takes a known daemon's name; a
// misspelt one is refused with the key's name, not taken for none.
func TestHealthCheckerConfig(t *testing.T) {
	with := func(v string) string {
		return strings.Replace(cpuOnlyConfig, "address = \"192.0.2.10:80/tcp\"\n", "address = \"192.0.2.10:80/tcp\"\nhealth_checker = \""+v+"\"\n", 1)
	}
	cfg, err := ParseConfig("t.toml", []byte(with("keepalived")))
	if err != nil || cfg.Services[0].HealthChecker != "keepalived" {
		t.Fatalf("health_checker = keepalived: %v %q", err, cfg.Services[0].HealthChecker)
	}
	if _, err := ParseConfig("t.toml", []byte(with("keepalvied"))); err == nil || !strings.Contains(err.Error(), "health_checker") {
		t.Errorf("a misspelt health_checker: %v", err)
	}
}
