package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"lvs-feedback/control/api"
)

func (c *cli) status(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	out := outputFlag(fs)
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	if len(pos) > 0 {
		return c.commandUsage("status", "no arguments, got %q", pos)
	}
	if !c.checkOutput(*out) {
		return c.commandUsage("status", "-o %q: want table or json", *out)
	}
	st, err := c.client().Status(ctx)
	if err != nil {
		return c.fail(err)
	}
	if *out == "json" {
		return c.printJSON(st)
	}
	printStatus(c.stdout, st, c.location())
	return exitOK
}

// stateText is a state in words for the table.
func stateText(s api.ServerStatus) string {
	switch s.State {
	case api.StateDrained:
		return "drained by operator"
	case api.StateDown:
		return "down"
	case api.StateFrozen:
		return "frozen"
	case api.StateUnreachable:
		return "unreachable"
	case api.StateAgentStale:
		return "agent stale"
	case api.StateAgentFailing:
		return "agent failing"
	case api.StateRamping:
		return fmt.Sprintf("ramping up %.0f%%", s.Ramp*100)
	case api.StateAbsent:
		return "not in IPVS table"
	case api.StatePending:
		return "waiting for first cycle"
	}
	return s.State
}

func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return d.Round(time.Minute).String()
}

func f3(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *p)
}

func printStatus(w io.Writer, st api.Status, loc *time.Location) {
	if st.Cycle == nil {
		fmt.Fprintf(w, "lvs-monitor: no cycle completed yet (interval %gs)\n", st.Config.IntervalSeconds)
	} else {
		fmt.Fprintf(w, "lvs-monitor: last cycle %s (%s ago, took %s, weights written: %d), interval %gs\n",
			st.Cycle.Start.In(loc).Format("15:04:05"), ago(st.Now.Sub(st.Cycle.Start)),
			time.Duration(st.Cycle.DurationSeconds*float64(time.Second)).Round(time.Microsecond), st.Cycle.Writes, st.Config.IntervalSeconds)
	}
	if c := st.Config; c.Controller != "" { // absent from an older lvs-monitor
		parts := make([]string, len(c.ControllerSettings))
		for i, s := range c.ControllerSettings {
			parts[i] = fmt.Sprintf("%s %g", s.Key, s.Value)
		}
		fmt.Fprintf(w, "controller: %s (%s)\n", c.Controller, strings.Join(parts, ", "))
	}
	switch {
	case !st.Reload.OK:
		at := "?"
		if st.Reload.At != nil {
			at = st.Reload.At.In(loc).Format("15:04:05")
		}
		fmt.Fprintf(w, "config: LAST RELOAD FAILED at %s; the earlier configuration is still running:\n  %s\n",
			at, strings.ReplaceAll(st.Reload.Error, "\n", "\n  "))
	case st.Reload.At != nil:
		fmt.Fprintf(w, "config: reloaded at %s\n", st.Reload.At.In(loc).Format("15:04:05"))
	}
	if sy := st.Sync; sy != nil && sy.Fleet != nil {
		printFleet(w, sy)
	} else if sy != nil {
		what := "follower: another director writes the weights"
		if sy.Writer {
			what = "writer: this director writes the weights"
		}
		fmt.Fprintf(w, "sync: %s, %s (role %s, %s, leader %s)\n", sy.ID, what, sy.Role, sy.Phase, sy.Leader)
		for _, p := range sy.Peers {
			state := "in step"
			if p.Unreachable {
				state = "UNREACHABLE"
				if p.LastError != "" {
					state += ": " + p.LastError
				}
			}
			last := "never"
			if p.LastOK != nil {
				last = ago(st.Now.Sub(*p.LastOK)) + " ago"
			}
			fmt.Fprintf(w, "  peer %s: %s (last accepted %s)\n", p.Address, state, last)
		}
	}
	below, managed := 0, 0
	for _, svc := range st.Services {
		fmt.Fprintln(w)
		title := svc.Service
		if svc.Scheduler != "" {
			title += "  scheduler " + svc.Scheduler
		}
		if svc.Frozen {
			title += "  FROZEN: too many servers unreachable at once, weights left as they are (fail static)"
		}
		fmt.Fprintln(w, title)
		fmt.Fprintf(w, "  %s\n", summaryText(svc.Summary))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  SERVER\tSTATE\tWEIGHT\tDEFAULT\tLOAD\tINPUT\tCPU\tMEM\tDISK\tRESP\tPROC\tACTIVE\tINACTIVE\tAGENT OK\t")
		var notes []string
		for _, s := range svc.Servers {
			in := []string{"-", "-", "-", "-", "-", "-"}
			if s.Inputs != nil {
				i := s.Inputs
				for k, v := range []*float64{&i.Input, i.CPU, i.Memory, i.Disk, &i.Response, i.Process} {
					if v != nil { // absent: not measured this cycle
						in[k] = fmt.Sprintf("%.2f", *v)
					}
				}
			}
			agentAge := "-"
			switch {
			case s.AgentAgeSeconds != nil:
				agentAge = ago(time.Duration(*s.AgentAgeSeconds*float64(time.Second))) + " ago"
			case s.AgentError != "":
				agentAge = "never"
			}
			weight, active, inactive := fmt.Sprint(s.KernelWeight), fmt.Sprint(s.ActiveConns), fmt.Sprint(s.InactiveConns)
			if s.State == api.StateAbsent || s.State == api.StatePending {
				weight, active, inactive = "-", "-", "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
				s.Server, stateText(s), weight, s.DefaultWeight, f3(s.Load), in[0], in[1], in[2], in[3], in[4], in[5],
				active, inactive, agentAge)
			if s.ProbeError != "" {
				notes = append(notes, fmt.Sprintf("  %s: probe: %s", s.Server, s.ProbeError))
			}
			if s.AgentError != "" {
				notes = append(notes, fmt.Sprintf("  %s: agent: %s", s.Server, s.AgentError))
			}
			if s.LastChange != "" && s.State != api.StateAbsent {
				notes = append(notes, fmt.Sprintf("  %s: last change: %s", s.Server, s.LastChange))
			}
			if s.Ownership == api.OwnershipManaged && s.State != api.StateRamping {
				managed++
				if s.KernelWeight < s.DefaultWeight {
					below++
				}
			}
		}
		tw.Flush()
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	if managed > 0 && below == managed {
		fmt.Fprintf(w, "\nevery managed server is below its default weight: the cluster is loaded beyond target %g; add servers (docs/operator-guide.md)\n",
			st.Config.Weight.Target)
	}
}

// summaryText is a service's summary line: "N in rotation, N drained, N
// down; weights sum S of defaults D", with the rarer counts added only
// when they are not 0 (api.ServiceSummary defines each).
func summaryText(s api.ServiceSummary) string {
	text := fmt.Sprintf("%d in rotation, %d drained, %d down", s.InRotation, s.Drained, s.Down)
	if s.NotInTable > 0 {
		text += fmt.Sprintf(", %d not in IPVS table", s.NotInTable)
	}
	if s.ZeroWeight > 0 {
		text += fmt.Sprintf(", %d at weight 0", s.ZeroWeight)
	}
	return text + fmt.Sprintf("; weights sum %d of defaults %d", s.WeightSum, s.DefaultSum)
}

// printFleet prints a fleet director's line: its role, the leader, etcd's
// state and the document revision.
func printFleet(w io.Writer, sy *api.SyncStatus) {
	f := sy.Fleet
	role := "follower: applies the leader's weights"
	if f.Leader {
		role = "LEADER: decides and writes the fleet's weights"
	}
	leader := f.LeaderID
	if leader == "" {
		leader = "none known"
	}
	etcd := "etcd reachable"
	if !f.EtcdUp {
		etcd = "ETCD UNREACHABLE: table held (fail static)"
		if f.EtcdError != "" {
			etcd += ": " + f.EtcdError
		}
	} else if !f.LeaseOK {
		etcd = "etcd reachable, NO LEASE: table held"
	}
	fmt.Fprintf(w, "fleet: %s, %s (leader %s, %d directors, document revision %d)\n", sy.ID, role, leader, f.Directors, f.DocRevision)
	fmt.Fprintf(w, "  %s; %d failed etcd operations\n", etcd, f.EtcdErrors)
	if f.Refused != "" {
		fmt.Fprintf(w, "  DOCUMENT REFUSED: table held: %s\n", f.Refused)
	}
	if f.DocumentsRefused > 0 || f.CountersRefused > 0 {
		fmt.Fprintf(w, "  refused: %d documents, %d director counters\n", f.DocumentsRefused, f.CountersRefused)
	}
}
