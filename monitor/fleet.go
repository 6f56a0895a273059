package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"lvs-feedback/fleet"
	"lvs-feedback/scheduler"
)

// This file runs the monitor as one director of an etcd fleet
// (docs/fleet.md): every director publishes its counters each cycle; the
// elected leader runs the controller on the fleet-wide sums, writes its own
// table and publishes the desired state; the others apply it to their
// tables with adopt, the single write path the director pair uses
// (replicate.go). package fleet is the etcd edge.

// FleetStatus is the etcd side of a fleet director, for status and
// metrics.
type FleetStatus struct {
	Leader      bool   // this director leads (decides and writes)
	LeaderID    string // the leader this director follows or is ("" if none known)
	EtcdUp      bool   // the last etcd operation succeeded
	EtcdError   string // the last failure, if any
	LeaseOK     bool   // this director holds a live lease
	DocRevision int64  // the desired-state document's revision last read or written
	Directors   int    // directors publishing counters
	// EtcdErrors counts failed etcd operations (and malformed values read).
	EtcdErrors uint64
}

// FleetStore is the etcd edge as a fleet director uses it (*fleet.Client;
// tests may pass their own in Deps.Fleet).
type FleetStore interface {
	Status() fleet.Status
	Publish(ctx context.Context, c fleet.Counters) error
	ReadFleet(ctx context.Context, withDocument bool) (fleet.Fleet, error)
	WriteDocument(ctx context.Context, d fleet.Document, docRev int64, own fleet.Counters) (int64, error)
	ReadView(ctx context.Context) (fleet.View, error)
	WaitLease(ctx context.Context) bool
	Close() error
}

// fleetInputs is how a fleet director's cycle meets the fleet: the cycle
// records this director's own figures in local (before any sum) and, on the
// leader, adds others, the other directors' figures, to its observations.
type fleetInputs struct {
	local  map[DestKey]localFigures
	others map[DestKey]otherFigures
}

type localFigures struct {
	New              int64 // -1: not known yet
	Active, Inactive int
}

type otherFigures struct {
	New                  int64
	Active, ActiveDelta  int
	Inactive, Publishing int
}

// addFleetInputs runs in the cycle after observe: it keeps this director's
// own figures for publishing and, on a leader, makes the observations the
// fleet-wide sums the controller decides on.
func (m *Monitor) addFleetInputs(rows []destRow) {
	f := m.fleetIn
	if f == nil {
		return
	}
	clear(f.local)
	for i := range rows {
		d := rows[i].st
		f.local[d.Key] = localFigures{New: d.NewConns, Active: d.ActiveConns, Inactive: d.InactiveConns}
		o, ok := f.others[d.Key]
		if !ok {
			continue
		}
		if d.NewConns >= 0 {
			d.NewConns += o.New
		}
		d.ActiveConns += o.Active
		d.ActiveDelta += o.ActiveDelta
		d.InactiveConns += o.Inactive
	}
}

// baseline is the leader's last reading of one other director.
type baseline struct {
	start uint64
	dests map[scheduler.DestKey]baselineDest
}

type baselineDest struct {
	total  uint64
	active int
}

// fleetDirector is the fleet loop's state. One goroutine owns it.
type fleetDirector struct {
	m     *Monitor
	cfg   SyncConfig
	log   *slog.Logger
	store FleetStore
	after func(CycleReport, error)

	start  uint64 // this run's edit epoch (persisted, rises at every start)
	cycles uint64
	outbox *scheduler.Outbox
	totals map[DestKey]uint64 // new connections this director's table scheduled since start

	// Leader side.
	term    int64 // the term this director leads in; 0 while it follows
	docRev  int64 // the document's revision read at the start of the cycle
	applied map[string]scheduler.EditPos
	seen    map[string]*baseline

	// Follower side.
	maxTerm int64 // highest term of a document applied: older ones are refused

	st FleetStatus
}

// startFleet connects to etcd and starts campaigning.
func (m *Monitor) startFleet(after func(CycleReport, error)) (*fleetDirector, error) {
	cfg := m.cfg.Sync
	epochs := scheduler.NewEpochStore(filepath.Join(m.cfg.StateDir, "fleet-epoch"))
	start, err := epochs.Bump()
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	store := m.deps.Fleet
	if store == nil {
		c, err := fleet.New(fleetClientConfig(m.cfg, m.dryRun, m.log))
		if err != nil {
			return nil, err
		}
		store = c
	}
	m.opMu.Lock()
	m.fleetIn = &fleetInputs{local: map[DestKey]localFigures{}}
	m.follower = true // nothing is written before this director leads
	m.opMu.Unlock()
	m.log.Info("fleet director started", "id", cfg.ID, "endpoints", cfg.Etcd.Endpoints, "prefix", cfg.Etcd.Prefix, "lease_ttl", cfg.Etcd.LeaseTTL, "epoch", start)
	return &fleetDirector{m: m, cfg: cfg, log: m.log, store: store, after: after, start: start,
		outbox: scheduler.NewOutbox(start), totals: map[DestKey]uint64{}, applied: map[string]scheduler.EditPos{}, seen: map[string]*baseline{}}, nil
}

// fleetClientConfig is the etcd client's configuration from the
// monitor's.
func fleetClientConfig(cfg Config, dryRun bool, log *slog.Logger) fleet.Config {
	e := cfg.Sync.Etcd
	return fleet.Config{ID: cfg.Sync.ID, Endpoints: e.Endpoints, Prefix: e.Prefix, LeaseTTL: e.LeaseTTL, DialTimeout: e.DialTimeout,
		OpTimeout: max(cfg.Interval, time.Second), // an unreachable etcd must not stall cycles for long
		CAFile:    e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile, Username: e.Username, PasswordFile: e.PasswordFile,
		Observer: dryRun, Logger: log}
}

// stop resigns and disconnects.
func (f *fleetDirector) stop() {
	if err := f.store.Close(); err != nil {
		f.log.Warn("fleet: closing the etcd client", "error", err)
	}
}

// cycle is one fleet cycle: the leader reads the fleet, decides on the
// sums, writes its table and the document; a follower runs its cycle
// without deciding, publishes its counters and edits, and applies the
// document.
func (f *fleetDirector) cycle(ctx context.Context) {
	f.cycles++
	st := f.store.Status()
	leading := false
	var fl fleet.Fleet
	if st.Leader {
		var err error
		fl, err = f.store.ReadFleet(ctx, f.term != st.Term) // the document itself only when a term starts
		switch {
		case err == nil:
			leading = true
		case errors.Is(err, fleet.ErrMalformed):
			// Fenced read done, only the document unreadable: lead from
			// this director's own state, and overwrite it.
			leading = true
			f.log.Error("fleet: the stored state document is malformed; the leader continues from its own state and replaces it", "error", err)
		default:
			f.log.Warn("fleet: elected, but the fenced read failed: not writing this cycle (table held)", "error", err)
		}
		for _, e := range fl.Malformed {
			f.log.Error("fleet: malformed director counters left out of the sums", "error", e)
		}
	}
	switch {
	case leading && f.term != st.Term:
		f.takeOver(fl, st.Term)
	case !leading && f.term != 0:
		f.log.Warn("fleet: no longer the leader; following", "term", f.term)
		f.term = 0
	}
	if leading {
		f.docRev = fl.DocumentRevision
		f.replayEdits(fl.Directors)
		f.m.setFleetOthers(f.sums(fl.Directors))
	}
	f.m.setFollower(!leading)
	rep, err := f.m.Cycle(ctx)
	f.m.setFleetOthers(nil)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		f.log.Error("cycle", "error", err)
	}
	edits := f.m.takeLocalEdits()
	own := f.counters()
	if leading {
		f.st.Directors = len(fl.Directors) + 1
		f.writeDocument(ctx, own)
	} else {
		for _, e := range edits {
			f.outbox.Add(scheduler.DestKey(e.Key), e.Weight)
		}
		f.follow(ctx, own)
	}
	f.status(leading)
	if f.after != nil {
		f.after(rep, err)
	}
}

// takeOver starts a term: the leader continues from the stored document
// (weights, drains, controller state, the edits applied), holding the
// edits made here and not yet acknowledged.
func (f *fleetDirector) takeOver(fl fleet.Fleet, term int64) {
	f.term = term
	f.seen = map[string]*baseline{}
	f.applied = map[string]scheduler.EditPos{}
	if d := fl.Document; d != nil {
		for _, a := range d.Acks {
			f.applied[a.Peer] = a.Pos
		}
		if _, err := f.m.adopt(d.Snapshot, f.outbox.Pending()); err != nil {
			f.log.Error("fleet: taking over the stored state", "error", err)
		}
	}
	f.outbox = scheduler.NewOutbox(f.start) // a leader's own table holds its edits
	prev := ""
	if fl.Document != nil {
		prev = fl.Document.Leader
	}
	f.log.Info("fleet: leading", "term", term, "previous_leader", prev, "document_revision", fl.DocumentRevision, "directors", len(fl.Directors))
}

// replayEdits writes the operator edits made on other directors into this
// (the leader's) table, each once.
func (f *fleetDirector) replayEdits(dirs []fleet.Counters) {
	for _, c := range dirs {
		if c.Director == f.cfg.ID {
			continue
		}
		edits := slices.Clone(c.Edits)
		slices.SortFunc(edits, func(a, b scheduler.Edit) int {
			if a.Pos.After(b.Pos) {
				return 1
			}
			if b.Pos.After(a.Pos) {
				return -1
			}
			return 0
		})
		for _, e := range edits {
			if last, ok := f.applied[c.Director]; ok && !e.Pos.After(last) {
				continue
			}
			f.applied[c.Director] = e.Pos
			if err := f.m.replayEdit(DestKey(e.Key), e.Weight); err != nil {
				f.log.Warn("fleet: operator edit from another director not applied", "from", c.Director, "server", e.Key.String(), "weight", e.Weight, "error", err)
				continue
			}
			f.log.Info("fleet: operator edit from another director applied", "from", c.Director, "server", e.Key.String(), "weight", e.Weight)
		}
	}
}

// sums returns the other directors' figures per destination: new
// connections since the leader's last reading of each (or, at a first
// reading, the director's last cycle), active and inactive connections.
func (f *fleetDirector) sums(dirs []fleet.Counters) map[DestKey]otherFigures {
	out := map[DestKey]otherFigures{}
	live := map[string]bool{}
	for _, c := range dirs {
		if c.Director == f.cfg.ID {
			continue
		}
		live[c.Director] = true
		b := f.seen[c.Director]
		if b == nil || b.start != c.Start {
			b = &baseline{start: c.Start, dests: map[scheduler.DestKey]baselineDest{}}
			f.seen[c.Director] = b
		}
		for _, d := range c.Dests {
			o := out[DestKey(d.Key)]
			prev, ok := b.dests[d.Key]
			switch {
			case ok && d.NewTotal >= prev.total:
				o.New += int64(d.NewTotal - prev.total)
				o.ActiveDelta += d.Active - prev.active
			case d.New > 0:
				o.New += d.New
			}
			o.Active += d.Active
			o.Inactive += d.Inactive
			o.Publishing++
			out[DestKey(d.Key)] = o
			b.dests[d.Key] = baselineDest{total: d.NewTotal, active: d.Active}
		}
	}
	for id := range f.seen {
		if !live[id] {
			delete(f.seen, id) // its lease expired: a return starts anew
		}
	}
	return out
}

// counters returns this director's publication, from the figures its
// last cycle recorded before any sum.
func (f *fleetDirector) counters() fleet.Counters {
	c := fleet.Counters{Director: f.cfg.ID, Start: f.start, Cycle: f.cycles}
	f.m.opMu.Lock()
	defer f.m.opMu.Unlock()
	for i := range f.m.cfg.Services {
		s := &f.m.cfg.Services[i]
		for j := range s.Servers {
			k := DestKey{Service: s.Key, Dest: s.Servers[j].Addr}
			l, ok := f.m.fleetIn.local[k]
			if !ok {
				continue // not in this director's table
			}
			if l.New > 0 {
				f.totals[k] += uint64(l.New)
			}
			c.Dests = append(c.Dests, fleet.DestCounters{Key: scheduler.DestKey(k), NewTotal: f.totals[k], New: l.New, Active: l.Active, Inactive: l.Inactive})
		}
	}
	return c
}

// writeDocument publishes the leader's desired state with its counters.
func (f *fleetDirector) writeDocument(ctx context.Context, own fleet.Counters) {
	doc := fleet.Document{Leader: f.cfg.ID, Cycle: f.cycles, Snapshot: f.m.snapshot()}
	for id, pos := range f.applied {
		doc.Acks = append(doc.Acks, scheduler.Ack{Peer: id, Pos: pos})
	}
	slices.SortFunc(doc.Acks, func(a, b scheduler.Ack) int { return strings.Compare(a.Peer, b.Peer) })
	rev, err := f.store.WriteDocument(ctx, doc, f.docRev, own)
	if err != nil {
		f.log.Error("fleet: the leader's state document not written; the other directors hold their tables", "error", err)
		f.m.setFollower(true) // nor does the backlog guard write until a fenced read succeeds again
		return
	}
	f.docRev = rev
	f.st.DocRevision = rev
}

// follow publishes this director's counters and pending edits, then
// applies the leader's document.
func (f *fleetDirector) follow(ctx context.Context, own fleet.Counters) {
	own.Edits = f.outbox.Pending()
	if err := f.store.Publish(ctx, own); err != nil && !errors.Is(err, fleet.ErrNoLease) {
		f.log.Warn("fleet: etcd unreachable; counters not published, table held (fail static)", "error", err)
		f.st.LeaderID, f.st.Directors = "", 0
		return
	}
	v, err := f.store.ReadView(ctx)
	f.st.LeaderID, f.st.Directors = v.Leader, v.Directors
	if err != nil {
		if errors.Is(err, fleet.ErrMalformed) {
			f.log.Error("fleet: the stored state document is malformed; nothing applied, table held", "error", err)
		} else {
			f.log.Warn("fleet: etcd unreachable; table held (fail static)", "error", err)
		}
		return
	}
	if v.Document == nil {
		return
	}
	d := v.Document
	f.st.DocRevision = d.Revision
	if f.m.dryRun {
		return
	}
	if !f.store.Status().LeaseOK {
		f.log.Warn("fleet: no live etcd lease; the leader's state not applied, table held")
		return
	}
	if d.Term < f.maxTerm {
		f.log.Warn("fleet: document from an earlier leader refused", "leader", d.Leader, "term", d.Term, "current_term", f.maxTerm)
		return
	}
	f.maxTerm = d.Term
	if err := f.m.adoptFrom(f.outbox, f.cfg.ID, d.Acks, d.Snapshot); err != nil {
		f.log.Error("fleet: applying the leader's state", "leader", d.Leader, "error", err)
	}
}

// status records the fleet status for Status and metrics.
func (f *fleetDirector) status(leading bool) {
	es := f.store.Status()
	f.st.Leader, f.st.EtcdUp, f.st.EtcdError, f.st.LeaseOK, f.st.EtcdErrors = leading, es.Up, es.LastErr, es.LeaseOK, es.Errors
	if leading {
		f.st.LeaderID = f.cfg.ID
	}
	role, phase := "follower", "following the leader"
	switch {
	case leading:
		role, phase = "leader", "leading"
	case !es.Up:
		phase = "etcd unreachable: table held (fail static)"
	case !es.LeaseOK:
		phase = "no etcd lease: table held"
	}
	fs := f.st
	s := SyncStatus{ID: f.cfg.ID, Role: role, Writer: leading, Phase: phase, Epoch: f.start, Leader: f.st.LeaderID, Fleet: &fs}
	f.m.mu.Lock()
	f.m.sync = &s
	f.m.mu.Unlock()
	f.m.deps.Metrics.observeFleet(fs)
}

// setFleetOthers sets the other directors' figures the next cycle adds.
func (m *Monitor) setFleetOthers(o map[DestKey]otherFigures) {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.fleetIn.others = o
}

// runFleet is Run for a fleet director: a fleet cycle every interval,
// backlog checks between cycles (the leader's guard writes its own table;
// the others take the result from the next document).
func (m *Monitor) runFleet(ctx context.Context, afterCycle func(CycleReport, error)) error {
	f, err := m.startFleet(afterCycle)
	if err != nil {
		return err
	}
	defer f.stop()
	// The first cycle waits for the lease (at most the dial timeout): a
	// director joining a fleet applies the fleet's weights in it.
	wctx, cancel := context.WithTimeout(ctx, m.cfg.Sync.Etcd.DialTimeout)
	if !f.store.WaitLease(wctx) && ctx.Err() == nil {
		m.log.Warn("fleet: no etcd lease within the dial timeout; starting with the table held", "dial_timeout", m.cfg.Sync.Etcd.DialTimeout)
	}
	cancel()
	f.cycle(ctx)
	clock := m.newCycleClock()
	defer clock.stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-clock.cycle():
			f.cycle(ctx)
		case <-clock.guard():
			m.runGuard(ctx)
		case <-m.reloaded:
			clock.reload()
		}
	}
}
