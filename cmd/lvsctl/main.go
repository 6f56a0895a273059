// Command lvsctl controls a running lvs-monitor over its control socket:
// status, drain and undrain, explain a weight, reload the configuration,
// check a configuration file, and name the versions running.
//
// Usage:
//
//	lvsctl [-socket PATH] [-config FILE] [-request-timeout D] COMMAND [ARGS]
//	lvsctl -version
//
//	lvsctl status [-o table|json]
//	lvsctl top [-once] [-n N] [-refresh D]
//	lvsctl drain SERVICE SERVER [--wait] [--timeout 10m]
//	lvsctl undrain SERVICE SERVER
//	lvsctl explain SERVICE SERVER [-o table|json]
//	lvsctl history SERVICE [SERVER] [-n N] [-o table|json] [-dir DIR]
//	lvsctl benefit [-window D] [-until now|last|TIME] [-service S] [-dir DIR] [-textfile FILE]
//	lvsctl reload
//	lvsctl check-config FILE
//	lvsctl version
//	lvsctl help [COMMAND]
//
// The commands are the table in commands.go: `lvsctl help COMMAND` and
// `lvsctl COMMAND -h` print one's description, flags and an example on
// stdout and exit 0; lvsctl -h lists them.
//
// SERVICE is "VIP:PORT/PROTO" or "fwmark:N", SERVER is "RIP:PORT", both as
// in the configuration and `ipvsadm -L -n`. The socket is -socket, else
// the control_socket of -config (default /etc/lvs-monitor/lvs-monitor.toml),
// else /run/lvs-monitor/control.sock. Only control_socket is read from the
// file: mistakes elsewhere in it do not hide it (lvs-monitor refuses such a
// file on reload and keeps running, and lvsctl status shows why); a
// missing file, one that is not TOML, or a control_socket that is not an
// absolute path gives the default.
//
// check-config runs `lvs-monitor -check -config FILE`, lvs-monitor being
// found next to lvsctl's executable, else in PATH, and passes on its
// output and exit status: the file is checked by the daemon that will
// read it, and lvsctl links none of the daemon.
//
// benefit runs `lvs-tune benefit`, found the same way, with its flags
// and -config: the replay runs the simulator, which links the monitor.
//
// Exit status:
//
//	0  done
//	1  the request failed or was refused (not a managed server, reload
//	   refused, check-config found mistakes or found no lvs-monitor, …)
//	2  usage: unknown command, bad flag, missing or malformed argument
//	3  lvs-monitor is unreachable (no socket, not running, not root)
//	4  drain --wait: the timeout passed with connections or persistence
//	   templates left (the drain itself stands)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"

	"lvs-feedback/control/api"
	"lvs-feedback/internal/cmdline"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitWaitTimeout = 4
)

const defaultConfig = "/etc/lvs-monitor/lvs-monitor.toml"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := &cli{stdout: os.Stdout, stderr: os.Stderr, poll: time.Second, now: time.Now}
	os.Exit(c.run(ctx, os.Args[1:]))
}

// cli is one invocation; tests set poll and now.
type cli struct {
	stdout, stderr io.Writer
	poll           time.Duration // drain --wait polling period
	now            func() time.Time
	loc            *time.Location         // times are shown in it (nil: local time)
	executable     func() (string, error) // lvsctl's own path, to find lvs-monitor next to it (nil: os.Executable)

	socket  string
	config  string
	timeout time.Duration
}

// usageError reports a mistake on lvsctl's own command line with the
// usage; commandUsage is the one for a command's arguments.
func (c *cli) usageError(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "lvsctl: "+format+"\n\n", a...)
	printUsage(c.stderr)
	return exitUsage
}

// globalFlags registers the flags every command accepts, so they may come
// before or after the command name.
func (c *cli) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.socket, "socket", c.socket, "control socket `path` of lvs-monitor")
	fs.StringVar(&c.config, "config", c.config, "lvs-monitor's configuration `file`, to find control_socket")
	fs.DurationVar(&c.timeout, "request-timeout", c.timeout, "bound on each request to lvs-monitor")
}

func (c *cli) run(ctx context.Context, args []string) int {
	c.config, c.timeout = defaultConfig, 30*time.Second
	fs := flag.NewFlagSet("lvsctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.globalFlags(fs)
	version := fs.Bool("version", false, "print lvsctl's version and exit")
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		printUsage(c.stdout)
		return exitOK
	case err != nil:
		return c.usageError("%v", err)
	case *version:
		cmdline.PrintVersion(c.stdout, "lvsctl")
		return exitOK
	case fs.NArg() == 0:
		return c.usageError("no command")
	}
	cmd, ok := lookup(fs.Arg(0))
	if !ok {
		return c.usageError("unknown command %q", fs.Arg(0))
	}
	return cmd.run(c, ctx, fs.Args()[1:])
}

// socketPath is the control socket: -socket, else the control_socket of
// -config, else api.DefaultSocket. Only control_socket is read from the
// file, so a file with mistakes elsewhere, such as an edit that
// lvs-monitor refused to reload, still gives its socket; a file that is
// missing or not TOML, or a control_socket that is not an absolute path,
// gives the default.
func (c *cli) socketPath() string {
	if c.socket != "" {
		return c.socket
	}
	var f struct {
		ControlSocket string `toml:"control_socket"`
	}
	if _, err := toml.DecodeFile(c.config, &f); err == nil && strings.HasPrefix(f.ControlSocket, "/") {
		return f.ControlSocket
	}
	return api.DefaultSocket
}

func (c *cli) client() *api.Client {
	return api.NewClient(c.socketPath(), c.timeout)
}

// fail reports a request's error and returns the exit status for it.
func (c *cli) fail(err error) int {
	fmt.Fprintf(c.stderr, "lvsctl: %v\n", err)
	var ue *api.UnreachableError
	if errors.As(err, &ue) {
		return exitUnreachable
	}
	return exitFailed
}

func (c *cli) location() *time.Location {
	if c.loc == nil {
		return time.Local
	}
	return c.loc
}

func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "table", "output `format`: table or json")
}

func (c *cli) checkOutput(o string) bool { return o == "table" || o == "json" }

func (c *cli) printJSON(v any) int {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// ---- drain, undrain

// target checks a command's SERVICE SERVER arguments. On a mistake it
// prints it with the command's usage line and returns false.
func (c *cli) target(cmd string, pos []string) (string, string, bool) {
	var err error
	if len(pos) != 2 {
		err = fmt.Errorf("want SERVICE SERVER, got %d arguments", len(pos))
	} else {
		err = api.CheckTarget(pos[0], pos[1])
	}
	if err != nil {
		c.commandUsage(cmd, "%v", err)
		return "", "", false
	}
	return pos[0], pos[1], true
}

func (c *cli) drain(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	wait := fs.Bool("wait", false, "wait until the server has no connection, active or inactive, and no persistence template")
	timeout := fs.Duration("timeout", 10*time.Minute, "with --wait: give up after this long")
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	svc, srv, ok := c.target("drain", pos)
	if !ok {
		return exitUsage
	}
	if *timeout <= 0 {
		return c.commandUsage("drain", "--timeout must be positive, got %v", *timeout)
	}
	cl := c.client()
	ack, err := cl.Drain(ctx, svc, srv)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "%s %s: %s\n", ack.Service, ack.Server, ack.Message)
	c.warnLocalOnly(ack)
	if !*wait {
		return exitOK
	}
	return c.waitDrained(ctx, cl, ack.Service, ack.Server, *timeout)
}

// waitDrained polls the server's connection counts and persistence
// templates until none is left or timeout passes, printing each change.
func (c *cli) waitDrained(ctx context.Context, cl *api.Client, svc, srv string, timeout time.Duration) int {
	start := c.now()
	deadline := start.Add(timeout)
	var last *drainLeft
	tick := time.NewTicker(c.poll)
	defer tick.Stop()
	for {
		conns, err := cl.Connections(ctx, svc, srv)
		if err != nil {
			return c.fail(err)
		}
		waited := c.now().Sub(start).Round(time.Second)
		if conns.Weight != 0 {
			fmt.Fprintf(c.stderr, "lvsctl: %s %s: weight is %d again: someone undrained it; stopped waiting\n", svc, srv, conns.Weight)
			return exitFailed
		}
		left := leftOf(conns)
		if left.empty() {
			fmt.Fprintf(c.stdout, "drained: %s after %s\n", left.doneText(), waited)
			return exitOK
		}
		if last == nil || *last != left {
			fmt.Fprintf(c.stdout, "waiting: %s (%s)\n", left, waited)
			last = &left
		}
		if !c.now().Before(deadline) {
			fmt.Fprintf(c.stderr, "lvsctl: %s %s: still %s after %s; the server stays drained\n%s", svc, srv, left, timeout, left.timers())
			return exitWaitTimeout
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(c.stderr, "lvsctl: interrupted with %s left; the server stays drained\n", left)
			return exitFailed
		case <-tick.C:
		}
	}
}

// drainLeft is what the kernel still holds for a drained server.
type drainLeft struct {
	active, inactive int
	// templates is -1 when lvs-monitor does not report them (an older
	// one, or one without a live table).
	templates      int
	persistTimeout int // seconds, ipvsadm -p; 0: not persistent
}

func leftOf(c api.Connections) drainLeft {
	l := drainLeft{active: c.ActiveConns, inactive: c.InactiveConns, templates: -1, persistTimeout: c.PersistTimeoutSeconds}
	if c.PersistConns != nil {
		l.templates = *c.PersistConns
	}
	return l
}

// empty: no connection and no template that could bring one.
func (l drainLeft) empty() bool { return l.active == 0 && l.inactive == 0 && l.templates <= 0 }

func (l drainLeft) String() string {
	s := fmt.Sprintf("%d active, %d inactive connections", l.active, l.inactive)
	switch {
	case l.templates == 1:
		s += ", 1 persistence template"
	case l.templates >= 0:
		s += fmt.Sprintf(", %d persistence templates", l.templates)
	}
	return s
}

// doneText says what "drained" means for l (empty).
func (l drainLeft) doneText() string {
	if l.templates < 0 {
		return "no connections left (persistence templates not counted: this lvs-monitor does not report them)"
	}
	return "no connections and no persistence templates left"
}

// timers says, for each kind of entry left, which kernel timer removes it.
func (l drainLeft) timers() string {
	var b strings.Builder
	if l.active > 0 {
		b.WriteString("  active connections: end when client or server closes them, or after the tcp (ESTABLISHED) timeout of silence (ipvsadm -L --timeout)\n")
	}
	if l.inactive > 0 {
		b.WriteString("  inactive connections: each removed when its state's timer ends: TIME_WAIT 120 s, CLOSE_WAIT 60 s, CLOSE 10 s; FIN_WAIT and UDP as tcpfin and udp in ipvsadm -L --timeout\n")
	}
	if l.templates > 0 {
		fmt.Fprintf(&b, "  persistence templates: each removed %d s (ipvsadm -p) after the last new connection it sent, not before its connections are gone; while it lives its client's new connections still come here unless net.ipv4.vs.expire_quiescent_template = 1\n", l.persistTimeout)
	}
	return b.String()
}

func (c *cli) undrain(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("undrain", flag.ContinueOnError)
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	svc, srv, ok := c.target("undrain", pos)
	if !ok {
		return exitUsage
	}
	ack, err := c.client().Undrain(ctx, svc, srv)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.stdout, "%s %s: %s\n", ack.Service, ack.Server, ack.Message)
	c.warnLocalOnly(ack)
	return exitOK
}

// warnLocalOnly tells a script reading stderr that the peer director does
// not hold the request yet: it holds here, and the peer takes it when it
// hears this director again (docs/director-pair.md).
func (c *cli) warnLocalOnly(ack api.Ack) {
	if ack.LocalOnly {
		fmt.Fprintf(c.stderr, "lvsctl: warning: %s %s: not confirmed by the peer director; it takes the change when it hears this one again\n", ack.Service, ack.Server)
	}
}

// ---- explain

func (c *cli) explain(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	out := outputFlag(fs)
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	svc, srv, ok := c.target("explain", pos)
	if !ok {
		return exitUsage
	}
	if !c.checkOutput(*out) {
		return c.commandUsage(fs.Name(), "-o %q: want table or json", *out)
	}
	e, err := c.client().Explain(ctx, svc, srv)
	if err != nil {
		return c.fail(err)
	}
	if *out == "json" {
		return c.printJSON(e)
	}
	printExplanation(c.stdout, e, c.location())
	return exitOK
}

func printExplanation(w io.Writer, e api.Explanation, loc *time.Location) {
	fmt.Fprintf(w, "%s in %s, cycle at %s\n", e.Server, e.Service, e.CycleStart.In(loc).Format("15:04:05"))
	fmt.Fprintf(w, "state %s (%s%s), kernel weight %d, default weight %d\n\n", e.State, e.Ownership, setBy(e.SetBy), e.KernelWeight, e.DefaultWeight)

	sumDirector := 0.0
	for _, t := range e.Terms {
		if t.Name == "input" || t.Name == "response" {
			sumDirector += t.Coefficient
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TERM\tRAW\tNORMALISED\t× COEFFICIENT\t= PRODUCT")
	for _, t := range e.Terms {
		c, p := t.Coefficient, t.Product
		if e.DirectorOnly {
			c, p = 0, 0
			if t.Name == "input" || t.Name == "response" {
				c = t.Coefficient / sumDirector
				p = t.Normalised * c
			}
		}
		if t.NotMeasured {
			fmt.Fprintf(tw, "%s\t%s\t-\t%.3f\t-\n", strings.ToUpper(t.Name), t.Raw, c)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.3f\t%.4f\n", strings.ToUpper(t.Name), t.Raw, t.Normalised, c, p)
	}
	tw.Flush()
	switch {
	case e.Load == nil:
		fmt.Fprintln(w, "\nload: not computed this cycle")
	case e.DirectorOnly:
		fmt.Fprintf(w, "\nload = %.4f  (agent stale: INPUT and RESPONSE only, their coefficients renormalised to sum to 1)\n", *e.Load)
	default:
		fmt.Fprintf(w, "\nload = Σ coefficient × input = %.4f\n", *e.Load)
	}

	if f := e.Formula; f != nil {
		fmt.Fprintf(w, "\nformula    w + gain·∛(target − load) = %.3f + %g·∛(%g − %.4f) = %.3f %s %.3f = %.3f\n",
			f.Before, f.Gain, f.Target, f.Load, f.Before, sign(f.Step), math.Abs(f.Step), f.Raw)
		capNote := "within bounds"
		if f.After != f.Raw {
			capNote = "bounded"
		}
		fmt.Fprintf(w, "cap        [min %g, max %g = scale %g × default %d] → %.3f (%s)\n", f.Min, f.Max, e.Weight.Scale, e.DefaultWeight, f.After, capNote)
		if f.Ramp < 1 {
			fmt.Fprintf(w, "ramp       slow start %.0f%%: max(min, round(%.3f × %.3f)) = %d\n", f.Ramp*100, f.After, f.Ramp, f.Next)
		} else {
			fmt.Fprintf(w, "ramp       none (1): round(%.3f) = %d\n", f.After, f.Next)
		}
		if f.KernelBefore >= 0 {
			verdict := "not more than"
			if f.Passes {
				verdict = "more than"
			}
			line := fmt.Sprintf("threshold  kernel %d → %d: |%d| is %s the threshold %d", f.KernelBefore, f.Next, f.Next-f.KernelBefore, verdict, f.Threshold)
			if f.Overrule != "" {
				line += "; to be written all the same: " + f.Overrule
			}
			fmt.Fprintln(w, line)
		} else {
			fmt.Fprintf(w, "threshold  %d (the kernel weight before the write is not known to this lvs-monitor)\n", f.Threshold)
		}
	} else {
		fmt.Fprintln(w, "\nformula    did not run this cycle")
	}
	fmt.Fprintf(w, "decision   %s\n", e.Decision)
}

func sign(v float64) string {
	if v < 0 {
		return "−"
	}
	return "+"
}

// ---- reload, check-config

func (c *cli) reload(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		return c.commandUsage("reload", "no arguments: lvs-monitor re-reads its own -config file")
	}
	r, err := c.client().Reload(ctx)
	if err != nil {
		var ce *api.Error
		if errors.As(err, &ce) && ce.Code == api.CodeReloadFailed {
			fmt.Fprintf(c.stderr, "lvsctl: reload refused:\n%s\n", ce.Message)
			return exitFailed
		}
		return c.fail(err)
	}
	fmt.Fprintln(c.stdout, "configuration reloaded; it applies from the next cycle")
	for _, n := range r.Notes {
		fmt.Fprintf(c.stdout, "note: %s\n", n)
	}
	return exitOK
}

// checkConfig runs `lvs-monitor -check -config FILE`, so that the file is
// checked by the daemon that will load it, and passes on its output and
// exit status.
func (c *cli) checkConfig(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(pos) != 1 {
		return c.commandUsage("check-config", "want one FILE, got %d arguments", len(pos))
	}
	path, err := c.findMonitor()
	if err != nil {
		return c.fail(err)
	}
	return c.delegate(ctx, "check-config", path, "-check", "-config", pos[0])
}

// findMonitor finds lvs-monitor in the directory of lvsctl's own
// executable, else in PATH.
func (c *cli) findMonitor() (string, error) {
	return c.findTool("lvs-monitor", "check-config runs lvs-monitor -check")
}

// findTool finds the program name in the directory of lvsctl's own
// executable, else in PATH; why says what needs it, for the error.
func (c *cli) findTool(name, why string) (string, error) {
	executable := c.executable
	if executable == nil {
		executable = os.Executable
	}
	if exe, err := executable(); err == nil {
		if p, err := exec.LookPath(filepath.Join(filepath.Dir(exe), name)); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s; %s not found next to lvsctl or in PATH", why, name)
}

// delegate runs the program at path with args, passing on its output and
// exit status.
func (c *cli) delegate(ctx context.Context, what, path string, args ...string) int {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return ee.ExitCode()
	}
	fmt.Fprintf(c.stderr, "lvsctl: %s: %s: %v\n", what, path, err)
	return exitFailed
}

// setBy is ", set by WHO" for the explain header, or nothing when the
// daemon did not say (an older daemon, or a record from before it kept it).
func setBy(who string) string {
	if who == "" {
		return ""
	}
	return ", set by " + who
}
