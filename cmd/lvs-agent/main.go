// Command lvs-agent runs on each real server and serves its load to the
// lvs-feedback monitor on the director: GET /v1/load returns the latest
// sample as JSON. See docs/agent.md.
//
// Usage:
//
//	lvs-agent [-listen :9771] [-interval 1s] [-sample poll|interval] [-source host|cgroup:PATH|process:PID|pidfile:PATH]
//	          [-disk-mounts /,/var] [-disk-devices sda,nvme0n1] [-max-conns 64] [-log-level info]
//	          [-agent-check-listen 127.0.0.1:9777 [-drain-file /run/lvs-agent/drain]]
//
// -h prints the flags, -version the build information; both exit 0. Bad
// flags exit with status 2; a failure while running exits with 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"lvs-feedback/agent"
	"lvs-feedback/internal/cmdline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil))
}

// config is the parsed command line.
type config struct {
	listen   string
	interval time.Duration
	onPoll   bool // read when polled (-sample poll), not every interval
	source   string
	mounts   []string
	devices  []string // the only block devices whose I/O counts; empty: every disk
	maxConns int
	level    slog.Level

	agentCheckListen string // HAProxy agent-check TCP address; empty: off
	drainFile        string // while it exists, agent-check answers "drain"
}

// errStop is parseFlags' answer to -h and -version: printed, exit 0.
var errStop = errors.New("help or version printed")

// parseFlags parses and checks the command line. Help and -version go to
// stdout (the error is then errStop), mistakes to stderr.
func parseFlags(args []string, stdout, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("lvs-agent", flag.ContinueOnError)
	fs.StringVar(&c.listen, "listen", ":"+strconv.Itoa(agent.DefaultPort), "`address` to serve /v1/load on")
	c.interval = time.Second
	fs.Var(durationFlag{&c.interval}, "interval", "sampling `interval` with a unit, such as 1s or 500ms (at least 100ms)")
	sample := fs.String("sample", "poll", "when to read the source: poll (when a poll or agent-check finds the latest sample an -interval old, else every 10s) or interval (every -interval)")
	fs.StringVar(&c.source, "source", "host", "what to measure: host, cgroup:PATH, process:PID or pidfile:PATH")
	mounts := fs.String("disk-mounts", "/", "comma-separated `mount points` whose space use counts as disk load")
	devices := fs.String("disk-devices", "", "comma-separated block `devices` (names as in /proc/diskstats, e.g. sda,nvme0n1) whose I/O busy time alone counts as disk load; default every device but loop, ram and zram")
	fs.IntVar(&c.maxConns, "max-conns", agent.DefaultMaxConns, "at most this many `connections` open at once (1 to 65536); at the limit one that sent no request, from the address holding the most, is closed")
	level := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&c.agentCheckListen, "agent-check-listen", "", "also answer HAProxy's agent-check on this TCP `address` (docs/haproxy.md); empty: off")
	fs.StringVar(&c.drainFile, "drain-file", "", "while this `file` exists, agent-check answers \"drain\" (absolute path; needs -agent-check-listen)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: lvs-agent [flags]\n\nServes this server's load to the lvs-feedback monitor.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, done := cmdline.Parse(fs, args, stdout, stderr); done {
		if code == cmdline.ExitOK {
			return c, errStop
		}
		return c, errors.New("bad flags")
	}
	bad := func(format string, a ...any) (config, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(stderr, "lvs-agent: %v\n", err)
		return c, err
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if _, port, err := net.SplitHostPort(c.listen); err != nil {
		return bad("-listen %q: %v", c.listen, err)
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return bad("-listen %q: bad port", c.listen)
	}
	if c.interval < agent.MinInterval || c.interval > time.Hour {
		return bad("-interval %v: want %v to 1h", c.interval, agent.MinInterval)
	}
	switch *sample {
	case "poll":
		c.onPoll = true
	case "interval":
	default:
		return bad("-sample %q: want poll or interval", *sample)
	}
	if c.maxConns < 1 || c.maxConns > 65536 {
		return bad("-max-conns %d: want 1 to 65536", c.maxConns)
	}
	for _, m := range strings.Split(*mounts, ",") {
		if m = strings.TrimSpace(m); m != "" {
			c.mounts = append(c.mounts, m)
		}
	}
	if len(c.mounts) == 0 {
		return bad("-disk-mounts is empty")
	}
	devicesSet := false
	fs.Visit(func(f *flag.Flag) { devicesSet = devicesSet || f.Name == "disk-devices" })
	if devicesSet {
		if strings.TrimSpace(*devices) == "" {
			return bad("-disk-devices is empty (leave it out to count every disk)")
		}
		for _, d := range strings.Split(*devices, ",") {
			c.devices = append(c.devices, strings.TrimSpace(d))
		}
		if err := agent.CheckDiskDevices(c.devices); err != nil {
			return bad("-disk-devices %q: %v", *devices, err)
		}
	}
	if err := c.level.UnmarshalText([]byte(*level)); err != nil {
		return bad("-log-level %q: want debug, info, warn or error", *level)
	}
	if c.agentCheckListen != "" {
		if _, port, err := net.SplitHostPort(c.agentCheckListen); err != nil {
			return bad("-agent-check-listen %q: %v", c.agentCheckListen, err)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return bad("-agent-check-listen %q: bad port", c.agentCheckListen)
		}
	} else if c.drainFile != "" {
		return bad("-drain-file needs -agent-check-listen (only HAProxy's agent-check reads it)")
	}
	return c, nil
}

// durationFlag is a duration flag whose error says what a duration looks
// like: flag.Duration answers "-interval 5" with a bare "parse error".
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err == nil {
		*f.d = d
		return nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
		return fmt.Errorf("%q has no unit; write e.g. %ss or %sms", s, s, s)
	}
	return fmt.Errorf("%q is not a duration; write e.g. 1s or 500ms (units ns, us, ms, s, m, h)", s)
}

// run is main without the process exit, for tests. ready, if not nil, is
// called with the listening address once the server accepts connections.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, ready func(net.Addr)) int {
	c, err := parseFlags(args, stdout, stderr)
	if err != nil {
		if errors.Is(err, errStop) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.level}))
	opts := agent.Options{DiskMounts: c.mounts, DiskDevices: c.devices}
	src, err := agent.ParseSource(c.source, opts)
	if err != nil {
		fmt.Fprintf(stderr, "lvs-agent: -source: %v\n", err)
		return 2
	}
	// A named device that is not there (yet) is not refused: a disk may be
	// attached after the agent starts, and counts from then on. Said once.
	if absent, err := agent.AbsentDiskDevices(opts); err != nil {
		log.Warn("cannot check -disk-devices", "err", err)
	} else if len(absent) > 0 {
		log.Warn("-disk-devices not in /proc/diskstats: they count nothing until they appear", "devices", strings.Join(absent, ","))
	}
	// Check every mount once, so a typo is refused now rather than
	// reported as a sampling error forever.
	for _, m := range c.mounts {
		var st unix.Statfs_t
		if err := unix.Statfs(m, &st); err != nil {
			fmt.Fprintf(stderr, "lvs-agent: -disk-mounts: %s: %v\n", m, err)
			return 2
		}
	}
	sampler, err := agent.NewSampler(src, c.interval, log)
	if err != nil {
		fmt.Fprintf(stderr, "lvs-agent: %v\n", err)
		return 2
	}
	if c.onPoll {
		sampler.SampleOnPoll()
	}
	// HAProxy's agent-check, answered from the same sampler (docs/haproxy.md).
	var ac *agent.AgentCheck
	if c.agentCheckListen != "" {
		if ac, err = agent.NewAgentCheck(sampler, agent.AgentCheckOptions{DrainFile: c.drainFile, MaxConns: c.maxConns}, log); err != nil {
			fmt.Fprintf(stderr, "lvs-agent: -drain-file: %v\n", err)
			return 2
		}
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	srv := agent.NewServer(c.listen, agent.NewHandler(sampler), log)
	limited := agent.LimitConns(srv, ln, c.maxConns, log)
	var acLn net.Listener
	if ac != nil {
		if acLn, err = net.Listen("tcp", c.agentCheckListen); err != nil {
			ln.Close()
			log.Error("cannot listen for agent-check", "err", err)
			return 1
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sampler.Run(ctx)
	}()
	served := make(chan error, 2)
	go func() { served <- srv.Serve(limited) }()
	agentChecked := make(chan struct{})
	if ac == nil {
		close(agentChecked)
	} else {
		go func() {
			defer close(agentChecked)
			if err := ac.Serve(ctx, acLn); err != nil {
				served <- err
			}
		}()
		log.Info("agent-check listening", "listen", acLn.Addr().String(), "drain_file", c.drainFile)
	}
	log.Info("lvs-agent started", "listen", ln.Addr().String(), "source", src.Name(),
		"interval", c.interval, "on_poll", c.onPoll, "disk_mounts", strings.Join(c.mounts, ","), "disk_devices", strings.Join(c.devices, ","), "max_conns", c.maxConns)
	if ready != nil {
		ready(ln.Addr())
	}
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		notifySystemd(ctx, sampler, log)
	}()

	code := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-served:
		log.Error("server failed", "err", err)
		code = 1
	}
	_, _ = daemon.SdNotify(false, "STOPPING=1")
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
	}
	cancel()
	<-sampled
	<-notified
	<-agentChecked
	return code
}

// notifySystemd speaks systemd's notify protocol when the agent runs as a
// Type=notify service (NOTIFY_SOCKET set): READY=1 once the first sample is
// published (a failed sample counts: the agent then serves the error), then
// WATCHDOG=1 every half WatchdogSec while the sampler is alive, so that a
// sampler stuck in a read gets the agent restarted.
func notifySystemd(ctx context.Context, s *agent.Sampler, log *slog.Logger) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return
	}
	poll := time.NewTicker(max(s.Interval()/10, 10*time.Millisecond))
	defer poll.Stop()
	for {
		if _, err := s.Latest(); !errors.Is(err, agent.ErrNotReady) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
	if _, err := daemon.SdNotify(false, "READY=1"); err != nil {
		log.Warn("systemd notify", "err", err)
	}
	wd, err := daemon.SdWatchdogEnabled(false)
	if err != nil || wd <= 0 {
		return
	}
	t := time.NewTicker(wd / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.Alive() {
			_, _ = daemon.SdNotify(false, "WATCHDOG=1")
		} else {
			log.Warn("sampler stalled: not pinging the systemd watchdog")
		}
	}
}
