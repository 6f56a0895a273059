package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// Outcome is how applying one decision went. The zero value: nothing was
// to be written.
type Outcome struct {
	Wrote  bool
	DryRun bool // a write was due, and -dry-run kept it from the table
	// Err is why a due write was not made: it wraps ipvs.ErrWeightChanged
	// (another tool changed the weight since it was read), ipvs.ErrNotFound
	// (the destination vanished) or another failure.
	Err error
}

// change is one decision to apply to one destination; kernel, if not nil,
// is set to the weight written.
type change struct {
	key    DestKey
	d      *policy.Decision
	out    *Outcome
	kernel *int
}

// applied sums up an apply.
type applied struct {
	writes         int
	recordsChanged bool
	err            error // failures that are not normal events
}

// apply is the one place in this package that writes to the IPVS table
// (Table.SetWeights, one call per service).
// Every decision — the cycle's, the backlog guard's, an operator's drain
// or undrain, a follower mirroring its writer, a writer replaying a
// follower's edit — comes through here. Each write is a compare-and-set
// from the weight the decision read (Decision.Before); a destination whose
// weight another tool changed meanwhile, or that vanished, is a normal
// event (a log line and a metric) and is reconciled at the next cycle.
// A written decision's ownership record and state changes take effect;
// under -dry-run nothing is written and nothing changes.
func (m *Monitor) apply(changes []change) applied {
	var res applied
	var errs []error
	due := make([]change, 0, len(changes))
	for _, c := range changes {
		switch {
		case !c.d.Write:
		case m.dryRun:
			c.out.DryRun = true
			m.logChange("would change weight (dry run)", c.key, c.d)
		default:
			due = append(due, c)
		}
	}
	// One batch per run of one service's changes: the table reads the
	// service once for all of them (ipvs.Table.SetWeights).
	batch := make([]ipvs.WeightChange, 0, len(due))
	for i := 0; i < len(due); {
		svc := due[i].key.Service
		j := i
		batch = batch[:0]
		for ; j < len(due) && due[j].key.Service == svc; j++ {
			batch = append(batch, ipvs.WeightChange{Dest: due[j].key.Dest, From: due[j].d.Before, To: due[j].d.To})
		}
		for k, err := range m.deps.Table.SetWeights(svc, batch) {
			if err := m.applied(due[i+k], err, &res); err != nil {
				errs = append(errs, err)
			}
		}
		i = j
	}
	res.err = errors.Join(errs...)
	return res
}

// applied records how one write went: a written decision's ownership
// record and state changes take effect; a conflict or a vanished
// destination is a normal event; any other failure is returned.
func (m *Monitor) applied(c change, err error, res *applied) error {
	d := c.d
	switch {
	case err == nil:
		res.writes++
		c.out.Wrote = true
		if c.kernel != nil {
			*c.kernel = d.To
		}
		if d.RecordChanged {
			m.setRecord(c.key, d.Record)
			res.recordsChanged = true
		}
		st := &m.memory(c.key).policy
		if d.OnWrite.SetCtrl {
			st.Ctrl, st.CtrlSet = d.OnWrite.Ctrl, true
		}
		if d.OnWrite.StartRamp {
			st.RampStart = m.deps.Now()
		}
		m.logChange(changeMessage(d.Kind), c.key, d)
		return nil
	case errors.Is(err, ipvs.ErrWeightChanged):
		m.deps.Metrics.writeError(writeErrChanged)
		m.log.Info("weight changed by another tool since it was read; not written, reconciled next interval", "service", c.key.Service, "server", c.key.Dest, "error", err)
	case errors.Is(err, ipvs.ErrNotFound):
		m.deps.Metrics.writeError(writeErrVanished)
		m.log.Info("destination vanished before the write; skipped", "service", c.key.Service, "server", c.key.Dest)
	default:
		m.deps.Metrics.writeError(writeErrOther)
		err = fmt.Errorf("write weight %s: %w", c.key, err)
		c.out.Err = err
		return err
	}
	c.out.Err = err
	return nil
}

// applyRows applies the rows' decisions (a cycle's or a backlog
// check's) and brings their report entries up to date.
func (m *Monitor) applyRows(rows []destRow) applied {
	changes := m.changes[:0]
	for i := range rows {
		if d := rows[i].st; d.Decision.Write {
			changes = append(changes, change{key: d.Key, d: &d.Decision, out: &d.Outcome, kernel: &d.KernelWeight})
		}
	}
	m.changes = changes
	return m.apply(changes)
}

// applyOne applies an operator's or a peer's decision and returns its
// error: ErrDryRun when -dry-run kept a due write from the table.
func (m *Monitor) applyOne(key DestKey, d *policy.Decision) (Outcome, error) {
	var out Outcome
	res := m.apply([]change{{key: key, d: d, out: &out}})
	switch {
	case out.DryRun:
		return out, fmt.Errorf("%s: would set weight %d → %d: %w", key, d.Before, d.To, ErrDryRun)
	case out.Err != nil:
		return out, fmt.Errorf("%s: %w", key, out.Err)
	}
	if !d.Write && d.RecordChanged && !m.dryRun {
		m.setRecord(key, d.Record) // nothing to write: the record alone changes
		res.recordsChanged = true
	}
	if res.recordsChanged {
		return out, m.saveState()
	}
	return out, nil
}

// changeMessage is the log message of a written decision, by kind: one
// message per kind of change, so that a log reader (and the kernel tests)
// can tell the monitor's own decisions from an operator's request and a
// follower taking its writer's weights.
func changeMessage(k policy.Kind) string {
	switch k {
	case policy.KindOperator:
		return "operator request (lvsctl)"
	case policy.KindMirror:
		return "weight taken from the writer"
	case policy.KindReplay:
		return "operator change made on another director replayed here"
	}
	return "weight changed"
}

// logChange logs one weight change: old → new, why, and the load breakdown.
// A follower taking its writer's weights logs at debug level (adopt sums
// them up in one line).
func (m *Monitor) logChange(msg string, key DestKey, d *policy.Decision) {
	level := slog.LevelInfo
	if d.Kind == policy.KindMirror {
		level = slog.LevelDebug
	}
	if !m.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"service", key.Service, "server", key.Dest, "old", d.Before, "new", d.To, "reason", d.Reason}
	if tr := d.Trace; !math.IsNaN(tr.Load) {
		in := tr.Inputs
		attrs = append(attrs, "load", round3(tr.Load), "input", round3(in.Input), "response", round3(in.Response))
		if tr.DirectorOnly { // the agent's figures were not measured: absent, not 0
			attrs = append(attrs, "agent", "stale")
		} else {
			attrs = append(attrs, "cpu", round3(in.CPU), "memory", round3(in.Memory), "disk", round3(in.Disk), "process", round3(in.Process))
		}
	}
	m.log.Log(context.Background(), level, msg, attrs...)
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
