package monitor

import (
	"context"
	"fmt"
	"strings"
)

// Replication says which directors of a synchronised pair hold an
// operator's drain or undrain when lvs-monitor answers the operator
// (DrainConfirmed, UndrainConfirmed).
type Replication struct {
	Verb      string   // "drained" or "undrained"
	Peers     []string // the other directors' ids; none for a director alone
	Confirmed []string // the peers that hold it
	// Missing says, per peer that does not hold it (yet), why: "peer
	// unreachable (dir-b, …)", "… did not confirm within 2.4s".
	Missing []string
}

// Everywhere reports whether every director holds the request.
func (r Replication) Everywhere() bool { return len(r.Missing) == 0 }

// String is the operator's reply: "drained on both directors", "drained
// here only: peer unreachable (…)".
func (r Replication) String() string {
	switch {
	case len(r.Peers) == 0:
		return r.Verb
	case len(r.Missing) == 0 && len(r.Peers) == 1:
		return r.Verb + " on both directors"
	case len(r.Missing) == 0:
		return fmt.Sprintf("%s on all %d directors", r.Verb, len(r.Peers)+1)
	case len(r.Confirmed) == 0:
		return r.Verb + " here only: " + strings.Join(r.Missing, "; ")
	}
	return fmt.Sprintf("%s here and on %s; not on the others: %s", r.Verb, strings.Join(r.Confirmed, ", "), strings.Join(r.Missing, "; "))
}

// ConfirmFunc waits until the peers of a director pair hold an
// operator's request on key (verb "drained" or "undrained") or cannot,
// and says which. The director group's driver supplies it (SetConfirm).
type ConfirmFunc func(ctx context.Context, key DestKey, verb string) Replication

// SetConfirm installs the wait DrainConfirmed and UndrainConfirmed use
// while this director runs as one of a pair; nil removes it (the pair
// stopped).
func (m *Monitor) SetConfirm(f ConfirmFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.confirmer = f
}

// confirm waits, through the pair's ConfirmFunc, until every peer holds
// the request on key, or cannot. A director alone, or one of an etcd
// fleet (its leader takes edits at its cycle), returns at once; one whose
// pair is not running (starting or stopping) says that no peer was told.
func (m *Monitor) confirm(ctx context.Context, key DestKey, verb string) Replication {
	r := Replication{Verb: verb}
	m.mu.Lock()
	f, sc := m.confirmer, m.cfg.Sync
	m.mu.Unlock()
	if !sc.Enabled() || sc.Fleet() {
		return r
	}
	if f == nil {
		for _, peer := range sc.Peers {
			r.Peers = append(r.Peers, peer.ID)
			r.Missing = append(r.Missing, peer.ID+" not told: the director pair is not running here (lvs-monitor starting or stopping)")
		}
		return r
	}
	return f(ctx, key, verb)
}
