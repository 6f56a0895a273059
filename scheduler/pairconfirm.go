package scheduler

import (
	"context"
	"fmt"
	"time"

	"lvs-feedback/monitor"
	"lvs-feedback/replica"
)

// confirmWait is one operator request waiting for the peers: the pair's
// loop owns pending and sends each peer's outcome on results.
type confirmWait struct {
	key      monitor.DestKey
	deadline time.Time
	gen      uint64 // a writer's: the first snapshot that carries the request
	pending  map[string]bool
	results  chan peerResult // buffered for every peer: the loop never blocks
}

// peerResult is one peer's outcome: why it does not hold the request, or
// "" when it does.
type peerResult struct {
	peer, missing string
}

// confirm waits until every peer of the pair holds the request on key, or
// cannot: unreachable, silent past the timeout, or this director stopping
// (the pair's monitor.ConfirmFunc, Director.SetConfirm).
func (p *pair) confirm(ctx context.Context, key monitor.DestKey, verb string) monitor.Replication {
	r := monitor.Replication{Verb: verb}
	ids := make([]string, len(p.cfg.Peers))
	for i, peer := range p.cfg.Peers {
		ids[i] = peer.ID
	}
	r.Peers = ids
	timeout := p.confirmTimeout()
	since := time.Now()
	w := &confirmWait{key: key, deadline: since.Add(timeout), results: make(chan peerResult, 2*len(ids))}
	outcome := map[string]string{}
	finish := func(why string) monitor.Replication {
		for _, id := range ids {
			o, ok := outcome[id]
			switch {
			case !ok:
				r.Missing = append(r.Missing, fmt.Sprintf("%s %s", id, why))
			case o == "":
				r.Confirmed = append(r.Confirmed, id)
			default:
				r.Missing = append(r.Missing, o)
			}
		}
		return r
	}
	select {
	case p.requests <- w:
	case <-p.stopped:
		return finish("not told: lvs-monitor is stopping")
	case <-ctx.Done():
		return finish("not told: " + ctx.Err().Error())
	}
	expire := time.NewTimer(timeout)
	defer expire.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for len(outcome) < len(ids) {
		select {
		case res := <-w.results:
			if _, done := outcome[res.peer]; !done {
				outcome[res.peer] = res.missing
			}
		case <-tick.C:
			// A push tried since the request and failed: the peer is
			// unreachable now, however long it has been.
			for i, st := range p.push.Status() {
				if _, done := outcome[ids[i]]; !done && st.LastAttempt.After(since) && st.LastError != "" {
					outcome[ids[i]] = fmt.Sprintf("peer unreachable (%s, %s: %s)", ids[i], st.Addr, st.LastError)
				}
			}
		case <-expire.C:
			return finish(fmt.Sprintf("did not confirm within %v", timeout))
		case <-p.stopped:
			return finish("not confirmed: lvs-monitor stopped first")
		case <-ctx.Done():
			return finish("not confirmed: " + ctx.Err().Error())
		}
	}
	return finish("")
}

// confirmTimeout bounds the wait for the peers: a follower's request needs
// the writer's next cycle to be acknowledged.
func (p *pair) confirmTimeout() time.Duration {
	return 2*p.d.Interval() + 2*time.Second
}

// request starts a confirmation wait in the pair's loop: a writer
// publishes its snapshot now and waits for each peer to report it adopted
// it; a follower queues its edit and publishes now, and waits for the
// writer's acknowledgement.
func (p *pair) request(w *confirmWait) {
	w.pending = map[string]bool{}
	if p.node.Writer() {
		p.publish()
		w.gen = p.gen
		for _, peer := range p.cfg.Peers {
			w.pending[peer.ID] = true
		}
		p.waits = append(p.waits, w)
		return
	}
	p.queueEdits(p.d.TakeEdits())
	leader := p.node.Status(p.now()).Leader.Sender
	for _, peer := range p.cfg.Peers {
		switch {
		case leader == "" || peer.ID == leader:
			w.pending[peer.ID] = true
		default:
			w.results <- peerResult{peer.ID, fmt.Sprintf("%s follows %s too: it gets the change with the writer's next message", peer.ID, leader)}
		}
	}
	if !p.outbox.Holds(replica.DestKey(w.key)) && leader != "" {
		w.results <- peerResult{leader, ""} // acknowledged already
		return
	}
	p.publish()
	p.waits = append(p.waits, w)
}

// resolve settles the waits that msg, just handled, answers: a follower
// that adopted a writer's snapshot at or after the request's; a writer
// whose acknowledgements cover the follower's edit.
func (p *pair) resolve(msg []messageSeen) {
	if len(p.waits) == 0 {
		return
	}
	now := time.Now()
	keep := p.waits[:0]
	for _, w := range p.waits {
		for _, s := range msg {
			if !w.pending[s.sender] {
				continue
			}
			switch {
			case w.gen > 0 && s.adopted.Writer == p.cfg.ID && s.adopted.Epoch == p.node.Epoch() && s.adopted.Gen >= w.gen:
				w.results <- peerResult{s.sender, ""}
				delete(w.pending, s.sender)
			case w.gen == 0 && s.writer && !p.outbox.Holds(replica.DestKey(w.key)):
				w.results <- peerResult{s.sender, ""}
				delete(w.pending, s.sender)
			}
		}
		if len(w.pending) > 0 && now.Before(w.deadline) {
			keep = append(keep, w)
		}
	}
	clear(p.waits[len(keep):])
	p.waits = keep
}

// messageSeen is what resolve needs of a message the pair handled.
type messageSeen struct {
	sender  string
	writer  bool
	adopted replica.Adoption
}
