package scheduler

import (
	"context"
	"log/slog"
	"net"
	"time"

	"lvs-feedback/monitor"
	"lvs-feedback/replica"
)

// Director is one director's cycle as the group drives it
// (*monitor.Monitor; monitor/doc.go documents each method). The group
// decides who writes and carries the replicated state; the director only
// runs its cycle, reports, and takes what it is handed.
type Director interface {
	// The cycle and its clock: one cycle (read, reconcile, gather,
	// decide, apply, persist), one backlog check (the weights it wrote),
	// the running configuration's periods, and a signal that a reload may
	// have changed them.
	Cycle(ctx context.Context) (monitor.CycleReport, error)
	Guard(ctx context.Context) (int, error)
	Interval() time.Duration
	GuardCheck() time.Duration
	Reloaded() <-chan struct{}

	// Replication: a writer's desired state, a follower's adoption of
	// it, the operator edits made on a follower and their replay on the
	// writer, and the switch between the two roles.
	Snapshot() replica.Snapshot
	Adopt(snap replica.Snapshot, pending []replica.Edit) ([]replica.Edit, error)
	TakeEdits() []replica.Edit
	Replay(e replica.Edit) error
	SetFollower(follower bool)

	// What the group tells the director for its status and the pair's
	// answer to an operator's drain.
	SetSyncStatus(s monitor.SyncStatus)
	SetConfirm(f monitor.ConfirmFunc)

	// An etcd fleet's cycle input and output: the director's own figures,
	// the other directors' (on the leader), the figures left out as
	// implausible, and the check of a leader's weights.
	ShareFigures()
	OwnFigures() []monitor.OwnFigures
	SetOthers(o map[monitor.DestKey][]monitor.OtherFigures)
	TakeRefused() []monitor.RefusedFigures
	CheckWeights(snap replica.Snapshot) error
}

// Config is what Run needs besides the director. Every field may be left
// zero except Monitor.
type Config struct {
	// Monitor is the director's configuration as it starts: its [sync]
	// section says alone, pair or fleet, StateDir holds the group's epoch
	// files, Interval sets the pair's peer timeout.
	Monitor monitor.Config
	// DryRun: the director writes nothing (lvs-monitor -dry-run); a fleet
	// director then only observes and never campaigns.
	DryRun bool
	// Logger (default: discard).
	Logger *slog.Logger
	// Now is the clock of the group's state machine (default time.Now).
	Now func() time.Time
	// AfterCycle, if non-nil, is called after each cycle (e.g. to notify
	// systemd or print a table).
	AfterCycle func(monitor.CycleReport, error)
	// Roles and SyncListener, if non-nil, replace the role source and the
	// sync listener a pair director builds from its configuration (tests
	// use them).
	Roles        RoleSource
	SyncListener net.Listener
	// Fleet, if non-nil, replaces the etcd client a fleet director builds
	// from its configuration.
	Fleet FleetStore
}

// member is the part of the run loop that differs between a director
// alone, one of a pair and one of a fleet.
type member interface {
	// cycle runs one cycle of the director in the group.
	cycle(ctx context.Context)
	// guarded follows a backlog check that wrote n weights.
	guarded(n int)
	stop()
}

// Run runs d until ctx ends: a cycle now and then every interval, with
// backlog checks between cycles. A director with a [sync] section runs as
// one of a pair (pair.go: it writes only while it is the group's writer,
// publishes its state after each cycle, and takes the other directors'
// messages and role changes as they come) or of an etcd fleet
// (fleetdirector.go). A cycle that overruns the interval delays the next
// one; ticks are not queued. An error means the group could not start
// (key, epoch file, listener, etcd client).
func Run(ctx context.Context, d Director, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var mem member = alone{d: d, log: cfg.Logger, after: cfg.AfterCycle}
	var p *pair // nil unless one of a pair
	switch {
	case cfg.Monitor.Sync.Fleet():
		f, err := startFleet(ctx, d, cfg)
		if err != nil {
			return err
		}
		mem = f
	case cfg.Monitor.Sync.Enabled():
		var err error
		if p, err = startPair(ctx, d, cfg); err != nil {
			return err
		}
		mem = p
	}
	defer mem.stop()
	var roles <-chan Role // nil channels: never ready but in a pair
	var inbox <-chan struct{}
	var requests <-chan *confirmWait
	if p != nil {
		p.node.SetRole(p.roles.Role())
		roles, inbox, requests = p.roles.Changes(), p.inbox.Ready(), p.requests
	}
	mem.cycle(ctx)
	clock := newCycleClock(d)
	defer clock.stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-clock.cycle():
			mem.cycle(ctx)
		case <-clock.guard():
			mem.guarded(runGuard(ctx, d, cfg.Logger))
		case <-d.Reloaded():
			clock.reload()
		case r := <-roles:
			p.roleChanged(ctx, r)
		case <-inbox:
			p.handle(ctx, p.inbox.Take())
		case w := <-requests:
			p.request(w)
		}
	}
}

// alone is a director without a group: its cycle is the monitor's.
type alone struct {
	d     Director
	log   *slog.Logger
	after func(monitor.CycleReport, error)
}

func (a alone) cycle(ctx context.Context) {
	rep, err := a.d.Cycle(ctx)
	if ctx.Err() != nil {
		return // stopped during the cycle
	}
	if err != nil {
		a.log.Error("cycle", "error", err)
	}
	if a.after != nil {
		a.after(rep, err)
	}
}

func (alone) guarded(int) {}
func (alone) stop()       {}

// runGuard runs one backlog check and logs its failure.
func runGuard(ctx context.Context, d Director, log *slog.Logger) int {
	n, err := d.Guard(ctx)
	if err != nil && ctx.Err() == nil {
		log.Error("backlog guard", "error", err)
	}
	return n
}

// cycleClock ticks a director's cycles and the backlog checks between
// them at the running configuration's periods, which a reload may change.
type cycleClock struct {
	d        Director
	interval time.Duration
	t        *time.Ticker
	g        *guardTicker
}

func newCycleClock(d Director) *cycleClock {
	i := d.Interval()
	return &cycleClock{d: d, interval: i, t: time.NewTicker(i), g: newGuardTicker(d.GuardCheck())}
}

func (c *cycleClock) cycle() <-chan time.Time { return c.t.C }
func (c *cycleClock) guard() <-chan time.Time { return c.g.C() }

// reload takes the periods of the configuration now running.
func (c *cycleClock) reload() {
	if i := c.d.Interval(); i != c.interval {
		c.interval = i
		c.t.Reset(i)
	}
	c.g.reset(c.d.GuardCheck())
}

func (c *cycleClock) stop() {
	c.t.Stop()
	c.g.stop()
}

// guardTicker ticks every backlog check period; off (a nil channel) when
// the period is 0.
type guardTicker struct {
	t *time.Ticker
	d time.Duration
}

func newGuardTicker(d time.Duration) *guardTicker {
	g := &guardTicker{}
	g.reset(d)
	return g
}

// C is the tick channel; nil (never ready) when the guard is off.
func (g *guardTicker) C() <-chan time.Time {
	if g.t == nil {
		return nil
	}
	return g.t.C
}

func (g *guardTicker) reset(d time.Duration) {
	if d == g.d {
		return
	}
	g.stop()
	g.d = d
	if d > 0 {
		g.t = time.NewTicker(d)
	}
}

func (g *guardTicker) stop() {
	if g.t != nil {
		g.t.Stop()
		g.t = nil
	}
}
