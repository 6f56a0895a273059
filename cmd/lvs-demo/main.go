// Command lvs-demo shows the dynamic-feedback loop working on one machine,
// without IPVS: `make demo`.
//
// The director role (the default) starts three stand-in real servers (this
// binary re-executed as `lvs-demo backend`), one real lvs-agent per server
// measuring that server's own process (-source process:PID), an in-memory
// IPVS table whose destinations are the servers' real 127.0.0.1 addresses,
// a client that sends about 100 requests a second to them by weighted
// round-robin over the table's current weights, and the real monitor
// (package monitor) with real agent polls and real HTTP probes. Partway
// through it asks server 2 to burn every CPU for a while, prints the
// weights and loads every cycle, and ends with a verdict: exit 0 when
// server 2's weight fell during the hog and recovered after it, 1
// otherwise. See docs/demo.md.
//
// Usage:
//
//	lvs-demo [-duration 30s] [-agent ./bin/lvs-agent] [-hog-at 6s] [-hog-for 12s]
//	         [-interval 1s] [-rate 100] [-table mem|kernel] [-log FILE]
//	         [-state-dir DIR]
//	lvs-demo backend -listen 127.0.0.1:PORT
//
// -h prints the flags, -version the build information; both exit 0.
//
// Exit status: 0 the weight fell and recovered; 1 it did not, or the demo
// could not run; 2 bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"lvs-feedback/internal/cmdline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "backend" {
		os.Exit(runBackend(ctx, args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(runDemo(ctx, args, os.Stdout, os.Stderr))
}

// runDemo is the director role without the process exit.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseDemoFlags(args, stdout, stderr)
	if err != nil {
		if errors.Is(err, errStop) {
			return 0
		}
		return 2
	}
	res, err := runDirector(ctx, o, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "lvs-demo: %v\n", err)
		return 1
	}
	if !res.Verdict.Pass {
		return 1
	}
	return 0
}

// errStop is parseDemoFlags' answer to -h and -version: printed, exit 0.
var errStop = errors.New("help or version printed")

// parseDemoFlags parses and checks the director's command line. Help and
// -version go to stdout (the error is then errStop), mistakes to stderr.
func parseDemoFlags(args []string, stdout, stderr io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("lvs-demo", flag.ContinueOnError)
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long the monitor runs")
	fs.StringVar(&o.AgentPath, "agent", o.AgentPath, "`path` of the lvs-agent binary (make build puts it in ./bin)")
	fs.DurationVar(&o.HogAt, "hog-at", o.HogAt, "when server 2 starts burning every CPU, from the monitor's start")
	fs.DurationVar(&o.HogFor, "hog-for", o.HogFor, "how long server 2 burns every CPU")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "monitor cycle and agent sampling interval")
	fs.IntVar(&o.Rate, "rate", o.Rate, "client requests per second (1 to 1000)")
	fs.StringVar(&o.Table, "table", o.Table, "IPVS table: mem (in-memory, no privileges) or kernel (this host's IPVS; root, modprobe ip_vs)")
	fs.StringVar(&o.LogPath, "log", o.LogPath, "write the monitor's full log (info level) to `file`; default: warnings and errors to stderr")
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "keep the monitor's state and cycle history (history.bin) in `dir`, created if missing; default: a temporary directory removed at exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: lvs-demo [flags]\n       lvs-demo backend -listen 127.0.0.1:PORT\n\n"+
			"Three local servers, three real lvs-agents, the real monitor and real traffic;\n"+
			"server 2 is hogged for a while and its weight falls and recovers.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, done := cmdline.Parse(fs, args, stdout, stderr); done {
		if code == cmdline.ExitOK {
			return o, errStop
		}
		return o, errors.New("bad flags")
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q (flags only, or the backend role)", fs.Arg(0))
		fmt.Fprintf(stderr, "lvs-demo: %v\n", err)
		return o, err
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "lvs-demo: %v\n", err)
		return o, err
	}
	return o, nil
}

// options configure the director role.
type options struct {
	Duration  time.Duration
	AgentPath string
	HogAt     time.Duration
	HogFor    time.Duration
	Interval  time.Duration
	Rate      int
	Table     string // "mem" or "kernel"
	LogPath   string // "" = monitor warnings to stderr
	StateDir  string // "" = a temporary state directory, removed at exit
	// Stderr receives the monitor's warnings when LogPath is empty
	// (default os.Stderr). Tests set it.
	Stderr io.Writer
	// BackendCommand is the program and leading arguments that start a
	// backend; "-listen ADDR" is appended. Default: this executable with
	// "backend". Tests point it at the test binary.
	BackendCommand []string
	// BackendEnv is added to each backend's environment.
	BackendEnv []string
}

func defaultOptions() options {
	return options{
		Duration:  30 * time.Second,
		AgentPath: "./bin/lvs-agent",
		HogAt:     6 * time.Second,
		HogFor:    12 * time.Second,
		Interval:  time.Second,
		Rate:      100,
		Table:     "mem",
	}
}

func (o options) check() error {
	switch {
	case o.Interval < 200*time.Millisecond || o.Interval > time.Minute:
		return fmt.Errorf("-interval %v: want 200ms to 1m", o.Interval)
	case o.Duration < 3*o.Interval || o.Duration > time.Hour:
		return fmt.Errorf("-duration %v: want at least three intervals (%v) and at most 1h", o.Duration, 3*o.Interval)
	case o.HogAt < 0 || o.HogFor <= 0 || o.HogFor > maxHog:
		return fmt.Errorf("-hog-at %v -hog-for %v: want -hog-at ≥ 0 and -hog-for from 1ns to %v", o.HogAt, o.HogFor, maxHog)
	case o.HogAt+o.HogFor >= o.Duration:
		return fmt.Errorf("-hog-at %v + -hog-for %v must end before -duration %v, or there is no recovery to see", o.HogAt, o.HogFor, o.Duration)
	case o.Rate < 1 || o.Rate > 1000:
		return fmt.Errorf("-rate %d: want 1 to 1000", o.Rate)
	case o.Table != "mem" && o.Table != "kernel":
		return fmt.Errorf("-table %q: want mem or kernel", o.Table)
	case o.AgentPath == "":
		return errors.New("-agent: empty path")
	}
	return nil
}
