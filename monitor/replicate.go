package monitor

import (
	"errors"
	"fmt"
	"lvs-feedback/replica"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// The methods in this file are what a director group's driver (package
// scheduler) calls to share one desired state between directors; the
// monitor knows nothing of the peers, the transport or who decides who
// writes. A writer publishes Snapshot; a follower (SetFollower) runs its
// cycle with decide and write switched off, applies the writer's snapshot
// with Adopt, and hands the operator changes made on it (TakeEdits) to the
// writer, which carries them out with Replay.

// Snapshot returns the desired state this director publishes when it
// writes: every configured destination it has a record of, with its
// ownership record and controller state. It is empty before the first
// cycle has recorded anything.
func (m *Monitor) Snapshot() replica.Snapshot {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	now := m.deps.Now()
	var snap replica.Snapshot
	for i := range m.cfg.Services {
		s := &m.cfg.Services[i]
		for j := range s.Servers {
			k := DestKey{Service: s.Key, Dest: s.Servers[j].Addr}
			rec, ok := m.state[k]
			if !ok {
				continue
			}
			d := replica.DestState{
				Key:              replica.DestKey(k),
				State:            string(rec.State),
				Weight:           rec.Written,
				DefaultWeight:    rec.DefaultWeight(s.Servers[j].Weight),
				DefaultOverride:  rec.DefaultOverride,
				OverriddenConfig: rec.OverriddenConfig,
				RestoreWeight:    rec.RestoreWeight,
				SetBy:            rec.SetBy,
				Held:             rec.Held,
			}
			if mem := m.mem[k]; mem != nil {
				d.Carried = mem.policy.Carry(now)
			}
			snap.Dests = append(snap.Dests, d)
		}
	}
	return snap
}

// SetFollower switches decide and write off (true: a follower, whose
// cycles and backlog checks read, reconcile and gather but write no weight,
// and which collects the operator changes made here for TakeEdits) or on
// (false: a writer; the default).
func (m *Monitor) SetFollower(f bool) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.follower = f
}

// TakeEdits returns and forgets the operator changes found on this
// director while it followed, since the last call: weights changed by
// another tool (found by reconcile; Op "") and lvsctl drains and undrains
// (Op replica.OpDrain, OpUndrain). Their Pos is zero: the driver numbers
// them. None (nil) on a writer.
func (m *Monitor) TakeEdits() []replica.Edit {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	e := m.localEdits
	m.localEdits = nil
	return e
}

// Adopt makes this director's table and records match a writer's snapshot:
// compare-and-set writes for the weights that differ, then the writer's
// ownership records and controller state. Destinations with a local edit
// (pending, or found now because the table no longer holds what this
// director last wrote) are left alone; the edits found are returned for the
// writer (nil: none). Destinations not configured here are ignored. An
// error says which writes or the state save failed; the records of the
// destinations written are taken even then.
func (m *Monitor) Adopt(snap replica.Snapshot, pending []replica.Edit) ([]replica.Edit, error) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	var own []replica.CurrentWeight
	configured := map[DestKey]bool{}
	for i := range m.cfg.Services {
		s := &m.cfg.Services[i]
		dests, err := m.deps.Table.Destinations(s.Key)
		if err != nil {
			continue // a missing service is noted by the cycle
		}
		kernel := map[DestKey]int{}
		for _, d := range dests {
			kernel[DestKey{Service: s.Key, Dest: d.Addr}] = d.Weight
		}
		for j := range s.Servers {
			k := DestKey{Service: s.Key, Dest: s.Servers[j].Addr}
			w, ok := kernel[k]
			if !ok {
				continue
			}
			configured[k] = true
			rec, known := m.state[k]
			// A weight on a server drained with lvsctl is no edit to pass
			// on (policy.Reconcile): the writer's 0 is written over it.
			held := rec.State == policy.DrainedByOperator && rec.Held
			own = append(own, replica.CurrentWeight{Key: replica.DestKey(k), Weight: w, Expected: rec.Written, Known: known && !held})
		}
	}
	ch := replica.Plan(own, snap, pending)
	skip := map[DestKey]bool{}
	for _, k := range ch.Held {
		skip[DestKey(k)] = true
	}
	var errs []error
	writes := 0
	for _, w := range ch.Writes {
		k := DestKey(w.Key)
		d := policy.Write(policy.KindMirror, w.From, w.To, m.state[k], "the writer's weight") // its record is taken below
		switch out, err := m.applyOne(k, &d); {
		case out.Wrote:
			writes++
		case err != nil:
			// Someone changed or removed it, or -dry-run: the next cycle
			// sees what the table holds.
			skip[k] = true
			if !errors.Is(err, ipvs.ErrWeightChanged) && !errors.Is(err, ipvs.ErrNotFound) && !errors.Is(err, ErrDryRun) {
				errs = append(errs, fmt.Errorf("apply replicated weight: %w", err))
			}
		}
	}
	if m.dryRun {
		// Records that say what this director's table does not hold would
		// be read as another tool's edits at the next cycle.
		return nil, errors.Join(errs...)
	}
	now := m.deps.Now()
	for _, d := range snap.Dests {
		k := DestKey(d.Key)
		if skip[k] || !configured[k] {
			continue
		}
		m.setRecord(k, policy.DestRecord{
			State:            policy.Ownership(d.State),
			Written:          d.Weight,
			DefaultOverride:  d.DefaultOverride,
			OverriddenConfig: d.OverriddenConfig,
			RestoreWeight:    d.RestoreWeight,
			SetBy:            d.SetBy,
			Held:             d.Held,
		})
		m.memory(k).policy.Resume(d.Carried, now)
	}
	if writes > 0 {
		m.log.Info("applied the writer's weights", "writes", writes)
	}
	if err := m.saveState(); err != nil {
		errs = append(errs, err)
	}
	return ch.LocalEdits, errors.Join(errs...)
}

// Replay carries out on this (the writer's) director an operator's change
// made on another: an lvsctl drain or undrain (e.Op) as lvsctl would have
// here, a weight found changed there (Op "") as a write of that weight.
// An error says why it was not applied (not configured here, not in the
// table, a write that failed); nothing is retried.
func (m *Monitor) Replay(e replica.Edit) error {
	if e.Op != "" {
		return m.replayRequest(DestKey(e.Key), e.Op)
	}
	return m.replayEdit(DestKey(e.Key), e.Weight)
}

// replayEdit writes an operator's change made on a follower into this
// (the writer's) table, as if the operator had made it here; the next
// cycle's reconcile classifies it by the usual ownership rules.
func (m *Monitor) replayEdit(k DestKey, weight int) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if rec := m.state[k]; rec.State == policy.DrainedByOperator && rec.Held && weight != 0 {
		// A bare weight from a peer that cannot say which request it was
		// (an etcd fleet's edits carry none, nor do an older director's):
		// the operator's undrain there, as it was before drains were held.
		rec.Held = false
		m.setRecord(k, rec)
	}
	cur, err := m.kernelWeight(k.Service, k.Dest)
	if err != nil {
		return err
	}
	if cur == weight {
		return nil
	}
	d := policy.Write(policy.KindReplay, cur, weight, m.state[k], "operator change made on another director")
	if _, err := m.applyOne(k, &d); err != nil {
		return fmt.Errorf("replay operator edit → %d: %w", weight, err)
	}
	return nil
}

// replayRequest carries out an lvsctl drain or undrain made on a follower
// on this (the writer's) director, as lvsctl would have here.
func (m *Monitor) replayRequest(k DestKey, op string) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	_, server, err := m.configured(k.Service, k.Dest)
	if err != nil {
		return err
	}
	switch op {
	case replica.OpDrain:
		err = m.drainLocked(k, policy.KindReplay, "drained by operator (lvsctl drain on another director)")
	case replica.OpUndrain:
		_, err = m.undrainLocked(k, server, policy.KindReplay, "undrained by operator (lvsctl undrain on another director)")
	default:
		err = fmt.Errorf("unknown request %q", op)
	}
	if err != nil {
		return fmt.Errorf("replay lvsctl %s: %w", op, err)
	}
	return nil
}
