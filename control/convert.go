package control

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"lvs-feedback/control/api"
	"lvs-feedback/internal/buildinfo"
	"lvs-feedback/monitor"
	"lvs-feedback/policy"
)

// ServerState returns the api.State* value of a destination in a cycle report:
// the first that applies of drained, down, frozen, unreachable, agent
// stale, ramping, agent failing, active.
func ServerState(d monitor.DestStatus) string {
	switch {
	case d.State == policy.DrainedByOperator:
		return api.StateDrained
	case d.State == policy.Down:
		return api.StateDown
	case d.Decision.Trace.Frozen:
		return api.StateFrozen
	case d.ProbeErr != nil:
		return api.StateUnreachable
	case d.AgentStale:
		return api.StateAgentStale
	case d.Decision.Trace.Ramp > 0 && d.Decision.Trace.Ramp < 1:
		return api.StateRamping
	case d.AgentErr != nil:
		return api.StateAgentFailing
	}
	return api.StateActive
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func coefficientMap(c policy.Coefficients) map[string]float64 {
	return map[string]float64{"input": c.Input, "cpu": c.CPU, "memory": c.Memory, "disk": c.Disk, "response": c.Response, "process": c.Process}
}

func settings(in []policy.Setting) []api.Setting {
	out := make([]api.Setting, len(in))
	for i, s := range in {
		out[i] = api.Setting{Key: s.Key, Value: s.Value}
	}
	return out
}

func weightParams(p policy.WeightParams) api.WeightParams {
	return api.WeightParams{Gain: p.Gain, Target: p.Target, Scale: p.Scale, Min: p.Min, Threshold: p.Threshold}
}

func apiBuild(i buildinfo.Info) api.Build {
	return api.Build{Version: i.Version, Revision: i.Revision, Time: i.Time, Modified: i.Modified, GoVersion: i.GoVersion}
}

// status converts the monitor's status, listing every configured service
// and server in configuration order.
func (s *Server) status(st monitor.Status) api.Status {
	now := s.opts.Now()
	out := api.Status{
		Version: api.ProtocolVersion,
		Now:     now,
		Build:   new(s.build),
		Config: api.ConfigSummary{
			IntervalSeconds:    st.Config.Interval.Seconds(),
			Coefficients:       coefficientMap(st.Config.Coefficients),
			Controller:         st.Config.Weight.Controller,
			ControllerSettings: settings(st.Config.Weight.Settings()),
			Weight:             weightParams(st.Config.Weight),
			AgentExpirySeconds: st.Config.Availability.AgentExpiry.Seconds(),
			SlowStartSeconds:   st.Config.Availability.SlowStart.Seconds(),
			FreezeShare:        st.Config.Availability.FreezeShare,
		},
		Reload:   api.ReloadStatus{OK: st.ReloadErr == nil, Error: errString(st.ReloadErr)},
		Services: []api.ServiceStatus{},
	}
	if !st.ReloadedAt.IsZero() {
		at := st.ReloadedAt
		out.Reload.At = &at
	}
	if sy := st.Sync; sy != nil {
		out.Sync = &api.SyncStatus{ID: sy.ID, Role: sy.Role, Writer: sy.Writer, Phase: sy.Phase, Epoch: sy.Epoch, Leader: sy.Leader,
			Peers: []api.SyncPeer{}, Frames: sy.Frames}
		if f := sy.Fleet; f != nil {
			out.Sync.Fleet = &api.FleetStatus{Leader: f.Leader, LeaderID: f.LeaderID, EtcdUp: f.EtcdUp, EtcdError: f.EtcdError, LeaseOK: f.LeaseOK,
				DocRevision: f.DocRevision, Directors: f.Directors, EtcdErrors: f.EtcdErrors,
				Refused: f.Refused, DocumentsRefused: f.DocumentsRefused, CountersRefused: f.CountersRefused}
		}
		for _, p := range sy.Peers {
			peer := api.SyncPeer{Address: p.Address, Unreachable: p.Unreachable, LastError: p.LastError}
			if !p.LastOK.IsZero() {
				at := p.LastOK
				peer.LastOK = &at
			}
			out.Sync.Peers = append(out.Sync.Peers, peer)
		}
	}
	if !st.LastCycle.Start.IsZero() {
		out.Cycle = &api.Cycle{Start: st.LastCycle.Start, DurationSeconds: st.LastCycle.Duration.Seconds(), Writes: st.LastCycle.Writes}
	}
	byKey := make(map[monitor.DestKey]*monitor.DestStatus, len(st.LastCycle.Dests))
	for i := range st.LastCycle.Dests {
		byKey[st.LastCycle.Dests[i].Key] = &st.LastCycle.Dests[i]
	}
	for _, svc := range st.Config.Services {
		ss := api.ServiceStatus{Service: svc.Key.String(), Scheduler: st.LastCycle.Schedulers[svc.Key], Servers: []api.ServerStatus{}}
		for _, srv := range svc.Servers {
			k := monitor.DestKey{Service: svc.Key, Dest: srv.Addr}
			d := byKey[k]
			if d == nil {
				row := api.ServerStatus{Server: srv.Addr.String(), State: api.StateAbsent, DefaultWeight: srv.Weight, NewConns: -1, Ramp: 1,
					LastChange: "not in the IPVS table at the last cycle"}
				if out.Cycle == nil {
					row.State, row.LastChange = api.StatePending, ""
				}
				ss.Servers = append(ss.Servers, row)
				ss.Summary.NotInTable++
				ss.Summary.DefaultSum += srv.Weight
				continue
			}
			ss.Frozen = ss.Frozen || d.Decision.Trace.Frozen
			row := api.ServerStatus{
				Server:          srv.Addr.String(),
				State:           ServerState(*d),
				Ownership:       string(d.State),
				SetBy:           string(d.SetBy),
				KernelWeight:    d.KernelWeight,
				DefaultWeight:   d.DefaultWeight,
				Load:            finite(d.Decision.Trace.Load),
				ActiveConns:     d.ActiveConns,
				InactiveConns:   d.InactiveConns,
				NewConns:        d.NewConns,
				Ramp:            d.Decision.Trace.Ramp,
				ProbeRTTSeconds: d.ProbeRTT.Seconds(),
				ProbeError:      errString(d.ProbeErr),
				AgentError:      errString(d.AgentErr),
				LastChange:      d.Reason,
			}
			if row.Load != nil {
				in := d.Decision.Trace.Inputs
				row.Inputs = &api.Inputs{Input: in.Input, Response: in.Response}
				if agentUsed(*d) {
					row.Inputs.CPU, row.Inputs.Memory, row.Inputs.Disk, row.Inputs.Process = &in.CPU, &in.Memory, &in.Disk, &in.Process
				}
				row.DirectorOnly = d.Decision.Trace.DirectorOnly
			}
			if at := d.AgentOK; !at.IsZero() {
				age := now.Sub(at).Seconds()
				row.AgentLastOK, row.AgentAgeSeconds = &at, &age
			}
			if c := d.Decision.Trace.Capacity; c != nil {
				row.Capacity = &api.Capacity{Factor: finite(c.Factor), CPU: c.CPU, Busy: c.Busy, Bottleneck: c.Bottleneck, Estimate: c.Estimate, Error: c.Error, Weight: c.Weight, SaturatedAlone: c.SaturatedAlone, BacklogCut: c.BacklogCut, Rule: c.Rule}
				if c.Driver != "" {
					row.Capacity.Reading, row.Capacity.Driver = c.Reading, c.Driver
				}
			}
			countServer(&ss.Summary, *d)
			ss.Servers = append(ss.Servers, row)
		}
		out.Services = append(out.Services, ss)
	}
	return out
}

// countServer adds a destination of the last cycle to its service's
// summary: by its ownership record first, then by its kernel weight (the
// order api.ServiceSummary documents).
func countServer(sum *api.ServiceSummary, d monitor.DestStatus) {
	sum.WeightSum += d.KernelWeight
	sum.DefaultSum += d.DefaultWeight
	switch {
	case d.State == policy.DrainedByOperator:
		sum.Drained++
	case d.State == policy.Down:
		sum.Down++
	case d.KernelWeight > 0:
		sum.InRotation++
	default:
		sum.ZeroWeight++
	}
}

// explanation converts the monitor's record of a server's last decision,
// adding the raw figures behind each input. Nothing is recomputed: the
// formula's numbers and the comparison are the ones the decision used.
func (s *Server) explanation(st monitor.Status, e monitor.Explanation) api.Explanation {
	d := e.Dest
	tr := d.Decision.Trace
	out := api.Explanation{
		Service:       d.Key.Service.String(),
		Server:        d.Key.Dest.String(),
		CycleStart:    st.LastCycle.Start,
		State:         ServerState(d),
		Ownership:     string(d.State),
		SetBy:         string(d.SetBy),
		KernelWeight:  d.KernelWeight,
		DefaultWeight: d.DefaultWeight,
		Load:          finite(tr.Load),
		DirectorOnly:  tr.DirectorOnly,
		Weight:        weightParams(e.Params.Weight),
		Decision:      e.Decision,
	}
	var reference time.Duration
	for _, svc := range st.Config.Services {
		if svc.Key == d.Key.Service {
			reference = svc.Probe.Reference
		}
	}
	used := agentUsed(d)
	for _, t := range e.Terms {
		term := api.Term{Name: t.Name, Normalised: t.Input, Coefficient: t.Coefficient, Product: t.Product}
		term.Raw, term.RawValue, term.RawUnit = rawFigure(t.Name, d, reference, used)
		if !used && agentFigure(t.Name) {
			term.Normalised, term.Product, term.NotMeasured = 0, 0, true
		}
		out.Terms = append(out.Terms, term)
	}
	if f := tr.Formula; f != nil {
		p := e.Params.Weight
		out.Formula = &api.Formula{
			Before: f.Before, Gain: p.Gain, Target: p.Target, Load: f.Load, Step: f.Step, Raw: f.Raw,
			Min: f.Min, Max: f.Max, After: f.After, Ramp: f.Ramp, Next: f.Next,
			KernelBefore: d.Decision.Before, Threshold: p.Threshold, Written: d.Outcome.Wrote,
		}
		if c := tr.Compare; c != nil {
			out.Formula.Passes, out.Formula.Overrule = c.Passes, c.Overrule
		}
	}
	return out
}

// agentUsed reports whether d's agent figures were measured this cycle.
func agentUsed(d monitor.DestStatus) bool {
	return d.Polled && d.AgentErr == nil && d.Report.Schema != 0
}

// agentFigure reports whether the input named is one the agent measures.
func agentFigure(name string) bool {
	switch name {
	case "cpu", "memory", "disk", "process":
		return true
	}
	return false
}

// rawFigure describes what was measured behind one normalised input.
func rawFigure(name string, d monitor.DestStatus, reference time.Duration, agentUsed bool) (string, *float64, string) {
	raw := d.Report.Raw
	noAgent := func() (string, *float64, string) {
		switch {
		case d.AgentStale:
			return "agent stale: not used", nil, ""
		case d.AgentErr != nil:
			return "no agent reply: " + d.AgentErr.Error(), nil, ""
		}
		return "not polled", nil, ""
	}
	switch name {
	case "input":
		n := d.NewConns
		switch {
		case n < 0:
			return "no earlier counter reading: neutral 1", nil, ""
		case d.Decision.Trace.Inputs.Input > 0 && n > 0:
			mean := float64(n) / d.Decision.Trace.Inputs.Input
			v := float64(n)
			return fmt.Sprintf("%d new connections in the interval; service mean %.1f per server", n, mean), &v, "connections"
		default:
			v := float64(n)
			if d.Decision.Trace.Inputs.Input == 1 {
				return fmt.Sprintf("%d new connections; no traffic to measure a share from: neutral 1", n), &v, "connections"
			}
			return fmt.Sprintf("%d new connections in the interval", n), &v, "connections"
		}
	case "response":
		if d.ProbeErr != nil {
			return "probe failed: " + d.ProbeErr.Error(), nil, ""
		}
		if d.ProbeRTT <= 0 {
			return "not probed", nil, ""
		}
		v := d.ProbeRTT.Seconds()
		return fmt.Sprintf("probe %s; reference %s counts as fully loaded", roundDur(d.ProbeRTT), reference), &v, "seconds"
	}
	if !agentUsed {
		return noAgent()
	}
	switch name {
	case "cpu":
		if d.CPUSpan > 0 {
			v := d.Decision.Trace.Inputs.CPU
			return fmt.Sprintf("%.1f%% busy over the last %.1fs (the agent's running totals) on %g CPUs", v*100, d.CPUSpan, raw.CPUs), &v, "busy fraction"
		}
		v := raw.CPUBusy
		return fmt.Sprintf("%.1f%% busy over %.1fs on %g CPUs", raw.CPUBusy*100, raw.WindowSeconds, raw.CPUs), &v, "busy fraction"
	case "memory":
		if raw.MemTotalBytes == 0 {
			return fmt.Sprintf("agent reports %.3f", d.Report.Memory), nil, ""
		}
		v := float64(raw.MemAvailableBytes)
		return fmt.Sprintf("%s available of %s", bytesIEC(raw.MemAvailableBytes), bytesIEC(raw.MemTotalBytes)), &v, "bytes available"
	case "disk":
		var parts []string
		mounts := make([]string, 0, len(raw.DiskSpaceUsed))
		for m := range raw.DiskSpaceUsed {
			mounts = append(mounts, m)
		}
		sort.Strings(mounts)
		for _, m := range mounts {
			parts = append(parts, fmt.Sprintf("%s %.0f%% used", m, raw.DiskSpaceUsed[m]*100))
		}
		io := fmt.Sprintf("I/O %.0f%% busy", raw.DiskIOBusy*100)
		if raw.DiskIODevice != "" {
			io += " (" + raw.DiskIODevice + ")"
		}
		parts = append(parts, io)
		return strings.Join(parts, ", ") + "; the larger counts", nil, ""
	case "process":
		v := float64(raw.RunnableTasks)
		return fmt.Sprintf("%d runnable tasks on %g CPUs", raw.RunnableTasks, raw.CPUs), &v, "tasks"
	}
	return "", nil, ""
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d
}

func bytesIEC(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit && exp < 4; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTP"[exp])
}
