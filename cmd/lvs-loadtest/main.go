// Command lvs-loadtest measures lvs-monitor at scale with real agents on
// loopback: N agent endpoints (default 2,000), each on its own address in
// 127.0.0.0/8 and serving the real lvs-agent handler, polled and probed by
// the real monitor every interval for a bounded time. It reports cycle
// duration (p50, p99, max), how long after the cycle start the last poll
// finished, the director's CPU and RSS, and goroutines and open descriptors
// at the start and the end. See docs/developer/scale.md.
//
// -h prints the flags, -version the build information; both exit 0. Bad
// flags exit 2.
//
// The agents run in a child process (`lvs-loadtest agents`) so that the
// director's own CPU and memory are measured alone. Every address used is
// on loopback; the run stops by itself.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/internal/cmdline"
	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
	"lvs-feedback/scheduler"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agents" {
		os.Exit(runAgents(os.Args[2:]))
	}
	os.Exit(runDirector(os.Args[1:]))
}

// agentAddr is the i-th agent endpoint: 127.1.x.y:9771.
func agentAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)}), agent.DefaultPort)
}

// runAgents serves n agent endpoints until stdin closes (the parent died or
// finished) or the deadline passes. One real sampler of this host feeds them
// all: n samplers would measure the same host n times over.
func runAgents(args []string) int {
	fs := flag.NewFlagSet("agents", flag.ContinueOnError)
	n := fs.Int("n", 2000, "agent endpoints")
	deadline := fs.Duration("deadline", 10*time.Minute, "stop after this long in any case")
	if code, done := cmdline.Parse(fs, args, os.Stdout, os.Stderr); done {
		return code
	}
	src, err := agent.NewHostSource(agent.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := agent.NewSampler(src, time.Second, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()
	go s.Run(ctx)
	h := agent.NewHandler(s)
	for i := range *n {
		ln, err := net.Listen("tcp", agentAddr(i).String())
		if err != nil {
			fmt.Fprintf(os.Stderr, "listen %s: %v\n", agentAddr(i), err)
			return 1
		}
		srv := agent.NewServer("", h, nil)
		go srv.Serve(ln)
	}
	for { // ready once the first sample exists
		if _, err := s.Latest(); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("ready")
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	<-ctx.Done()
	return 0
}

func runDirector(args []string) int {
	fs := flag.NewFlagSet("lvs-loadtest", flag.ContinueOnError)
	n := fs.Int("n", 2000, "real servers, each with its own agent endpoint")
	perService := fs.Int("per-service", 100, "real servers per virtual service")
	interval := fs.Duration("interval", 2*time.Second, "monitor interval")
	duration := fs.Duration("duration", 5*time.Minute, "how long to run")
	keepAlive := fs.Bool("keepalive", false, "keep agent connections open between polls (lvs-monitor does not)")
	concurrency := fs.Int("concurrency", 0, "polls and probes at once (0: the monitor's default)")
	if code, done := cmdline.Parse(fs, args, os.Stdout, os.Stderr); done {
		return code
	}
	if *n < 1 || *n > 65000 || *perService < 1 {
		fmt.Fprintln(os.Stderr, "lvs-loadtest: -n must be 1..65000 and -per-service ≥ 1")
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	child := exec.CommandContext(ctx, self, "agents", "-n", strconv.Itoa(*n), "-deadline", (*duration + time.Minute).String())
	stdin, err := child.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out, err := child.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { stdin.Close(); _ = child.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		fmt.Fprintf(os.Stderr, "agents did not start: %q %v\n", line, err)
		return 1
	}

	cfg, table, err := build(*n, *perService, *interval)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *concurrency > 0 {
		cfg.Concurrency = *concurrency
	}
	store, err := monitor.NewFileStore(cfg.StateDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(cfg.StateDir)
	client := monitor.NewHTTPAgentClient()
	client.Client.Transport.(*http.Transport).DisableKeepAlives = !*keepAlive
	timing := &timedAgents{inner: client}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := monitor.New(cfg, monitor.Deps{Table: table, Agents: timing, Prober: monitor.NetProber{},
		Store: store, Logger: logger}, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	fmt.Printf("lvs-loadtest: %d real servers with agents on 127.1.0.0/16, %d per service, interval %v, for %v, keep-alive %v, concurrency %d\n",
		*n, *perService, *interval, *duration, *keepAlive, cfg.Concurrency)
	start := snapshot()
	cpu0, wall0 := start.cpu, time.Now()
	var cycles, lastPoll []time.Duration
	var errorsSeen int
	runCtx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	first := true
	var startFirst sample
	_ = scheduler.Run(runCtx, m, scheduler.Config{Monitor: cfg, Logger: logger, AfterCycle: func(rep monitor.CycleReport, err error) {
		if err != nil {
			errorsSeen++
		}
		for _, d := range rep.Dests {
			if d.AgentErr != nil || d.ProbeErr != nil {
				errorsSeen++
			}
		}
		if first { // the first cycle opens every connection: reported apart
			first = false
			startFirst = snapshot()
			fmt.Printf("first cycle: %v (opens %d agent connections)\n", rep.Duration.Round(time.Millisecond), *n)
			return
		}
		cycles = append(cycles, rep.Duration)
		lastPoll = append(lastPoll, timing.lastDoneSince(rep.Start))
	}})
	end := snapshot()
	wall := time.Since(wall0)

	fmt.Printf("cycles measured: %d (after the first)\n", len(cycles))
	fmt.Printf("cycle duration: p50 %v  p99 %v  max %v\n", pct(cycles, 50), pct(cycles, 99), pct(cycles, 100))
	fmt.Printf("last agent poll done after cycle start: p50 %v  p99 %v  max %v (target ≤ 500ms)\n", pct(lastPoll, 50), pct(lastPoll, 99), pct(lastPoll, 100))
	fmt.Printf("director CPU: %.1f %% of one core over %v\n", 100*float64(end.cpu-cpu0)/float64(wall), wall.Round(time.Second))
	fmt.Printf("director RSS: start %.1f MB, after first cycle %.1f MB, end %.1f MB (max %.1f MB)\n", mb(start.rss), mb(startFirst.rss), mb(end.rss), mb(end.maxRSS))
	fmt.Printf("goroutines: after first cycle %d, end %d\n", startFirst.goroutines, end.goroutines)
	fmt.Printf("open descriptors: after first cycle %d, end %d\n", startFirst.fds, end.fds)
	fmt.Printf("poll or probe errors: %d\n", errorsSeen)
	return 0
}

// build makes the configuration and the in-memory table: n real servers at
// the agent endpoints' addresses, probed with a TCP connect to that port.
func build(n, perService int, interval time.Duration) (monitor.Config, *ipvs.Mem, error) {
	dir, err := os.MkdirTemp("", "lvs-loadtest-state")
	if err != nil {
		return monitor.Config{}, nil, err
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "interval = %q\nagent_timeout = \"1s\"\nprobe_timeout = \"1s\"\nstate_dir = %q\nmetrics_listen = \"\"\n", interval.String(), dir)
	table := ipvs.NewMem()
	for i := range n {
		if i%perService == 0 {
			svc := ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i / perService)}), uint16(80+i/perService/256))}
			if err := table.AddService(svc, "wlc"); err != nil {
				return monitor.Config{}, nil, err
			}
			fmt.Fprintf(&conf, "[[service]]\naddress = %q\n[service.probe]\ntype = \"tcp\"\n", svc.String())
		}
		rs := agentAddr(i)
		svcs, _ := table.Services()
		if err := table.AddDestination(svcs[len(svcs)-1].Key, rs, 10); err != nil {
			return monitor.Config{}, nil, err
		}
		fmt.Fprintf(&conf, "[[service.server]]\naddress = %q\nweight = 10\nagent = %q\n", rs.String(), rs.String())
	}
	cfg, err := monitor.ParseConfig("loadtest.toml", []byte(conf.String()))
	return cfg, table, err
}

// timedAgents records when the latest poll of a cycle finished.
type timedAgents struct {
	inner monitor.AgentClient
	mu    sync.Mutex
	last  time.Time
}

func (t *timedAgents) Fetch(ctx context.Context, addr string, timeout time.Duration) (agent.Report, error) {
	r, err := t.inner.Fetch(ctx, addr, timeout)
	now := time.Now()
	t.mu.Lock()
	if now.After(t.last) {
		t.last = now
	}
	t.mu.Unlock()
	return r, err
}

func (t *timedAgents) lastDoneSince(start time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last.Sub(start)
}

type sample struct {
	cpu        time.Duration
	rss        int64
	maxRSS     int64
	goroutines int
	fds        int
}

func snapshot() sample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s := sample{
		cpu:        time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		maxRSS:     ru.Maxrss * 1024,
		goroutines: runtime.NumGoroutine(),
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.fds = len(ents)
	}
	if data, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(data)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			s.rss = pages * int64(os.Getpagesize())
		}
	}
	return s
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(time.Millisecond)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
