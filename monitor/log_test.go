package monitor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLogsOneLinePerChange: one info line per weight change, with old, new
// and the load breakdown; a quiet cycle logs nothing at the default level.
func TestLogsOneLinePerChange(t *testing.T) {
	r := newRig(t)
	var buf bytes.Buffer
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store,
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}, false)
	must(t, err)
	cycle(t, m) // adoption of the three servers is logged here
	buf.Reset()
	cycle(t, m)
	if buf.Len() != 0 {
		t.Errorf("quiet cycle logged:\n%s", buf.String())
	}
	r.agents.set(agentOf(rsB), 1.95)
	cycle(t, m)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line for one change, got %d:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{`msg="weight changed"`, "server=198.51.100.12:80", "old=10", "new=5", "load=1.95", "cpu=1.95", "input=1", "response="} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("log line %q lacks %q", lines[0], want)
		}
	}
}
