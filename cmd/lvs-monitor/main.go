// Command lvs-monitor is the Monitor Daemon of lvs-feedback. It runs on an
// LVS director, polls the lvs-agent on every real server, probes their
// response times, and adjusts IPVS weights with the dynamic-feedback
// algorithm. See README.md and docs/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lvs-monitor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "/etc/lvs-monitor/lvs-monitor.toml", "configuration file (TOML)")
	check := fs.Bool("check", false, "check the configuration file, print the result and exit 0 (valid) or 1")
	dryRun := fs.Bool("dry-run", false, "compute and log every decision, write nothing (no kernel writes, no state file)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	netns := fs.String("netns", "", "path of the network namespace whose IPVS table to manage (default: this one)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := monitor.LoadConfig(*configPath)
	if *check {
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
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

	table, err := ipvs.OpenKernel(*netns)
	if err != nil {
		log.Error("open IPVS", "error", err)
		return 1
	}
	defer table.Close()

	store, err := monitor.NewFileStore(cfg.StateDir)
	if err != nil {
		log.Error("state", "error", err)
		return 1
	}
	m, err := monitor.New(cfg, monitor.Deps{
		Table:  table,
		Agents: monitor.NewHTTPAgentClient(cfg.AgentTimeout),
		Prober: monitor.NetProber{},
		Store:  store,
		Logger: log,
	}, *dryRun)
	if err != nil {
		log.Error("start", "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("lvs-monitor started", "config", *configPath, "services", len(cfg.Services), "interval", cfg.Interval, "dry_run", *dryRun)
	if err := m.Run(ctx, nil); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("run", "error", err)
		return 1
	}
	log.Info("lvs-monitor stopped")
	return 0
}
