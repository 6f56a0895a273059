package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"lvs-feedback/ipvs"
)

// write applies the decisions to the table with compare-and-set writes. It
// returns the number of writes, whether any record changed, and the errors
// that are not normal events.
func (m *Monitor) write(rows []*destRow) (int, bool, error) {
	writes := 0
	changed := false
	var errs []error
	for _, r := range rows {
		a := r.action
		if !a.Write {
			continue
		}
		if m.dryRun {
			m.logChange("would change weight (dry run)", r)
			continue
		}
		err := m.deps.Table.SetWeight(r.key.Service, r.key.Dest, r.kernel.Weight, a.To)
		switch {
		case err == nil:
			writes++
			r.wrote = true
			r.weightBefore = r.kernel.Weight
			r.kernel.Weight = a.To
			if r.rec.State == Down && a.Record.State == Managed {
				r.mem.rampStart = m.deps.Now()
			}
			m.state[r.key] = a.Record
			changed = true
			m.logChange("weight changed", r)
		case errors.Is(err, ipvs.ErrWeightChanged):
			m.deps.Metrics.writeError(writeErrChanged)
			m.log.Info("weight changed by another tool during the cycle; not written, reconciled next interval", "service", r.key.Service, "server", r.key.Dest, "error", err)
		case errors.Is(err, ipvs.ErrNotFound):
			m.deps.Metrics.writeError(writeErrVanished)
			m.log.Info("destination vanished before the write; skipped", "service", r.key.Service, "server", r.key.Dest)
		default:
			m.deps.Metrics.writeError(writeErrOther)
			errs = append(errs, fmt.Errorf("write weight %s: %w", r.key, err))
		}
	}
	return writes, changed, errors.Join(errs...)
}

// logChange logs one weight change: old → new, why, and the load breakdown.
func (m *Monitor) logChange(msg string, r *destRow) {
	if !m.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	old := r.kernel.Weight
	if r.wrote {
		old = r.weightBefore
	}
	attrs := []any{"service", r.key.Service, "server", r.key.Dest, "old", old, "new", r.action.To, "reason", r.action.Reason}
	if !math.IsNaN(r.load) {
		in := r.inputs
		attrs = append(attrs, "load", round3(r.load), "input", round3(in.Input), "cpu", round3(in.CPU), "memory", round3(in.Memory),
			"disk", round3(in.Disk), "response", round3(in.Response), "process", round3(in.Process))
	}
	m.log.Info(msg, attrs...)
}

func statuses(rows []*destRow) []DestStatus {
	out := make([]DestStatus, 0, len(rows))
	for _, r := range rows {
		reason := r.reason
		if r.wrote {
			reason = r.action.Reason
		}
		rec := r.rec
		weightBefore := r.kernel.Weight
		if r.wrote {
			rec = r.action.Record
			weightBefore = r.weightBefore
		}
		out = append(out, DestStatus{
			Key:              r.key,
			State:            rec.State,
			KernelWeight:     r.kernel.Weight,
			DefaultWeight:    rec.DefaultWeight(r.server.Weight),
			Inputs:           r.inputs,
			Load:             r.load,
			ActiveConns:      r.kernel.ActiveConns,
			InactiveConns:    r.kernel.InactiveConns,
			NewConns:         r.newConns,
			ProbeRTT:         r.rtt,
			ProbeErr:         r.probeErr,
			AgentErr:         r.agentErr,
			Report:           r.report,
			AgentDuration:    r.agentDur,
			CPUSpan:          r.cpuSpan,
			CapacityFactor:   r.capFactor,
			AgentOK:          r.mem.agentOK,
			WeightBefore:     weightBefore,
			ControllerBefore: r.ctrlBefore,
			ControllerAfter:  r.ctrlAfter,
			AgentStale:       r.stale,
			Frozen:           r.frozen,
			Ramp:             r.ramp,
			GuardHeld:        r.mem.guard.weight,
			GuardFrom:        r.mem.guard.from,
			GuardRaised:      r.mem.guard.raised,
			Wrote:            r.wrote,
			Reason:           reason,
		})
	}
	return out
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
