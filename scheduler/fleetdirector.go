package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"lvs-feedback/monitor"
	"lvs-feedback/replica"
	"lvs-feedback/scheduler/fleet"
)

// This file runs a director as one of an etcd fleet (docs/fleet.md):
// every director publishes its counters each cycle; the elected leader
// runs the controller on the fleet-wide sums (Director.SetOthers), writes
// its own table and publishes the desired state; the others apply it to
// their tables with Director.Adopt, the single write path the director
// pair uses. Package scheduler/fleet is the etcd edge.

// FleetStore is the etcd edge as a fleet director uses it (*fleet.Client;
// tests may pass their own in Config.Fleet).
type FleetStore interface {
	Status() fleet.Status
	Publish(ctx context.Context, c fleet.Counters) error
	ReadFleet(ctx context.Context, withDocument bool) (fleet.Fleet, error)
	WriteDocument(ctx context.Context, d fleet.Document, docRev int64, own fleet.Counters) (int64, error)
	ReadView(ctx context.Context) (fleet.View, error)
	WaitLease(ctx context.Context) bool
	Close() error
}

// baseline is the leader's last reading of one other director.
type baseline struct {
	start uint64
	dests map[replica.DestKey]baselineDest
}

type baselineDest struct {
	total  uint64
	active int
}

// fleetDirector is the fleet loop's state. One goroutine owns it.
type fleetDirector struct {
	d     Director
	cfg   monitor.SyncConfig
	log   *slog.Logger
	store FleetStore
	// dryRun: this director writes nothing; it observes and applies no
	// document.
	dryRun bool
	after  func(monitor.CycleReport, error)

	start  uint64 // this run's edit epoch (persisted, rises at every start)
	cycles uint64
	outbox *Outbox
	totals map[monitor.DestKey]uint64 // new connections this director's table scheduled since start

	// Leader side.
	term    int64 // the term this director leads in; 0 while it follows
	docRev  int64 // the document's revision read at the start of the cycle
	applied map[string]replica.EditPos
	seen    map[string]*baseline

	// refusedWhy is the reason last logged for refusing a document: one
	// line per new reason, not one per cycle.
	refusedWhy string

	st monitor.FleetStatus
}

// startFleet connects to etcd and starts campaigning, then waits for the
// lease (at most the dial timeout): a director joining a fleet applies the
// fleet's weights in its first cycle.
func startFleet(ctx context.Context, d Director, gc Config) (*fleetDirector, error) {
	cfg, log := gc.Monitor.Sync, gc.Logger
	epochs := NewEpochStore(filepath.Join(gc.Monitor.StateDir, "fleet-epoch"))
	start, err := epochs.Bump()
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	store := gc.Fleet
	if store == nil {
		c, err := fleet.New(fleetClientConfig(gc.Monitor, gc.DryRun, log))
		if err != nil {
			return nil, err
		}
		store = c
	}
	d.ShareFigures()
	d.SetFollower(true) // nothing is written before this director leads
	log.Info("fleet director started", "id", cfg.ID, "endpoints", cfg.Etcd.Endpoints, "prefix", cfg.Etcd.Prefix, "lease_ttl", cfg.Etcd.LeaseTTL, "epoch", start)
	f := &fleetDirector{d: d, cfg: cfg, log: log, store: store, after: gc.AfterCycle, dryRun: gc.DryRun, start: start,
		outbox: NewOutbox(start), totals: map[monitor.DestKey]uint64{}, applied: map[string]replica.EditPos{}, seen: map[string]*baseline{}}
	wctx, cancel := context.WithTimeout(ctx, cfg.Etcd.DialTimeout)
	if !f.store.WaitLease(wctx) && ctx.Err() == nil {
		log.Warn("fleet: no etcd lease within the dial timeout; starting with the table held", "dial_timeout", cfg.Etcd.DialTimeout)
	}
	cancel()
	return f, nil
}

// fleetClientConfig is the etcd client's configuration from the
// monitor's.
func fleetClientConfig(cfg monitor.Config, dryRun bool, log *slog.Logger) fleet.Config {
	e := cfg.Sync.Etcd
	return fleet.Config{ID: cfg.Sync.ID, Endpoints: e.Endpoints, Prefix: e.Prefix, LeaseTTL: e.LeaseTTL, DialTimeout: e.DialTimeout,
		OpTimeout: max(cfg.Interval, time.Second), // an unreachable etcd must not stall cycles for long
		CAFile:    e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile, Username: e.Username, PasswordFile: e.PasswordFile,
		Observer: dryRun, Members: e.Directors, Logger: log}
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
		if n := len(fl.Refused); n > 0 {
			f.st.CountersRefused += uint64(n)
			f.log.Warn("fleet: untrusted director counters left out of the sums", "records", n, "first", fl.Refused[0].Error())
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
		f.d.SetOthers(f.sums(fl.Directors))
	}
	f.d.SetFollower(!leading)
	rep, err := f.d.Cycle(ctx)
	f.d.SetOthers(nil)
	f.noteImplausible(f.d.TakeRefused())
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		f.log.Error("cycle", "error", err)
	}
	edits := f.d.TakeEdits()
	own := f.counters()
	if leading {
		f.st.Directors = len(fl.Directors) + 1
		f.writeDocument(ctx, own)
	} else {
		for _, e := range edits {
			f.outbox.AddOp(e.Key, e.Weight, e.Op)
		}
		f.follow(ctx, own)
	}
	f.status(leading)
	if f.after != nil {
		f.after(rep, err)
	}
}

// noteImplausible counts and logs, one line per director, the figures
// the plausibility bound left out of this cycle's sums.
func (f *fleetDirector) noteImplausible(refused []monitor.RefusedFigures) {
	if len(refused) == 0 {
		return
	}
	f.st.CountersRefused += uint64(len(refused))
	byDir := map[string][]monitor.RefusedFigures{}
	for _, r := range refused {
		byDir[r.Director] = append(byDir[r.Director], r)
	}
	for _, id := range slices.Sorted(maps.Keys(byDir)) {
		r := byDir[id][0]
		f.log.Warn("fleet: implausible director counters left out of the sums", "from", id, "servers", len(byDir[id]),
			"server", r.Key.String(), "new", r.New, "active", r.Active, "bound", r.Bound, "reference", r.Reference,
			"why", fmt.Sprintf("more than %d × the larger of the leader's own and the other directors' median", monitor.PlausibleFactor))
	}
}

// takeOver starts a term: the leader continues from the stored document
// (weights, drains, controller state, the edits applied), holding the
// edits made here and not yet acknowledged.
func (f *fleetDirector) takeOver(fl fleet.Fleet, term int64) {
	f.term = term
	f.seen = map[string]*baseline{}
	f.applied = map[string]replica.EditPos{}
	if d := fl.Document; d != nil {
		if err := f.d.CheckWeights(d.Snapshot); err != nil {
			f.refuse(d, err)
			f.log.Error("fleet: the stored state document refused; the leader continues from its own state and replaces it", "error", err)
			fl.Document = nil
		}
	}
	if d := fl.Document; d != nil {
		for _, a := range d.Acks {
			f.applied[a.Peer] = a.Pos
		}
		if _, err := f.d.Adopt(d.Snapshot, f.outbox.Pending()); err != nil {
			f.log.Error("fleet: taking over the stored state", "error", err)
		}
	}
	f.outbox = NewOutbox(f.start) // a leader's own table holds its edits
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
		slices.SortFunc(edits, func(a, b replica.Edit) int {
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
			if err := f.d.Replay(e); err != nil {
				f.log.Warn("fleet: operator edit from another director not applied", "from", c.Director, "server", e.Key.String(), "weight", e.Weight, "error", err)
				continue
			}
			f.log.Info("fleet: operator edit from another director applied", "from", c.Director, "server", e.Key.String(), "weight", e.Weight)
		}
	}
}

// sums returns the other directors' figures per destination, one entry
// per director: new connections since the leader's last reading of it (or,
// at a first reading, its last cycle), active and inactive connections.
// addOthers checks them against the plausibility bound and adds them.
func (f *fleetDirector) sums(dirs []fleet.Counters) map[monitor.DestKey][]monitor.OtherFigures {
	out := map[monitor.DestKey][]monitor.OtherFigures{}
	live := map[string]bool{}
	for _, c := range dirs {
		if c.Director == f.cfg.ID {
			continue
		}
		live[c.Director] = true
		b := f.seen[c.Director]
		if b == nil || b.start != c.Start {
			b = &baseline{start: c.Start, dests: map[replica.DestKey]baselineDest{}}
			f.seen[c.Director] = b
		}
		for _, d := range c.Dests {
			o := monitor.OtherFigures{Director: c.Director, Active: d.Active, Inactive: d.Inactive}
			prev, ok := b.dests[d.Key]
			switch {
			case ok && d.NewTotal >= prev.total:
				o.New = int64(min(d.NewTotal-prev.total, math.MaxInt64))
				o.ActiveDelta = d.Active - prev.active
			case d.New > 0:
				o.New = d.New
			}
			out[monitor.DestKey(d.Key)] = append(out[monitor.DestKey(d.Key)], o)
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
	for _, l := range f.d.OwnFigures() {
		k := l.Key
		if l.New > 0 {
			f.totals[k] += uint64(l.New)
		}
		c.Dests = append(c.Dests, fleet.DestCounters{Key: replica.DestKey(k), NewTotal: f.totals[k], New: l.New, Active: l.Active, Inactive: l.Inactive})
	}
	return c
}

// writeDocument publishes the leader's desired state with its counters.
func (f *fleetDirector) writeDocument(ctx context.Context, own fleet.Counters) {
	doc := fleet.Document{Leader: f.cfg.ID, Cycle: f.cycles, Snapshot: f.d.Snapshot()}
	for id, pos := range f.applied {
		doc.Acks = append(doc.Acks, replica.Ack{Peer: id, Pos: pos})
	}
	slices.SortFunc(doc.Acks, func(a, b replica.Ack) int { return strings.Compare(a.Peer, b.Peer) })
	rev, err := f.store.WriteDocument(ctx, doc, f.docRev, own)
	if err != nil {
		f.log.Error("fleet: the leader's state document not written; the other directors hold their tables", "error", err)
		f.d.SetFollower(true) // nor does the backlog guard write until a fenced read succeeds again
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
			f.st.Refused = err.Error()
			f.st.DocumentsRefused++
			if f.refusedWhy != f.st.Refused {
				f.refusedWhy = f.st.Refused
				f.log.Error("fleet: the stored state document is malformed; nothing applied, table held", "error", err)
			}
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
	if f.dryRun {
		return
	}
	if !f.store.Status().LeaseOK {
		f.log.Warn("fleet: no live etcd lease; the leader's state not applied, table held")
		return
	}
	if err := f.checkDocument(d, v); err != nil {
		f.refuse(d, err)
		return
	}
	f.st.Refused, f.refusedWhy = "", ""
	if err := adoptFrom(f.d, f.outbox, f.cfg.ID, d.Acks, d.Snapshot); err != nil {
		f.log.Error("fleet: applying the leader's state", "leader", d.Leader, "error", err)
	}
}

// checkDocument is a follower's check of the document before it applies
// it: written by the leader the election names now, in its term (its
// election key's creation revision, read in the same transaction) — not
// by remembering the largest term seen, which a forged term or an etcd
// restore would turn into a lock-out — and every weight within range.
func (f *fleetDirector) checkDocument(d *fleet.Document, v fleet.View) error {
	switch {
	case v.Leader == "":
		return fmt.Errorf("written by %s in term %d, but no leader is elected now", d.Leader, d.Term)
	case d.Leader != v.Leader || d.Term != v.LeaderTerm:
		return fmt.Errorf("written by %s in term %d, but the elected leader is %s in term %d", d.Leader, d.Term, v.Leader, v.LeaderTerm)
	}
	return f.d.CheckWeights(d.Snapshot)
}

// refuse records and logs a refused document: the table is held.
func (f *fleetDirector) refuse(d *fleet.Document, err error) {
	f.st.Refused = err.Error()
	f.st.DocumentsRefused++
	if f.refusedWhy != f.st.Refused {
		f.refusedWhy = f.st.Refused
		f.log.Error("fleet: the state document refused; table held", "leader", d.Leader, "term", d.Term, "revision", d.Revision, "why", f.st.Refused)
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
	s := monitor.SyncStatus{ID: f.cfg.ID, Role: role, Writer: leading, Phase: phase, Epoch: f.start, Leader: f.st.LeaderID, Fleet: &fs}
	f.d.SetSyncStatus(s)
}

// guarded follows a backlog check: the leader's guard writes its own
// table; the others take the result from the next document.
func (f *fleetDirector) guarded(int) {}
