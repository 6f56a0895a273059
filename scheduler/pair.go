package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"lvs-feedback/monitor"
	"lvs-feedback/replica"
)

// pair runs a director as one of a synchronised pair (or group): the loop
// of docs/director-pair.md ("Wiring into lvs-monitor"). One goroutine owns
// it (Run's); the listener and the pusher run in their own.
type pair struct {
	d      Director
	cfg    monitor.SyncConfig
	log    *slog.Logger
	now    func() time.Time
	node   *Node
	outbox *Outbox
	inbox  *Inbox
	ln     *Listener
	push   *Pusher
	roles  RoleSource
	wg     sync.WaitGroup

	after func(monitor.CycleReport, error)

	// requests brings operator requests that wait for the peers
	// (pair.confirm) into the loop, which owns waits; stopped is closed
	// when the loop ends.
	requests chan *confirmWait
	stopped  chan struct{}
	waits    []*confirmWait
	// gen numbers this director's snapshots as a writer (Message.Gen);
	// adopted is the writer's message it last applied as a follower.
	gen     uint64
	adopted replica.Adoption
}

// startPair loads the key, takes a new epoch and starts the listener, the
// pusher and the role source.
func startPair(ctx context.Context, d Director, gc Config) (*pair, error) {
	cfg, log := gc.Monitor.Sync, gc.Logger
	key, err := LoadKey(cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	epochs := NewEpochStore(filepath.Join(gc.Monitor.StateDir, "sync-epoch"))
	epoch, err := epochs.Bump()
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	appliedStore := NewAppliedStore(filepath.Join(gc.Monitor.StateDir, "sync-applied"))
	applied, err := appliedStore.Load()
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	var peerIDs, peerAddrs []string
	for _, p := range cfg.Peers {
		peerIDs = append(peerIDs, p.ID)
		peerAddrs = append(peerAddrs, p.Address)
	}
	node, err := NewNode(NodeConfig{
		Self: cfg.ID, PeerTimeout: 3 * gc.Monitor.Interval, ExpectPeers: len(cfg.Peers), SaveEpoch: epochs.Save, SaveApplied: appliedStore.Save,
	}, epoch, gc.Now())
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	node.RestoreApplied(applied) // a restarted writer never replays an edit twice
	ln, err := NewListener(ListenerConfig{
		Self: cfg.ID, Key: key, Addr: cfg.Listen, Listener: gc.SyncListener, Senders: peerIDs, Logger: log,
		PeerSources: peerSources(peerAddrs),
	})
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	push, err := NewPusher(PusherConfig{Self: cfg.ID, Key: key, Peers: peerAddrs, Logger: log})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("sync: %w", err)
	}
	p := &pair{d: d, cfg: cfg, log: log, now: gc.Now, node: node, outbox: NewOutbox(epoch), inbox: NewInbox(),
		ln: ln, push: push, after: gc.AfterCycle,
		requests: make(chan *confirmWait), stopped: make(chan struct{})}
	p.roles = gc.Roles
	if p.roles == nil {
		switch cfg.Role {
		case "active":
			p.roles = NewFixedRole(Active)
		case "standby":
			p.roles = NewFixedRole(Standby)
		default:
			w, err := NewVIPWatcher(VIPWatcherConfig{VIPs: cfg.VIPAddrs, Logger: log})
			if err != nil {
				ln.Close()
				return nil, fmt.Errorf("sync: %w", err)
			}
			p.wg.Go(func() { _ = w.Run(ctx) })
			select {
			case <-w.Ready():
			case <-time.After(10 * time.Second):
				ln.Close()
				return nil, fmt.Errorf("sync: the virtual-IP watcher did not list the addresses within 10 s")
			case <-ctx.Done():
				ln.Close()
				return nil, ctx.Err()
			}
			p.roles = w
		}
	}
	p.wg.Go(func() { _ = ln.Run(ctx, p.inbox.Put) })
	p.wg.Go(func() { _ = push.Run(ctx) })
	d.SetConfirm(p.confirm)
	log.Info("synchronised director started", "id", cfg.ID, "epoch", epoch, "listen", ln.Addr(), "peers", peerAddrs, "role_source", cfg.Role)
	return p, nil
}

// stop closes the listener and waits for the pair's goroutines; the
// requests still waiting for the peers return.
func (p *pair) stop() {
	p.d.SetConfirm(nil)
	close(p.stopped)
	p.ln.Close()
	p.wg.Wait()
}

// step advances the writer/follower state machine and acts on a change.
func (p *pair) step(ctx context.Context) {
	was := p.node.Writer()
	st, err := p.node.Step(p.now())
	if err != nil {
		p.log.Error("sync: cannot persist a new epoch; not taking it", "error", err)
	}
	if st.Reason != "" {
		p.log.Info("sync: "+st.Reason, "phase", st.Phase, "writer", st.Writer, "epoch", st.Epoch, "leader", st.Leader)
	}
	switch {
	case st.Writer:
		p.outbox = NewOutbox(p.node.Epoch()) // a writer's own table holds its edits
	case st.EpochChanged:
		p.outbox.Renumber(st.Epoch) // moved past an epoch the writer holds: its edits must look new
	}
	p.d.SetFollower(!st.Writer)
	if st.Writer != was {
		if st.Writer {
			p.runCycle(ctx) // take over now, from the adopted state
		}
		p.publish()
	}
	p.status()
}

// cycle is one of Run's cycles in a pair: time-based transitions first
// (grace over, a silent writer's claim lapsed), then the director's cycle,
// then this director's view to its peers.
func (p *pair) cycle(ctx context.Context) {
	p.step(ctx)
	p.runCycle(ctx)
	p.publish()
}

// guarded follows a backlog check: the follower holds the guard's weights
// too.
func (p *pair) guarded(n int) {
	if n > 0 {
		p.publish()
	}
}

// roleChanged takes a new role from the role source. What the peers sent
// before the role changed comes first: a new writer takes over from the
// latest state it was sent.
func (p *pair) roleChanged(ctx context.Context, r Role) {
	p.log.Info("sync: role changed", "role", r)
	if msgs := p.inbox.Take(); len(msgs) > 0 {
		p.handle(ctx, msgs)
	}
	p.node.SetRole(r)
	p.step(ctx) // a new writer runs a cycle at once
}

// runCycle runs the director's cycle (a follower's decides and writes
// nothing) and moves the operator changes found here into the outbox.
func (p *pair) runCycle(ctx context.Context) {
	rep, err := p.d.Cycle(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		p.log.Error("cycle", "error", err)
	}
	edits := p.d.TakeEdits()
	if p.node.Writer() {
		p.node.ConfirmEdits() // the cycle read replayed edits back
	} else {
		p.queueEdits(edits)
	}
	p.status()
	if p.after != nil {
		p.after(rep, err)
	}
}

// queueEdits puts a follower's operator changes in the outbox for the
// writer.
func (p *pair) queueEdits(edits []replica.Edit) {
	for _, e := range edits {
		p.outbox.AddOp(e.Key, e.Weight, e.Op)
	}
}

// adoptFrom is a follower's side of replication, the pair's and the
// fleet's: it drops from outbox the edits the writer acknowledged for
// self (first: the snapshot already shows them), adopts snap around the
// edits still pending, and queues for the writer the local edits Adopt
// found.
func adoptFrom(d Director, outbox *Outbox, self string, acks []replica.Ack, snap replica.Snapshot) error {
	outbox.Ack(self, acks)
	local, err := d.Adopt(snap, outbox.Pending())
	for _, e := range local {
		outbox.Add(e.Key, e.Weight)
	}
	return err
}

// handle applies messages from the other directors. A follower that
// applied a writer's snapshot tells it so at once (Message.Adopted): an
// operator's drain on the writer waits for that.
func (p *pair) handle(ctx context.Context, msgs []Message) {
	now := p.now()
	adopted := false
	seen := make([]messageSeen, 0, len(msgs))
	for _, msg := range msgs {
		p.node.Observe(msg, now)
		seen = append(seen, messageSeen{sender: msg.Sender, writer: msg.Writer, adopted: msg.Adopted})
		if p.node.ShouldAdopt(msg, now) {
			if err := adoptFrom(p.d, p.outbox, p.cfg.ID, msg.Acks, msg.Snapshot); err != nil {
				p.log.Error("sync: applying the writer's state", "writer", msg.Sender, "error", err)
			} else {
				p.adopted = replica.Adoption{Writer: msg.Sender, Epoch: msg.Epoch, Gen: msg.Gen}
				adopted = true
			}
		}
		for _, e := range p.node.NewEdits(msg) {
			// Recorded first: at most once, even if this director stops
			// right after the write.
			if err := p.node.Applied(msg.Sender, e.Pos); err != nil {
				p.log.Error("sync: operator edit from another director not applied; retried with its next message", "from", msg.Sender, "error", err)
				break
			}
			if err := p.d.Replay(e); err != nil {
				p.log.Warn("sync: operator edit from another director not applied", "from", msg.Sender, "error", err)
			}
		}
	}
	p.resolve(seen)
	was := p.node.Writer()
	p.step(ctx)
	if adopted && !was && !p.node.Writer() {
		p.publish()
	}
}

// publish sends this director's view to its peers: a writer its snapshot
// and acknowledgements, a follower its pending operator edits.
func (p *pair) publish() {
	msg := Message{Epoch: p.node.Epoch(), Writer: p.node.Writer(), Heard: p.node.Heard()}
	if msg.Writer {
		p.gen++
		msg.Gen = p.gen
		msg.Snapshot = p.d.Snapshot()
		msg.Acks = p.node.Acks()
	} else {
		msg.Edits = p.outbox.Pending()
		msg.Adopted = p.adopted
	}
	p.push.Publish(msg)
}

// status records the group status for Status and metrics.
func (p *pair) status() {
	now := p.now()
	st := p.node.Status(now)
	s := monitor.SyncStatus{ID: p.cfg.ID, Role: st.Role.String(), Writer: st.Writer, Phase: string(st.Phase), Epoch: st.Epoch,
		Leader: st.Leader.String(), Frames: p.ln.Counters().Snapshot()}
	for _, ps := range p.push.Status() {
		s.Peers = append(s.Peers, monitor.SyncPeer{Address: ps.Addr, Unreachable: ps.Unreachable(now, 3*p.d.Interval()), LastOK: ps.LastOK, LastError: ps.LastError})
	}
	p.d.SetSyncStatus(s)
}

// peerSources returns the hosts of the peers' listener addresses that are
// literal IP addresses: a peer usually connects from the address it listens
// on, so the listener keeps unauthenticated slots for them from the start.
// A name, or a peer that connects from elsewhere, only leaves its slots
// unused until it has authenticated once.
func peerSources(peerAddrs []string) []netip.Addr {
	var out []netip.Addr
	for _, a := range peerAddrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			out = append(out, ip)
		}
	}
	return out
}
