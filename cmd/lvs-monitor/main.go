// Command lvs-monitor is the Monitor Daemon of lvs-feedback. It runs on an
// LVS director, polls the lvs-agent on every real server, probes their
// response times, and adjusts IPVS weights with the dynamic-feedback
// algorithm. See README.md and docs/.
//
// Besides the cycle it serves:
//
//   - Prometheus metrics on metrics_listen (GET /metrics; docs/metrics.md),
//   - the control socket for lvsctl on control_socket (package control),
//   - SIGHUP: re-read the configuration file; an invalid file leaves the
//     running configuration in place (lvsctl status shows the error),
//   - systemd notifications when started by systemd (Type=notify): READY=1
//     after the first complete cycle, WATCHDOG=1 after every cycle when
//     WatchdogSec is set, STATUS= with the last cycle, STOPPING=1 on
//     shutdown.
//
// -print-config prints the effective configuration, each value with where
// it came from, and exits as -check does.
//
// -h prints the flags, -version the build information (package
// internal/buildinfo); both exit 0.
//
// Exit status: 0 after SIGTERM or SIGINT; 1 when it cannot start (bad
// configuration, no IPVS, socket or port in use); 2 on bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lvs-feedback/agent"
	"lvs-feedback/control"
	"lvs-feedback/internal/cmdline"
	"lvs-feedback/monitor"
	"lvs-feedback/scheduler"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lvs-monitor", flag.ContinueOnError)
	configPath := fs.String("config", "/etc/lvs-monitor/lvs-monitor.toml", "configuration file (TOML)")
	check := fs.Bool("check", false, "check the configuration file, print the result (and warnings: settings it ignores) and exit 0 (valid) or 1")
	printConfig := fs.Bool("print-config", false, "check the configuration file like -check; when valid, print the effective configuration (every key, its value and where it came from: FILE:LINE or default) as TOML and exit 0")
	dryRun := fs.Bool("dry-run", false, "compute and log every decision, write nothing (no kernel writes, no state file)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	netns := fs.String("netns", "", "path of the network namespace whose IPVS table to manage (default: this one)")
	tableFile := fs.String("table", "", "with -dry-run: run against the IPVS table saved in `FILE` (ipvsadm -S -n or ipvsadm -L -n output), not the kernel's; print each cycle's would-be writes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: lvs-monitor [flags]\n\n"+
			"Sets the IPVS weights of this director from the load of its real servers (docs/operator-guide.md).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, done := cmdline.Parse(fs, args, stdout, stderr); done {
		return code
	}
	if err := checkTableFlags(*tableFile, *dryRun, *netns); err != nil {
		fmt.Fprintf(stderr, "lvs-monitor: %v\n", err)
		return 2
	}
	if *printConfig {
		text, warnings, err := monitor.EffectiveConfigFile(*configPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, w)
		}
		fmt.Fprint(stdout, text)
		return 0
	}
	cfg, warnings, err := monitor.CheckConfigFile(*configPath)
	if *check {
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		for _, w := range warnings {
			fmt.Fprintln(stderr, w)
		}
		fmt.Fprintf(stdout, "%s: ok (%d services)\n", *configPath, len(cfg.Services))
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "lvs-monitor: -log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err != nil {
		log.Error("configuration", "error", err)
		return 1
	}
	for _, w := range warnings {
		log.Warn("configuration", "warning", w.String())
	}

	table, closeTable, err := openTable(*tableFile, *netns)
	if err != nil {
		log.Error("open IPVS", "error", err)
		return 1
	}
	defer closeTable()

	store, err := openState(cfg.StateDir, *dryRun)
	if err != nil {
		log.Error("state", "error", err)
		return 1
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := monitor.NewMetrics(reg)
	recorder, err := openHistory(cfg, *dryRun, log, metrics)
	if err != nil {
		log.Error("history", "error", err)
		return 1
	}
	defer closeHistory(recorder, log)
	m, err := monitor.New(cfg, monitor.Deps{
		Table: table,
		// Each poll is bounded by the running agent_timeout (a context per
		// poll), so a reload that changes agent_timeout takes effect.
		Agents:  monitor.NewHTTPAgentClient(),
		Prober:  monitor.NetProber{},
		Store:   store,
		Logger:  log,
		Metrics: metrics,
		History: recorder,
	}, *dryRun)
	if err != nil {
		log.Error("start", "error", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var metricsSrv *http.Server
	if cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			log.Error("metrics: cannot listen (metrics_listen)", "error", err)
			return 1
		}
		metricsSrv, _ = serveMetrics(ln, reg, log)
		log.Info("metrics listening", "address", ln.Addr().String(), "path", "/metrics")
	}

	reload := control.FileReloader(*configPath, m)
	ctl, err := control.Listen(control.Options{Path: cfg.ControlSocket, Monitor: m, Reload: reload, Conns: table, Logger: log})
	if err != nil {
		log.Error("control socket (control_socket)", "error", err)
		shutdownHTTP(metricsSrv)
		return 1
	}
	go func() {
		if err := ctl.Serve(); err != nil {
			log.Error("control socket", "error", err)
		}
	}()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			log.Info("SIGHUP: reloading the configuration", "config", *configPath)
			notes, err := reload() // a failure is logged by the monitor
			if err == nil {
				for _, n := range notes {
					log.Warn("reload", "note", n)
				}
			}
		}
	}()

	n := newNotifier(log)
	preview := &wouldWrite{out: stdout}
	if n.watchdog > 0 && n.watchdog < 3*cfg.Interval {
		log.Warn("systemd WatchdogSec is shorter than three intervals: a slow cycle may get lvs-monitor killed; raise WatchdogSec",
			"watchdog", n.watchdog, "interval", cfg.Interval)
	}
	log.Info("lvs-monitor started", "config", *configPath, "services", len(cfg.Services), "interval", cfg.Interval,
		"dry_run", *dryRun, "control_socket", cfg.ControlSocket)
	code := 0
	if err := scheduler.Run(ctx, m, scheduler.Config{Monitor: cfg, Logger: log, DryRun: *dryRun, AfterCycle: func(rep monitor.CycleReport, err error) {
		n.cycleDone(rep, err)
		if *tableFile != "" {
			preview.cycle(rep)
		}
	}}); err != nil {
		log.Error("run", "error", err)
		code = 1
	}
	n.send("STOPPING=1")
	log.Info("lvs-monitor stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ctl.Shutdown(sctx); err != nil {
		log.Warn("control socket shutdown", "error", err)
	}
	shutdownHTTP(metricsSrv)
	log.Info("lvs-monitor stopped")
	return code
}

// newMetricsServer serves reg on /metrics with every timeout set: the
// endpoint may face a network.
// metricsMaxConns bounds the metrics endpoint's open connections. It has
// no authentication: a peer that opens connections and never finishes a
// request must not hold descriptors without end nor starve the scraper,
// so at the limit the waiting connection of the address holding the most
// is closed (agent.ConnLimiter, the same rule as lvs-agent's).
const metricsMaxConns = 16

// serveMetrics serves /metrics on ln, bounded to metricsMaxConns open
// connections, until the returned server is shut down.
func serveMetrics(ln net.Listener, reg *prometheus.Registry, log *slog.Logger) (*http.Server, *agent.ConnLimiter) {
	srv := newMetricsServer(reg, log)
	limited := agent.LimitConns(srv, ln, metricsMaxConns, log)
	go func() {
		if err := srv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "error", err)
		}
	}()
	return srv, limited
}

func newMetricsServer(reg *prometheus.Registry, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg, // promhttp_metric_handler_errors_total
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "lvs-monitor: metrics at /metrics (docs/metrics.md)")
	})
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func shutdownHTTP(s *http.Server) {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// notifier speaks systemd's notify protocol (github.com/coreos/go-systemd
// daemon: NOTIFY_SOCKET, abstract sockets, WATCHDOG_USEC/WATCHDOG_PID).
// Without NOTIFY_SOCKET every call does nothing.
type notifier struct {
	log      *slog.Logger
	watchdog time.Duration // 0: no watchdog

	mu    sync.Mutex
	ready bool
}

func newNotifier(log *slog.Logger) *notifier {
	n := &notifier{log: log}
	if wd, err := daemon.SdWatchdogEnabled(false); err != nil {
		log.Warn("systemd watchdog settings unreadable", "error", err)
	} else {
		n.watchdog = wd
	}
	return n
}

func (n *notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("systemd notify", "error", err)
	}
}

// cycleDone is called after every cycle from the main loop: READY=1 after
// the first, WATCHDOG=1 after each, so that a hung loop stops the pings
// and systemd restarts the daemon.
func (n *notifier) cycleDone(rep monitor.CycleReport, err error) {
	n.mu.Lock()
	first := !n.ready
	n.ready = true
	n.mu.Unlock()
	status := fmt.Sprintf("STATUS=cycle at %s: %d servers, %d weight writes", rep.Start.Format("15:04:05"), len(rep.Dests), rep.Writes)
	if err != nil {
		status += ", errors (see the log)"
	}
	msg := status
	if first {
		msg = "READY=1\n" + msg
	}
	if n.watchdog > 0 {
		msg += "\nWATCHDOG=1"
	}
	n.send(msg)
}
