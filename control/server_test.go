package control_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"lvs-feedback/control"
	"lvs-feedback/control/api"
	"lvs-feedback/control/controltest"
	"lvs-feedback/internal/buildinfo"
)

// startServer listens on path for the rig's monitor and serves until the
// test ends.
func startServer(t *testing.T, m control.Monitor, path string) *control.Server {
	t.Helper()
	s, err := control.Listen(control.Options{Path: path, Monitor: m})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func TestSocketMode(t *testing.T) {
	r := controltest.New(t, "")
	fi, err := os.Stat(r.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	// Nothing else is left in the directory (the temporary one is gone).
	entries, _ := os.ReadDir(r.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".lvsctl-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestSocketRules(t *testing.T) {
	r := controltest.New(t, "")

	t.Run("world-writable directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		_, err := control.Listen(control.Options{Path: filepath.Join(dir, "c.sock"), Monitor: r.Monitor})
		if err == nil || !strings.Contains(err.Error(), "writable by everyone") {
			t.Errorf("err = %v", err)
		}
		// Also with the sticky bit (/tmp): anyone may still create the name.
		if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
			t.Fatal(err)
		}
		if _, err := control.Listen(control.Options{Path: filepath.Join(dir, "c.sock"), Monitor: r.Monitor}); err == nil {
			t.Error("a sticky world-writable directory was accepted")
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		_, err := control.Listen(control.Options{Path: filepath.Join(t.TempDir(), "no", "c.sock"), Monitor: r.Monitor})
		if err == nil || !strings.Contains(err.Error(), "RuntimeDirectory") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("relative path", func(t *testing.T) {
		if _, err := control.Listen(control.Options{Path: "c.sock", Monitor: r.Monitor}); err == nil {
			t.Error("a relative path was accepted")
		}
	})

	t.Run("stale socket is replaced", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close() // a daemon that died: the file stays, nobody listens
		startServer(t, r.Monitor, path)
		st, err := api.NewClient(path, 5*time.Second).Status(context.Background())
		if err != nil || st.Version != api.ProtocolVersion {
			t.Errorf("status over the new socket: %v", err)
		}
	})

	t.Run("live socket is refused", func(t *testing.T) {
		_, err := control.Listen(control.Options{Path: r.Socket, Monitor: r.Monitor})
		if err == nil || !strings.Contains(err.Error(), "already running") {
			t.Errorf("err = %v", err)
		}
		// The running server still answers.
		if _, err := api.NewClient(r.Socket, 5*time.Second).Status(context.Background()); err != nil {
			t.Error(err)
		}
	})

	t.Run("a file in the way is not removed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.sock")
		if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := control.Listen(control.Options{Path: path, Monitor: r.Monitor})
		if err == nil || !strings.Contains(err.Error(), "regular file") {
			t.Errorf("err = %v", err)
		}
		if b, _ := os.ReadFile(path); string(b) != "precious" {
			t.Error("the file was touched")
		}
	})

	t.Run("shutdown removes the socket", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.sock")
		s := startServer(t, r.Monitor, path)
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket left after shutdown: %v", err)
		}
	})
}

func TestProtocolErrors(t *testing.T) {
	r := controltest.New(t, "")
	c := api.NewClient(r.Socket, 5*time.Second)
	ctx := context.Background()

	// Before the first cycle explain has nothing to say.
	_, err := c.Explain(ctx, "192.0.2.10:80/tcp", "198.51.100.11:80")
	var ce *api.Error
	if !errors.As(err, &ce) || ce.Code != api.CodeUnavailable || ce.Status != http.StatusServiceUnavailable {
		t.Errorf("explain before a cycle: %v", err)
	}
	r.Cycle()
	for _, tt := range []struct {
		name    string
		call    func() error
		code    string
		status  int
		message string
	}{
		{"malformed service", func() error { _, err := c.Drain(ctx, "nonsense", "198.51.100.11:80"); return err },
			api.CodeBadRequest, http.StatusBadRequest, "nonsense"},
		{"unlisted server", func() error { _, err := c.Drain(ctx, "192.0.2.10:80/tcp", "198.51.100.99:80"); return err },
			api.CodeNotManaged, http.StatusNotFound, "use ipvsadm"},
		{"server missing from the table", func() error {
			_, err := c.Connections(ctx, "192.0.2.10:80/tcp", "198.51.100.77:80")
			return err
		}, api.CodeNotFound, http.StatusNotFound, "not found"},
		{"no reload function", func() error {
			path := filepath.Join(t.TempDir(), "c.sock")
			startServer(t, r.Monitor, path)
			_, err := api.NewClient(path, time.Second).Reload(ctx)
			return err
		}, api.CodeUnavailable, http.StatusServiceUnavailable, "cannot reload"},
	} {
		err := tt.call()
		if !errors.As(err, &ce) || ce.Code != tt.code || ce.Status != tt.status || !strings.Contains(ce.Message, tt.message) {
			t.Errorf("%s: %v (%+v)", tt.name, err, ce)
		}
	}

	// Unknown request, unknown body field.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", r.Socket)
	}}}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/nothing", ""},
		{"GET", "/v1/drain", ""},
		{"POST", "/v1/drain", `{"service":"192.0.2.10:80/tcp","server":"198.51.100.11:80","force":true}`},
		{"POST", "/v1/drain", strings.Repeat("x", 10000)},
	} {
		hreq, _ := http.NewRequest(req.method, "http://x"+req.path, strings.NewReader(req.body))
		resp, err := hc.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("%s %s: status %d, want 4xx", req.method, req.path, resp.StatusCode)
		}
	}
	if w := r.Weight(controltest.A); w == 0 {
		t.Error("a refused request drained A")
	}
}

// The explanation's numbers are the monitor's: every term's product is
// its input times its coefficient, and they sum to the load.
func TestExplanationAddsUp(t *testing.T) {
	r := controltest.New(t, "")
	r.Agents.Set(controltest.A, controltest.Load{CPU: 0.2, Memory: 0.3, Disk: 0.1, Processes: 0.25})
	r.Cycle()
	r.Cycle()
	e, err := api.NewClient(r.Socket, 5*time.Second).Explain(context.Background(), "192.0.2.10:80/tcp", "198.51.100.11:80")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Monitor.Explain(controltest.Service, controltest.A)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for i, term := range e.Terms {
		if term.Normalised != m.Terms[i].Input || term.Coefficient != m.Terms[i].Coefficient || term.Product != m.Terms[i].Product {
			t.Errorf("term %s: %+v, monitor %+v", term.Name, term, m.Terms[i])
		}
		sum += term.Product
	}
	tr := m.Dest.Decision.Trace
	if e.Load == nil || *e.Load != tr.Load || abs(sum-*e.Load) > 1e-12 {
		t.Errorf("load %v, terms sum to %v, monitor %v", e.Load, sum, tr.Load)
	}
	if f := e.Formula; f == nil || tr.Formula == nil || f.Step != tr.Formula.Step || f.After != tr.CtrlAfter || f.Next != m.Dest.KernelWeight || f.KernelBefore != m.Dest.Decision.Before {
		t.Errorf("formula %+v, monitor %+v after %v kernel %d", e.Formula, tr.Formula, tr.CtrlAfter, m.Dest.KernelWeight)
	}
	if e.Decision != m.Decision {
		t.Errorf("decision %q, monitor %q", e.Decision, m.Decision)
	}
	// A drained server has no formula.
	if err := r.Monitor.Drain(controltest.Service, controltest.B); err != nil {
		t.Fatal(err)
	}
	r.Cycle()
	e, err = api.NewClient(r.Socket, 5*time.Second).Explain(context.Background(), "192.0.2.10:80/tcp", "198.51.100.12:80")
	if err != nil || e.Formula != nil || e.State != api.StateDrained || !strings.Contains(e.Decision, "drained") {
		t.Errorf("drained: %+v %v", e, err)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestExplainAfterAnEditBetweenCycles: after an ipvsadm edit between
// cycles, explain compares the formula's result with the weight the cycle
// read — not the weight the previous cycle wrote — and its threshold line
// agrees with the decision.
func TestExplainAfterAnEditBetweenCycles(t *testing.T) {
	r := controltest.New(t, "")
	r.Agents.Set(controltest.A, controltest.Load{CPU: 0.1, Memory: 0.1, Disk: 0.1, Processes: 0.1})
	r.Cycle()
	r.Cycle()
	before := r.Weight(controltest.A)
	if err := r.Table.SetWeight(controltest.Service, controltest.A, before, 4); err != nil { // ipvsadm -e … -w 4
		t.Fatal(err)
	}
	r.Agents.Set(controltest.A, controltest.Load{CPU: 1, Memory: 1, Disk: 1, Processes: 1})
	rep := r.Cycle()
	c := api.NewClient(r.Socket, 5*time.Second)
	e, err := c.Explain(context.Background(), "192.0.2.10:80/tcp", "198.51.100.11:80")
	if err != nil {
		t.Fatal(err)
	}
	var wrote bool
	for _, d := range rep.Dests {
		if d.Key.Dest == controltest.A {
			wrote = d.Outcome.Wrote
		}
	}
	f := e.Formula
	if f == nil {
		t.Fatalf("no formula in %+v (weight before the edit %d)", e, before)
	}
	if f.KernelBefore != 4 || f.Before != 4 {
		t.Errorf("compared with kernel %d (controller from %v), want the 4 the cycle read (the previous cycle wrote %d)", f.KernelBefore, f.Before, before)
	}
	if wrote != (f.Passes || f.Overrule != "") || wrote != strings.HasPrefix(e.Decision, "written") || f.Next != r.Weight(controltest.A) {
		t.Errorf("threshold line (passes %v, overrule %q, next %d) disagrees with the decision %q (wrote %v, kernel %d)",
			f.Passes, f.Overrule, f.Next, e.Decision, wrote, r.Weight(controltest.A))
	}
	if !wrote {
		t.Errorf("a load far above the target from 4 wrote nothing: %q", e.Decision)
	}
}

// TestStaleAgentFiguresAbsent: when a server's agent is stale, status and
// explain show its figures as not measured (absent, "-"), not as 0.
func TestStaleAgentFiguresAbsent(t *testing.T) {
	r := controltest.New(t, "")
	r.Cycle()
	r.Agents.Fail(controltest.A)
	r.Advance(time.Minute) // past agent_expiry
	r.Cycle()
	c := api.NewClient(r.Socket, 5*time.Second)
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var a, b *api.ServerStatus
	for i := range st.Services[0].Servers {
		switch s := &st.Services[0].Servers[i]; s.Server {
		case controltest.A.String():
			a = s
		case controltest.B.String():
			b = s
		}
	}
	if a == nil || a.Inputs == nil || !a.DirectorOnly || a.Inputs.CPU != nil || a.Inputs.Memory != nil || a.Inputs.Disk != nil || a.Inputs.Process != nil {
		t.Fatalf("stale A: %+v (inputs %+v)", a, a.Inputs)
	}
	if b == nil || b.Inputs == nil || b.Inputs.CPU == nil {
		t.Fatalf("B, its agent answering: inputs %+v", b.Inputs)
	}
	e, err := c.Explain(context.Background(), "192.0.2.10:80/tcp", controltest.A.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, term := range e.Terms {
		agentFigure := term.Name == "cpu" || term.Name == "memory" || term.Name == "disk" || term.Name == "process"
		if term.NotMeasured != agentFigure || term.NotMeasured && (term.Normalised != 0 || term.Product != 0) {
			t.Errorf("term %s: %+v", term.Name, term)
		}
	}
}

// TestStatusNamesBuild: every status reply carries the daemon's build
// information, what `lvsctl version` prints for the daemon.
func TestStatusNamesBuild(t *testing.T) {
	r := controltest.New(t, "")
	st, err := api.NewClient(r.Socket, 5*time.Second).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := buildinfo.Read()
	if st.Build == nil {
		t.Fatal("status has no build information")
	}
	if st.Build.GoVersion != runtime.Version() || st.Build.Version != want.Version ||
		st.Build.Revision != want.Revision || st.Build.Modified != want.Modified || st.Build.Time != want.Time {
		t.Errorf("build %+v, want %+v with Go %s", *st.Build, want, runtime.Version())
	}
	if st.Build.Version == "" {
		t.Error("empty version: a build without one must say (devel)")
	}
}
