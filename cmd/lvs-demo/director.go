package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
	"lvs-feedback/scheduler"
)

// The demo's virtual service: a documentation address (RFC 5737), used
// only as the service's name in the table. Nothing is ever sent to it.
const demoService = "192.0.2.1:80/tcp"

const (
	numServers    = 3
	hogServer     = 2 // 1-based: the server that gets hogged
	defaultWeight = 10
	startAttempts = 3 // a child whose port was taken is restarted on another
	readyTimeout  = 15 * time.Second
)

// server is one stand-in real server with its agent.
type server struct {
	n         int // 1-based
	addr      netip.AddrPort
	backend   *child
	agentAddr string
	agent     *child
}

func (s *server) pid() int { return s.backend.cmd.Process.Pid }

// result is what a demo run produced.
type result struct {
	Cycles  []cycleRecord
	Verdict verdict
	// PIDs are the child processes the demo started (backends and agents);
	// all of them have exited when runDirector returns.
	PIDs []int
}

// runDirector runs the whole demo and prints its table to out. The error is
// for a demo that could not run; a demo that ran but did not show the fall
// and recovery returns a failed Verdict.
func runDirector(ctx context.Context, o options, out io.Writer) (result, error) {
	var res result
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if st, err := os.Stat(o.AgentPath); err != nil || st.IsDir() {
		return res, fmt.Errorf("lvs-agent binary not found at %q: run `make build`, or pass -agent PATH", o.AgentPath)
	}
	backendCmd := o.BackendCommand
	if len(backendCmd) == 0 {
		self, err := os.Executable()
		if err != nil {
			return res, fmt.Errorf("find this executable to start the backends: %w", err)
		}
		backendCmd = []string{self, "backend"}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var procs children
	defer procs.stopAll(3 * time.Second)

	servers, err := startServers(ctx, &procs, o, backendCmd)
	if err != nil {
		return res, err
	}
	for _, s := range servers {
		res.PIDs = append(res.PIDs, s.pid(), s.agent.cmd.Process.Pid)
	}

	table, count, closeTable, err := openTable(o.Table)
	if err != nil {
		return res, err
	}
	defer closeTable()
	svc, err := ipvs.ParseServiceKey(demoService)
	if err != nil {
		return res, fmt.Errorf("demo service: %w", err)
	}
	if err := buildService(table, svc, servers); err != nil {
		return res, err
	}
	defer func() {
		// Leave the table as we found it (this matters with -table kernel).
		_ = table.RemoveService(svc)
	}()

	stateDir, removeState, err := openStateDir(o.StateDir)
	if err != nil {
		return res, err
	}
	defer removeState()
	cfgText := demoConfig(o.Interval, stateDir, servers)
	cfg, err := monitor.ParseConfig("lvs-demo (built-in)", []byte(cfgText))
	if err != nil {
		return res, fmt.Errorf("demo configuration: %w", err)
	}
	if o.StateDir != "" {
		// The configuration beside the history it made, for lvs-tune
		// regress -config.
		if err := os.WriteFile(filepath.Join(stateDir, "lvs-demo.toml"), []byte(cfgText), 0o644); err != nil {
			return res, fmt.Errorf("-state-dir: %w", err)
		}
	}
	store, err := monitor.NewFileStore(stateDir)
	if err != nil {
		return res, err
	}
	logger, closeLog, err := monitorLogger(o)
	if err != nil {
		return res, err
	}
	defer closeLog()
	// The cycle history, as lvs-monitor records it: with -state-dir it
	// outlives the demo and is a real history to read or fit (lvsctl
	// history -dir, lvs-tune regress -dir).
	recorder, err := monitor.OpenRecorder(stateDir, cfg.History, logger, nil)
	if err != nil {
		return res, fmt.Errorf("cycle history: %w", err)
	}
	defer func() {
		if err := recorder.Close(); err != nil {
			fmt.Fprintf(o.Stderr, "lvs-demo: cycle history: %v\n", err)
		}
	}()
	m, err := monitor.New(cfg, monitor.Deps{
		Table:   table,
		Agents:  monitor.NewHTTPAgentClient(),
		Prober:  monitor.NetProber{},
		Store:   store,
		Logger:  logger,
		History: recorder,
	}, false)
	if err != nil {
		return res, fmt.Errorf("start the monitor: %w", err)
	}

	p := newPrinter(out, servers, o)
	p.preamble(cfg)

	start := time.Now()
	runCtx, stopRun := context.WithDeadline(ctx, start.Add(o.Duration))
	defer stopRun()

	cl := newClient(table, svc, o.Rate, count)
	if mem, ok := table.(*ipvs.Mem); ok {
		cl.setActive = mem.SetActive
	}
	var wg sync.WaitGroup
	wg.Go(func() { cl.run(runCtx) })
	hog := &hogEvent{}
	wg.Go(func() { hog.run(runCtx, start, o, servers[hogServer-1]) })

	var cycles []cycleRecord
	runErr := scheduler.Run(runCtx, m, scheduler.Config{Monitor: cfg, Logger: logger, AfterCycle: func(rep monitor.CycleReport, err error) {
		rec := p.row(rep, err, start, hog, cl)
		cycles = append(cycles, rec)
	}})
	stopRun()
	wg.Wait()
	res.Cycles = cycles
	if runErr != nil {
		return res, fmt.Errorf("monitor: %w", runErr)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted after %v: %w", time.Since(start).Round(100*time.Millisecond), err)
	}
	// Every child must still be up: a backend or agent that died would
	// make the verdict about something else.
	for _, s := range servers {
		for _, c := range []*child{s.backend, s.agent} {
			if c.exited() {
				return res, fmt.Errorf("a child process died during the demo: %s", c.describe())
			}
		}
	}
	hs, he, herr := hog.times()
	if herr != nil {
		return res, fmt.Errorf("hog server %d: %w", hogServer, herr)
	}
	res.Verdict = judge(cycles, hs.Sub(start), he.Sub(start), o.Interval)
	p.summary(cl)
	p.verdict(res.Verdict)
	if o.StateDir != "" {
		fmt.Fprintf(out, "cycle history kept in %s, the configuration in %s\n", recorder.Path(), filepath.Join(stateDir, "lvs-demo.toml"))
	}
	return res, nil
}

// openStateDir returns the monitor's state directory: dir, created if
// missing and kept, or (dir empty) a temporary one that remove deletes.
func openStateDir(dir string) (path string, remove func(), err error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("-state-dir: %w", err)
		}
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "lvs-demo-state-")
	if err != nil {
		return "", nil, fmt.Errorf("state directory: %w", err)
	}
	return tmp, func() { _ = os.RemoveAll(tmp) }, nil
}

// startServers starts the backends, then one agent per backend, and waits
// until each answers.
func startServers(ctx context.Context, procs *children, o options, backendCmd []string) ([]*server, error) {
	servers := make([]*server, numServers)
	for i := range servers {
		s := &server{n: i + 1}
		name := fmt.Sprintf("backend s%d", s.n)
		var err error
		s.backend, s.addr, err = startReady(ctx, procs, name, backendCmd[0], func(addr string) []string {
			return slices.Concat(backendCmd[1:], []string{"-listen", addr})
		}, o.BackendEnv, waitBackend)
		if err != nil {
			return nil, err
		}
		servers[i] = s
	}
	for _, s := range servers {
		name := fmt.Sprintf("lvs-agent s%d", s.n)
		pid := s.pid()
		waitAgent := func(ctx context.Context, c *child, addr string) error {
			return waitAgentReady(ctx, c, addr, pid)
		}
		c, addr, err := startReady(ctx, procs, name, o.AgentPath, func(addr string) []string {
			return []string{"-listen", addr, "-interval", o.Interval.String(),
				"-source", "process:" + strconv.Itoa(pid), "-log-level", "warn"}
		}, nil, waitAgent)
		if err != nil {
			return nil, err
		}
		s.agent, s.agentAddr = c, addr.String()
	}
	return servers, nil
}

// startReady starts a child listening on a free 127.0.0.1 port and waits
// for it with ready. A child that exits before it is ready (its port was
// taken meanwhile) is started again on another port, a few times.
func startReady(ctx context.Context, procs *children, name, path string, args func(addr string) []string,
	env []string, ready func(context.Context, *child, string) error) (*child, netip.AddrPort, error) {
	var lastErr error
	for range startAttempts {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return nil, netip.AddrPort{}, err
		}
		c, err := procs.start(name, path, args(addr), env)
		if err != nil {
			return nil, netip.AddrPort{}, err
		}
		err = ready(ctx, c, addr)
		if err == nil {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, netip.AddrPort{}, fmt.Errorf("%s: address %q: %w", name, addr, err)
			}
			return c, ap, nil
		}
		lastErr = err
		if !errors.Is(err, errChildExited) {
			break
		}
	}
	return nil, netip.AddrPort{}, lastErr
}

// poll calls try every 50 ms until it returns nil, the child exits, ctx
// ends or readyTimeout passes.
func poll(parent context.Context, c *child, what string, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, readyTimeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var lastErr error
	for {
		if c.exited() {
			return fmt.Errorf("%s %w: %s", c.name, errChildExited, c.describe())
		}
		tryCtx, done := context.WithTimeout(ctx, time.Second)
		lastErr = try(tryCtx)
		done()
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if c.exited() {
				return fmt.Errorf("%s %w: %s", c.name, errChildExited, c.describe())
			}
			if err := parent.Err(); err != nil {
				return fmt.Errorf("interrupted while waiting for %s: %w", c.name, err)
			}
			return fmt.Errorf("%s not %s after %v: %w; %s", c.name, what, readyTimeout, lastErr, c.describe())
		case <-t.C:
		}
	}
}

// waitBackend waits until the backend at addr answers GET / with its own
// PID: the process answering is the one we started.
func waitBackend(ctx context.Context, c *child, addr string) error {
	want := fmt.Sprintf("%s%d ", backendBanner, c.cmd.Process.Pid)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	return poll(ctx, c, "answering", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), want) {
			return fmt.Errorf("%s answered %d %q, want 200 %q…", addr, resp.StatusCode, body, want)
		}
		return nil
	})
}

// waitAgentReady waits until the agent at addr serves a load report of the
// backend process pid (it needs two samples, one interval apart).
func waitAgentReady(ctx context.Context, c *child, addr string, pid int) error {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	return poll(ctx, c, "serving a load report", func(ctx context.Context) error {
		rep, err := agent.Fetch(ctx, hc, "http://"+addr)
		if err != nil {
			return err
		}
		if rep.Raw.PID != pid {
			return fmt.Errorf("agent %s reports PID %d, want %d", addr, rep.Raw.PID, pid)
		}
		return nil
	})
}

// openTable returns the IPVS table to drive, the connection counter the
// client bumps (nil for the kernel, which counts its own) and a close
// function.
func openTable(kind string) (ipvs.Admin, func(ipvs.ServiceKey, netip.AddrPort) error, func(), error) {
	switch kind {
	case "mem":
		mem := ipvs.NewMem()
		return mem, mem.RecordConnection, func() {}, nil
	case "kernel":
		k, err := ipvs.OpenKernel("")
		if err != nil {
			return nil, nil, nil, fmt.Errorf("-table kernel: %w", err)
		}
		return k, nil, func() { k.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown table %q", kind)
}

// buildService adds the demo's virtual service (wrr) with the servers at
// the default weight. A service already there is refused: it belongs to
// someone else.
func buildService(t ipvs.Admin, svc ipvs.ServiceKey, servers []*server) error {
	if err := t.AddService(svc, "wrr"); err != nil {
		if errors.Is(err, ipvs.ErrExist) {
			return fmt.Errorf("the IPVS table already has a service %s; the demo leaves it alone and stops: %w", svc, err)
		}
		return fmt.Errorf("build the demo table: %w", err)
	}
	for _, s := range servers {
		if err := t.AddDestination(svc, s.addr, defaultWeight); err != nil {
			_ = t.RemoveService(svc)
			return fmt.Errorf("build the demo table: %w", err)
		}
	}
	return nil
}

// demoConfig is the monitor configuration of the demo, in the same TOML an
// operator writes (docs/examples/lvs-monitor.toml). It runs the default
// controller ("capacity"): the hogged server serves the same connections
// with far more CPU, so its capacity per unit of weight falls below its
// peers' (docs/demo.md).
func demoConfig(interval time.Duration, stateDir string, servers []*server) string {
	timeout := interval * 6 / 10
	var b strings.Builder
	fmt.Fprintf(&b, `interval = %q
agent_timeout = %q
probe_timeout = %q
concurrency = 8
state_dir = %q
metrics_listen = ""

[coefficients]
input    = 0.1
cpu      = 0.4
memory   = 0.0
disk     = 0.0
response = 0.3
process  = 0.2

[weight]
controller = "capacity"
min        = 1

[availability]
freeze_share     = 0.5
agent_expiry     = %q
slow_start       = %q
slow_start_floor = 0.1

[[service]]
address = %q

[service.probe]
type          = "http"
path          = "/"
expect_status = 200
reference     = "10ms"
`, interval, timeout, timeout, stateDir, 5*interval, 5*interval, demoService)
	for _, s := range servers {
		fmt.Fprintf(&b, `
[[service.server]]
address = %q
weight  = %d
agent   = %q
`, s.addr, defaultWeight, s.agentAddr)
	}
	return b.String()
}

// monitorLogger returns the monitor's logger: everything from info up to
// the -log file, or warnings and errors to stderr.
func monitorLogger(o options) (*slog.Logger, func(), error) {
	if o.LogPath == "" {
		return slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), func() {}, nil
	}
	f, err := os.Create(o.LogPath)
	if err != nil {
		return nil, nil, fmt.Errorf("monitor log: %w", err)
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo})), func() { f.Close() }, nil
}

// hogEvent sends POST /hog to one server at the planned time and records
// when the hog runs.
type hogEvent struct {
	mu         sync.Mutex
	sent       bool
	start, end time.Time
	err        error
}

func (h *hogEvent) run(ctx context.Context, t0 time.Time, o options, s *server) {
	t := time.NewTimer(time.Until(t0.Add(o.HogAt)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		h.fail(errors.New("the demo ended before the hog was due"))
		return
	case <-t.C:
	}
	url := fmt.Sprintf("http://%s/hog?for=%s", s.addr, o.HogFor)
	reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, url, nil)
	if err != nil {
		h.fail(fmt.Errorf("POST %s: %w", url, err))
		return
	}
	start := time.Now()
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}).Do(req)
	if err != nil {
		h.fail(fmt.Errorf("POST %s: %w", url, err))
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusAccepted {
		h.fail(fmt.Errorf("POST %s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body))))
		return
	}
	h.mu.Lock()
	h.sent, h.start, h.end = true, start, start.Add(o.HogFor)
	h.mu.Unlock()
}

func (h *hogEvent) fail(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

// times returns when the hog started and ends; an error if it was never
// started.
func (h *hogEvent) times() (time.Time, time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return time.Time{}, time.Time{}, h.err
	}
	if !h.sent {
		return time.Time{}, time.Time{}, errors.New("the hog was never started")
	}
	return h.start, h.end, nil
}

// state reports, for a moment t, whether the hog was sent, whether it runs
// at t, and the error if sending it failed.
func (h *hogEvent) state(t time.Time) (sent, running bool, start, end time.Time, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent, h.sent && !t.Before(h.start) && t.Before(h.end), h.start, h.end, h.err
}
