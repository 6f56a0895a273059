// Package fleet is the etcd edge of a fleet of active directors (several
// directors behind ECMP, each with its own IPVS table, sharing one
// controller). It owns the etcd side only:
//
//   - the connection (endpoints, TLS client certificates, user and
//     password) and this director's lease (a concurrency.Session);
//   - the election of the leader (concurrency.Election), whose key's
//     creation revision is the leader's term and fences every write it
//     makes;
//   - the key layout under the prefix and the wire format of what is
//     stored there: each director's per-destination counters and pending
//     operator edits (Counters, under its lease), and the leader's desired
//     state (Document, one key, written only while the election key is
//     the leader's and the document's revision is the one it read);
//   - which counters the leader reads: only those of the directors the
//     configuration lists (Config.Members), each bound to a live lease;
//     and what a follower needs to check a document against the current
//     election (View.LeaderTerm);
//   - the counts of failed etcd operations and whether etcd answered.
//
// It must not decide weights, touch an IPVS table or read the monitor's
// records: the fleet director (scheduler/fleetdirector.go) has the
// monitor run the controller on the sums of the directors' counters and
// apply the Document through its single write path. The replicated state
// is replica.Snapshot, the edits replica.Edit and the acknowledgements
// replica.Ack, the same values the director pair carries; the package
// imports nothing of the group above it. docs/fleet.md describes the key
// layout and the failure semantics.
package fleet
