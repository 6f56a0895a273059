package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// command is one lvsctl command: what the usage and its help say, and what
// runs it. Adding a command is adding one entry to commands. Its run
// function must parse its arguments with cli.parse before anything else,
// so that `lvsctl NAME -h` and `lvsctl help NAME` print its help without
// reaching lvs-monitor (TestEveryCommandHasHelp holds every entry to it).
type command struct {
	name    string
	args    string // what follows the name in its synopsis, e.g. "SERVICE SERVER [--wait]"
	summary string // one line for the command list in lvsctl -h
	help    string // what it does beyond the summary, in full sentences; may be empty
	example string // one command line per line, each starting "lvsctl "
	run     func(c *cli, ctx context.Context, args []string) int
}

// commands lists every command in the order lvsctl -h shows them. It is a
// function, not a variable: the run functions look their own entry up.
func commands() []command {
	return []command{
		{name: "status", args: "[-o table|json]", run: (*cli).status,
			summary: "every service and server: state, weights, load, connections",
			help:    "Shows every configured service and real server as of lvs-monitor's last cycle: its state, kernel and default weight, load and each input of it, connections, and how long ago its agent answered; then whatever needs a look (probe and agent errors, a refused reload, the director pair).",
			example: "lvsctl status\nlvsctl status -o json"},
		{name: "top", args: "[-once] [-n N] [-refresh D]", run: (*cli).top,
			summary: "status live, a frame per cycle, with new conns/s and each last change and why",
			help:    "Polls lvs-monitor's status and draws a frame each time a cycle completes. On a terminal it takes the screen and gives it back on q or Ctrl-C; piped, it prints one frame after another. Everything shown comes from the status (lvsctl status); the last change of a server is top's memory since it started.",
			example: "lvsctl top\nlvsctl top -once\nlvsctl top -n 3 | tee frames.txt"},
		{name: "drain", args: "SERVICE SERVER [--wait] [--timeout D]", run: (*cli).drain,
			summary: "weight 0 as an operator drain, kept across restarts",
			help:    "Sets the server's weight to 0 as an operator drain: existing connections finish, no new ones arrive, and lvs-monitor leaves the server alone until lvsctl undrain, across restarts, failovers and table rebuilds (a weight that appears on it is put back to 0). In a director pair it answers once the other director holds the drain (\"drained on both directors\"), or says it does not (\"drained here only: peer unreachable (...)\", with a warning on stderr). With --wait, shows its active and inactive connections and its persistence templates (ipvsadm -p) until none is left or --timeout passes (exit 4, naming what is left and the kernel timers that will remove it; the drain stands). A template sends its client's new connections to the server, weight 0 or not, until it expires: the service's persistence timeout after the last connection it sent; with net.ipv4.vs.expire_quiescent_template = 1 the client's next connection goes to another server instead.",
			example: "lvsctl drain 192.0.2.10:80/tcp 198.51.100.11:80 --wait --timeout 10m"},
		{name: "undrain", args: "SERVICE SERVER", run: (*cli).undrain,
			summary: "back to its default weight (slow start), managed again",
			help:    "Gives a drained server back to lvs-monitor: its weight returns to its default weight, ramped up by slow start. In a director pair it answers as drain does (\"undrained on both directors\").",
			example: "lvsctl undrain 192.0.2.10:80/tcp 198.51.100.11:80"},
		{name: "explain", args: "SERVICE SERVER [-o table|json]", run: (*cli).explain,
			summary: "the whole computation of the server's last weight",
			help:    "Shows how lvs-monitor computed the server's weight in its last cycle: each input raw, normalised and weighted by its coefficient, the load, the formula, the bounds, slow start, the threshold, and the decision.",
			example: "lvsctl explain 192.0.2.10:80/tcp 198.51.100.11:80"},
		{name: "history", args: "SERVICE [SERVER] [-n N] [-o table|json] [-dir DIR]", run: (*cli).history,
			summary: "past cycles of a service or server: weights, connections, probe, agent, load",
			help:    "Prints lvs-monitor's record of past cycles, oldest first: one row per server per cycle with its weight before and after, new, active and inactive connections, probe time, the agent's figures, the load, and flags such as frozen or agent-stale. It reads the history files in the state directory (state_dir of -config, or -dir) itself, so it needs read access to them (root) but not a running lvs-monitor. -o json prints the records as JSON lines, every field (docs/history.md).",
			example: "lvsctl history 192.0.2.10:80/tcp 198.51.100.11:80\nlvsctl history 192.0.2.10:80/tcp -n 0 -o json > history.jsonl"},
		{name: "benefit", args: "[-window D] [-until now|last|TIME] [-service S] [-dir DIR] [-textfile FILE]", run: (*cli).benefit,
			summary: "what the monitor's weights bought: the history replayed with static weights and with its own",
			help:    "Replays the last hour (-window) of lvs-monitor's history through the cluster simulator twice, on the same requests: with each server's default weight throughout, and with the weights lvs-monitor wrote, each at the cycle that wrote it. Prints both runs' p99 response time and overload seconds (seconds in which some server's CPU or disk was busy at least 95 % of the second) and static ÷ monitor: above 1, the monitor's weights did better. It runs lvs-tune benefit (next to lvsctl, else in PATH), which reads the history files itself like lvsctl history. With -textfile it also writes the figures for node_exporter's textfile collector (docs/metrics.md). Exit status 1 when there is nothing to replay: no history, no records in the window (-until last replays the latest hour recorded), or a file of a format this version does not read.",
			example: "lvsctl benefit\nlvsctl benefit -window 30m -service 192.0.2.10:80/tcp\nlvsctl benefit -dir /tmp/demo-state -until last"},
		{name: "reload", args: "", run: (*cli).reload,
			summary: "re-read the configuration (same as systemctl reload lvs-monitor)",
			help:    "Asks lvs-monitor to re-read its own -config file. A file with a mistake is refused and the running configuration kept; the error is printed here and shown by lvsctl status.",
			example: "lvsctl reload"},
		{name: "check-config", args: "FILE", run: (*cli).checkConfig,
			summary: "check a configuration file; no running daemon needed",
			help:    "Runs lvs-monitor -check -config FILE, lvs-monitor being found next to lvsctl's executable, else in PATH, and passes on its output and exit status: the file is checked by the daemon that will read it.",
			example: "lvsctl check-config /etc/lvs-monitor/lvs-monitor.toml"},
		{name: "version", args: "", run: (*cli).version,
			summary: "lvsctl's version and the running lvs-monitor's",
			help:    "Prints lvsctl's build (version, commit, Go release), then the running lvs-monitor's, asked over the control socket. When lvs-monitor cannot be reached, says so and exits 3. lvsctl -version prints lvsctl's alone, without asking.",
			example: "lvsctl version"},
		{name: "help", args: "[COMMAND]", run: (*cli).help,
			summary: "this list, or a command's flags and an example",
			help:    "Without a command, lists the commands; with one, prints what it does, its flags and an example (the same as lvsctl COMMAND -h).",
			example: "lvsctl help drain"},
	}
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd, true
		}
	}
	return command{}, false
}

// synopsis is the command's usage line without "usage: ".
func (cmd command) synopsis() string {
	return strings.TrimSpace("lvsctl " + cmd.name + " " + cmd.args)
}

// printUsage writes lvsctl's usage: the synopsis and the command list.
func printUsage(w io.Writer) {
	fmt.Fprint(w, "usage: lvsctl [-socket PATH] [-config FILE] [-request-timeout D] COMMAND [ARGS]\n"+
		"       lvsctl -version\n\ncommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cmd := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
lvsctl help COMMAND (or lvsctl COMMAND -h): what it does, its flags and an example.
SERVICE is VIP:PORT/PROTO (e.g. 192.0.2.10:80/tcp) or fwmark:N; SERVER is RIP:PORT.
The socket is -socket, else control_socket in -config (default `+defaultConfig+`),
else /run/lvs-monitor/control.sock.
exit status: 0 done, 1 failed or refused, 2 usage, 3 lvs-monitor unreachable,
4 drain --wait timed out with connections or persistence templates left.
`)
}

// printCommandHelp writes a command's help; own holds its flags (nil: none).
func printCommandHelp(w io.Writer, cmd command, own *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s.\n", cmd.synopsis(), upperFirst(cmd.summary))
	if cmd.help != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(cmd.help, 76))
	}
	if own != nil {
		n := 0
		own.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(w, "\nflags:\n")
			own.SetOutput(w)
			own.PrintDefaults()
		}
	}
	fmt.Fprint(w, "\nglobal flags, before or after the command: -socket PATH, -config FILE, -request-timeout D (lvsctl -h)\n")
	fmt.Fprint(w, "\nExample:\n")
	for line := range strings.Lines(cmd.example) {
		fmt.Fprintf(w, "  %s\n", strings.TrimRight(line, "\n"))
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// wrap breaks text into lines of at most width bytes at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// parse parses a command's flags, which may come before, between or after
// its arguments, and returns the arguments. fs is named after the command
// and holds its own flags; parse adds the global ones. When the command
// line ends the command, done is true and code is the exit status: -h or
// -help printed the command's help on stdout (0), a flag mistake printed
// the error and the help on stderr (2).
func (c *cli) parse(fs *flag.FlagSet, args []string) (pos []string, code int, done bool) {
	cmd, _ := lookup(fs.Name()) // every command has an entry (TestEveryCommandHasHelp)
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) { own.Var(f.Value, f.Name, f.Usage) })
	fs.SetOutput(io.Discard) // the errors are printed below, with the help
	fs.Usage = func() {}
	c.globalFlags(fs)
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			printCommandHelp(c.stdout, cmd, own)
			return nil, exitOK, true
		case err != nil:
			fmt.Fprintf(c.stderr, "lvsctl %s: %v\n\n", cmd.name, err)
			printCommandHelp(c.stderr, cmd, own)
			return nil, exitUsage, true
		}
		if fs.NArg() == 0 {
			return pos, exitOK, false
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// commandUsage reports a mistake in a command's arguments with its usage
// line and example, and returns the usage exit status.
func (c *cli) commandUsage(name, format string, a ...any) int {
	cmd, _ := lookup(name)
	fmt.Fprintf(c.stderr, "lvsctl: %s: %s\nusage: %s\n  e.g. %s\n(lvsctl help %s for more)\n",
		name, fmt.Sprintf(format, a...), cmd.synopsis(), firstLine(cmd.example), name)
	return exitUsage
}

// help is `lvsctl help [COMMAND]`.
func (c *cli) help(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("help", flag.ContinueOnError)
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	switch {
	case len(pos) == 0:
		printUsage(c.stdout)
		return exitOK
	case len(pos) > 1:
		return c.commandUsage("help", "one command at most, got %q", pos)
	}
	cmd, ok := lookup(pos[0])
	if !ok {
		return c.usageError("help: unknown command %q", pos[0])
	}
	// Its own -h prints the help with its flags, before it reaches for
	// lvs-monitor.
	return cmd.run(c, ctx, []string{"-h"})
}
