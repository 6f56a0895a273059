// Package scheduler is the directors' synchronisation (the name comes from
// the product's layout, after the "dual synchronised schedulers" of its
// design). It makes a pair (or group) of LVS directors behave as one
// weight controller: the active director replicates its desired state —
// per service and real server the weight, default weight, ownership and the
// controller's smoothing state — to its peers, which apply it to their own
// IPVS tables, so that a failover neither resets weights to their defaults
// nor forgets a drain.
//
// The package holds the building blocks; lvs-monitor wires them together:
//
//   - message.go: the replicated state (Snapshot, DestState), the message
//     and its frame format;
//   - auth.go: the shared key (LoadKey), HMAC-SHA256 sealing, the
//     receiver's challenges and the Verifier (size bound, header MAC,
//     version, sender, challenge and its age, order, frame MAC, payload),
//     with a distinct error and counter per rejection reason;
//   - peer.go: the TCP transport — a Pusher that never blocks its caller,
//     a Listener that challenges every frame, authenticates its header
//     before reading the rest, bounds what unauthenticated connections
//     cost, and delivers verified messages, and an Inbox that keeps the
//     latest message of each peer for the monitor's loop;
//   - role.go: where the active/standby role comes from (fixed in the
//     configuration, or following a virtual IP through netlink);
//   - decide.go: the pure decision logic — who writes (Node, the
//     split-brain rule), what a follower writes to its table (Plan), and
//     the forwarding of operator edits made on a follower (Outbox);
//   - epoch.go: the persisted epoch counter and the writer's record of
//     the followers' edits it applied.
//
// The package does not import the monitor, and it decides no weight: the
// monitor converts its ownership records to and from DestState, and the
// controller's state travels as policy.Carried, as policy defines it.
// docs/director-pair.md describes the protocol, the security model and the
// keepalived set-up.
package scheduler
