package main

import (
	"context"
	"flag"
	"time"
)

// benefit is `lvsctl benefit`: it runs `lvs-tune benefit`, found next to
// lvsctl's executable, else in PATH, with the same flags and -config, and
// passes on its output and exit status. The replay runs the simulator,
// which links the monitor itself: lvsctl links none of the daemon
// (deps_test.go), lvs-tune does.
func (c *cli) benefit(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("benefit", flag.ContinueOnError)
	fs.String("dir", "", "read the history in `DIR_OR_FILE`: a state directory or one file of records (default: state_dir of -config)")
	fs.String("service", "", "replay one `SERVICE` (default: every service recorded in the window)")
	fs.Duration("window", time.Hour, "replay the cycles of the last `D` before -until")
	fs.String("until", "now", "the window's end: now, last (the history's last record) or an RFC 3339 `TIME`")
	fs.String("sched", "wrr", "the kernel `scheduler` both runs use (not recorded in the history): rr, wrr, lc, wlc or sed")
	fs.String("seeds", "1-3", "simulator `seeds` (draws of the requests, the same for both runs; figures are the means)")
	fs.String("max-requests", "", "refuse a window of more than `N` requests to simulate per run (default 2e7, about 30 bytes each)")
	fs.String("textfile", "", "also write node_exporter textfile-collector metrics (lvs_benefit_*) to `FILE`")
	fs.Bool("v", false, "print the scenario each window was turned into")
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		return c.commandUsage("benefit", "no arguments, got %q (flags only)", pos)
	}
	path, err := c.findTool("lvs-tune", "benefit runs lvs-tune benefit")
	if err != nil {
		return c.fail(err)
	}
	out := []string{"benefit", "-config", c.config}
	own := map[string]bool{}
	for _, name := range []string{"dir", "service", "window", "until", "sched", "seeds", "max-requests", "textfile", "v"} {
		own[name] = true
	}
	fs.Visit(func(f *flag.Flag) {
		if own[f.Name] {
			out = append(out, "-"+f.Name+"="+f.Value.String())
		}
	})
	return c.delegate(ctx, "benefit", path, out...)
}
