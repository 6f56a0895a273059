package monitor

import "time"

// This file is how a director group's driver (package scheduler) reports
// this director's place in the group, for Status, lvsctl status and the
// metrics. The monitor only stores and shows it.

// SyncStatus is this director's place in its synchronised group, for
// status displays and metrics.
type SyncStatus struct {
	ID     string
	Role   string // "active" or "standby", as the role source says
	Writer bool   // this director writes weights
	Phase  string
	Epoch  uint64
	Leader string // the writer this director follows or is, "id@epoch"
	Peers  []SyncPeer
	// Fleet is the etcd side of a fleet director (backend "etcd"); nil in
	// a pair.
	Fleet *FleetStatus
	// Frames counts the sync frames this director received, by result:
	// "accepted" or a rejection reason.
	Frames map[string]uint64
}

// SyncPeer is another director as this one sees it.
type SyncPeer struct {
	Address     string
	Unreachable bool
	LastOK      time.Time
	LastError   string
}

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
	// Refused is why the last document read was refused ("" when applied
	// or none); DocumentsRefused counts the refusals.
	Refused          string
	DocumentsRefused uint64
	// CountersRefused counts the other directors' counters the leader
	// left out: per director and cycle an untrusted record (unlisted, or
	// not bound to a live lease), per destination an implausible figure.
	CountersRefused uint64
}

// SetSyncStatus records this director's place in its group for Status
// and the metrics: the fleet series when s.Fleet is set, the director
// pair's otherwise. A director alone never calls it: Status().Sync stays
// nil.
func (m *Monitor) SetSyncStatus(s SyncStatus) {
	m.mu.Lock()
	m.sync = &s
	prev := m.lastFrames
	m.lastFrames = s.Frames
	m.mu.Unlock()
	if s.Fleet != nil {
		m.deps.Metrics.observeFleet(*s.Fleet)
		return
	}
	m.deps.Metrics.observeSync(s, prev)
}
