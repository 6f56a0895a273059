package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"

	"lvs-feedback/control/api"
	"lvs-feedback/history"
)

// history is `lvsctl history SERVICE [SERVER]`: it reads the history
// files in the state directory itself, not over the socket, so that it
// works with lvs-monitor stopped and on a copy of the files elsewhere.
func (c *cli) history(_ context.Context, args []string) int {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	out := outputFlag(fs)
	last := fs.Int("n", 20, "show the last `N` records (0: all)")
	dir := fs.String("dir", "", "read the history in `DIR` (default: state_dir of -config)")
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	var f history.Filter
	switch len(pos) {
	case 1:
		if err := api.CheckTarget(pos[0], "192.0.2.1:1"); err != nil {
			return c.commandUsage("history", "%v", err)
		}
		f.Service = strings.TrimSpace(pos[0])
	case 2:
		if err := api.CheckTarget(pos[0], pos[1]); err != nil {
			return c.commandUsage("history", "%v", err)
		}
		srv, err := netip.ParseAddrPort(strings.TrimSpace(pos[1]))
		if err != nil {
			return c.commandUsage("history", "server %q: want RIP:PORT as in ipvsadm -L -n", pos[1])
		}
		f.Service, f.Server = strings.TrimSpace(pos[0]), srv.String()
	default:
		return c.commandUsage("history", "want SERVICE [SERVER], got %d arguments", len(pos))
	}
	if *last < 0 {
		return c.commandUsage("history", "-n must be 0 (all) or more, got %d", *last)
	}
	if !c.checkOutput(*out) {
		return c.commandUsage("history", "-o %q: want table or json", *out)
	}
	if *dir == "" {
		*dir = c.stateDir()
	}
	files, err := history.Files(*dir)
	if err != nil {
		return c.fail(err)
	}
	if len(files) == 0 {
		fmt.Fprintf(c.stderr, "lvsctl: no history in %s: lvs-monitor records one from its first cycle unless [history] enabled = false\n", *dir)
		return exitFailed
	}
	var recs []history.Record
	notes, err := history.Read(*dir, f, func(r history.Record) {
		recs = append(recs, r)
		if *last > 0 && len(recs) > 2*(*last) {
			recs = append(recs[:0], recs[len(recs)-*last:]...) // keep memory bounded
		}
	})
	for _, n := range notes {
		fmt.Fprintf(c.stderr, "lvsctl: history: %s\n", n)
	}
	if err != nil {
		return c.fail(err)
	}
	if *last > 0 && len(recs) > *last {
		recs = recs[len(recs)-*last:]
	}
	if len(recs) == 0 {
		fmt.Fprintf(c.stderr, "lvsctl: no history records for %s in %s\n", strings.TrimSpace(strings.Join(pos, " ")), *dir)
		return exitFailed
	}
	if *out == "json" {
		enc := json.NewEncoder(c.stdout)
		for i := range recs {
			if err := enc.Encode(&recs[i]); err != nil {
				return c.fail(err)
			}
		}
		return exitOK
	}
	printHistory(c.stdout, recs, c.location())
	return exitOK
}

// stateDir is the state_dir of -config, else history.DefaultDir; like
// socketPath, it reads that key alone.
func (c *cli) stateDir() string {
	var f struct {
		StateDir string `toml:"state_dir"`
	}
	if _, err := toml.DecodeFile(c.config, &f); err == nil && f.StateDir != "" {
		return f.StateDir
	}
	return history.DefaultDir
}

// printHistory writes one row per record, oldest first.
func printHistory(w io.Writer, recs []history.Record, loc *time.Location) {
	var b bytes.Buffer
	defer func() { // without the padding of an empty REASON
		for line := range strings.Lines(b.String()) {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}()
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSERVER\tSTATE\tWEIGHT\tNEW\tACTIVE\tINACT\tPROBE\tCPU\tMEM\tDISK\tPROC\tLOAD\tFLAGS\tREASON")
	for i := range recs {
		r := &recs[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Time.In(loc).Format("2006-01-02 15:04:05"), r.Server, r.State, historyWeight(r),
			newConnsText(r.NewConns), r.ActiveConns, r.InactiveConns, probeText(r),
			agentText(r, func(a *history.Agent) float64 { return a.CPUUsed }),
			agentText(r, func(a *history.Agent) float64 { return a.Memory }),
			agentText(r, func(a *history.Agent) float64 { return a.Disk }),
			agentText(r, func(a *history.Agent) float64 { return a.Processes }),
			optional(r.Load, "%.3f"), flagsText(r), r.Reason)
	}
	tw.Flush()
}

// historyWeight is the kernel weight, "before→after" when the cycle changed
// it, and "before→to?" when a due write was not made.
func historyWeight(r *history.Record) string {
	switch {
	case r.Wrote || r.WeightAfter != r.WeightBefore:
		return fmt.Sprintf("%d→%d", r.WeightBefore, r.WeightAfter)
	case r.Write:
		return fmt.Sprintf("%d→%d?", r.WeightBefore, r.WeightTo)
	}
	return fmt.Sprint(r.WeightBefore)
}

func newConnsText(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

func probeText(r *history.Record) string {
	switch {
	case r.ProbeSeconds != nil:
		return fmt.Sprintf("%.1fms", *r.ProbeSeconds*1000)
	case r.ProbeTimedOut:
		return "timeout"
	case r.ProbeError != "":
		return "failed"
	}
	return "-"
}

func agentText(r *history.Record, v func(*history.Agent) float64) string {
	if r.Agent == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", v(r.Agent))
}

func optional(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// flagsText names what sets the record apart: a write that failed, a
// frozen service, a stale or failing agent, a load from the director's
// figures alone, slow start, a guard hold.
func flagsText(r *history.Record) string {
	var fl []string
	if r.WriteError != "" {
		fl = append(fl, "write-failed")
	}
	if r.Frozen {
		fl = append(fl, "frozen")
	}
	switch {
	case r.AgentStale:
		fl = append(fl, "agent-stale")
	case r.AgentError != "":
		fl = append(fl, "agent-failed")
	}
	if r.DirectorOnly {
		fl = append(fl, "director-only")
	}
	if r.Ramp > 0 && r.Ramp < 1 && r.State == "managed" { // a down server's ramp waits for its return
		fl = append(fl, fmt.Sprintf("ramp-%.0f%%", r.Ramp*100))
	}
	if g := r.Guard; g != nil && g.Held > 0 {
		fl = append(fl, "guard-held")
	}
	if len(fl) == 0 {
		return "-"
	}
	return strings.Join(fl, ",")
}
