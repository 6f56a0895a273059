package monitor

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	r := newRig(t)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock, Metrics: metrics}, false)
	must(t, err)
	r.agents.set(agentOf(rsA), 0.825)
	r.agents.remove(agentOf(rsB))
	must(t, m.Drain(svcKey, rsC))
	cycle(t, m)

	const svc, a, b, c = "192.0.2.10:80/tcp", "198.51.100.11:80", "198.51.100.12:80", "198.51.100.13:80"
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"weight A", testutil.ToFloat64(metrics.weight.WithLabelValues(svc, a)), 13},
		{"default A", testutil.ToFloat64(metrics.defaultWeight.WithLabelValues(svc, a)), 10},
		{"load A", testutil.ToFloat64(metrics.load.WithLabelValues(svc, a)), 0.825},
		{"cpu input A", testutil.ToFloat64(metrics.input.WithLabelValues(svc, a, "cpu")), 0.825},
		{"writes A", testutil.ToFloat64(metrics.writes.WithLabelValues(svc, a)), 1},
		{"writes B", testutil.ToFloat64(metrics.writes.WithLabelValues(svc, b)), 0},
		{"agent errors B", testutil.ToFloat64(metrics.agentErrors.WithLabelValues(svc, b)), 1},
		{"drained C", testutil.ToFloat64(metrics.drained.WithLabelValues(svc, c)), 1},
		{"drained A", testutil.ToFloat64(metrics.drained.WithLabelValues(svc, a)), 0},
		{"weight C", testutil.ToFloat64(metrics.weight.WithLabelValues(svc, c)), 0},
		{"frozen", testutil.ToFloat64(metrics.frozen.WithLabelValues(svc)), 0},
		{"reload ok", testutil.ToFloat64(metrics.reloadOK), 1},
	}
	for _, ch := range checks {
		if !near(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	if n := testutil.CollectAndCount(metrics.load); n != 1 {
		t.Errorf("load series: %d, want 1 (A; B's agent failed and C is drained: no load)", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	must(t, err)
	for _, p := range problems {
		t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
	}

	// A server removed from the configuration loses its series.
	cfg := r.cfg
	cfg.Services = append([]ServiceConfig(nil), cfg.Services...)
	cfg.Services[0].Servers = cfg.Services[0].Servers[:2]
	m.Reload(cfg)
	cycle(t, m)
	if n := testutil.CollectAndCount(metrics.weight); n != 2 {
		t.Errorf("weight series after removing C: %d, want 2", n)
	}
	if err := testutil.CollectAndCompare(metrics.drained, strings.NewReader(`
# HELP lvs_monitor_server_drained 1 when the real server is drained by an operator.
# TYPE lvs_monitor_server_drained gauge
lvs_monitor_server_drained{server="198.51.100.11:80",service="192.0.2.10:80/tcp"} 0
lvs_monitor_server_drained{server="198.51.100.12:80",service="192.0.2.10:80/tcp"} 0
`)); err != nil {
		t.Errorf("drained series after removing C: %v", err)
	}
}
