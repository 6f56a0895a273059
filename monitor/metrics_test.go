package monitor

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lvs-feedback/internal/buildinfo"
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

// TestUnmeasuredFiguresAreAbsent: a stale agent's figures were not
// measured; the log line of the weight change and the metrics leave them
// out instead of showing 0.
func TestUnmeasuredFiguresAreAbsent(t *testing.T) {
	r := newRig(t)
	cfg, err := ParseConfig("t.toml", []byte(strings.Replace(cpuOnlyConfig, "input = 0.0\ncpu = 1.0", "input = 0.5\ncpu = 0.5", 1)))
	must(t, err)
	cfg.StateDir = r.dir
	for _, rs := range []string{agentOf(rsA), agentOf(rsB), agentOf(rsC)} {
		r.agents.set(rs, 0.9)
	}
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	var logs strings.Builder
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, false)
	must(t, err)
	cycle(t, m)
	const svc, a = "192.0.2.10:80/tcp", "198.51.100.11:80"
	if n := testutil.CollectAndCount(metrics.input); n != 3*6 {
		t.Fatalf("%d input series with every agent answering, want 18", n)
	}
	r.agents.remove(agentOf(rsA))
	r.advance(40 * time.Second) // past agent_expiry: stale, load from INPUT alone → 8
	logs.Reset()
	rep := cycle(t, m)
	if s := statusOf(t, rep, rsA); !s.Decision.Trace.DirectorOnly || !s.Outcome.Wrote {
		t.Fatalf("A: director-only %v, wrote %v", s.Decision.Trace.DirectorOnly, s.Outcome.Wrote)
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `msg="weight changed"`) && strings.Contains(l, "server="+a) {
			line = l
		}
	}
	if line == "" || strings.Contains(line, "cpu=") || strings.Contains(line, "memory=") || !strings.Contains(line, "agent=stale") {
		t.Errorf("the weight change of a stale agent's server: %q", line)
	}
	if n := testutil.CollectAndCount(metrics.input); n != 3*6-4 {
		t.Errorf("%d input series with A's agent stale, want 14 (A's cpu, memory, disk, process absent)", n)
	}
	if got := testutil.ToFloat64(metrics.input.WithLabelValues(svc, a, "input")); got != 1 {
		t.Errorf("A's INPUT %v, want 1 (no traffic: neutral)", got)
	}
}

// TestBuildInfoMetric scrapes lvs_monitor_build_info from the registry:
// one series, value 1, its labels the build's.
func TestBuildInfoMetric(t *testing.T) {
	const help = "# HELP lvs_monitor_build_info Always 1; its labels name the build of this lvs-monitor: version (the package's, the module's tag or pseudo-version, or (devel)), revision (the commit, or unknown) and goversion.\n# TYPE lvs_monitor_build_info gauge\n"
	for _, tt := range []struct {
		name  string
		build buildinfo.Info
		want  string
	}{
		{"stamped", buildinfo.Info{Version: "v0.0.0-20261202005012-6499bca92c65+dirty", Revision: "6499bca92c65f073584b2d1fe493b3e2193b2636", Modified: true, GoVersion: "go1.26.8"},
			`lvs_monitor_build_info{goversion="go1.26.8",revision="6499bca92c65f073584b2d1fe493b3e2193b2636",version="v0.0.0-20261202005012-6499bca92c65+dirty"} 1`},
		{"no VCS", buildinfo.Info{Version: "(devel)", GoVersion: "go1.26.8"},
			`lvs_monitor_build_info{goversion="go1.26.8",revision="unknown",version="(devel)"} 1`},
		{"packaged", buildinfo.Info{Version: "0.1.0", Revision: "6499bca92c65f073584b2d1fe493b3e2193b2636", GoVersion: "go1.26.8"},
			`lvs_monitor_build_info{goversion="go1.26.8",revision="6499bca92c65f073584b2d1fe493b3e2193b2636",version="0.1.0"} 1`},
	} {
		reg := prometheus.NewRegistry()
		newMetrics(reg, tt.build)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(help+tt.want+"\n"), "lvs_monitor_build_info"); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}

	// NewMetrics names this binary's own build.
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	b := buildinfo.Read()
	rev := b.Revision
	if rev == "" {
		rev = "unknown"
	}
	want := fmt.Sprintf(`lvs_monitor_build_info{goversion=%q,revision=%q,version=%q} 1`, runtime.Version(), rev, b.Version)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(help+want+"\n"), "lvs_monitor_build_info"); err != nil {
		t.Error(err)
	}
}
