// Package scheduler is the director group (the name comes from the
// product's layout, after the "dual synchronised schedulers" of its
// design): it runs one director's cycle (package monitor) alone, as one
// of a pair (or group) of synchronised directors, or as one of an etcd
// fleet, and makes the group behave as one weight controller — the writer
// replicates its desired state (per service and real server the weight,
// default weight, ownership and the controller's smoothing state) to its
// peers, which apply it to their own IPVS tables, so that a failover
// neither resets weights to their defaults nor forgets a drain.
//
//   - group.go: Run, the one run loop for a director alone, in a pair and
//     in a fleet (cycles, backlog checks, reloads, and in a pair role
//     changes, messages and operator waits), and Director, the interface
//     through which it drives the monitor (*monitor.Monitor meets it);
//   - pair.go, pairconfirm.go: a pair director — the writer/follower
//     state machine acted on, snapshots published and adopted, operator
//     edits forwarded and replayed, and the wait an operator's drain
//     answers with; docs/director-pair.md ("Wiring into lvs-monitor");
//   - fleetdirector.go: an etcd fleet director — the leader's fenced
//     read, sums, takeover and document, a follower's publication and its
//     check of the document; docs/fleet.md; package scheduler/fleet is
//     the etcd edge;
//   - message.go: the pair's message and its frame format (the replicated
//     values themselves are package replica's);
//   - auth.go: the shared key (LoadKey), HMAC-SHA256 sealing, the
//     receiver's challenges and the Verifier (size bound, header MAC,
//     version, sender, challenge and its age, order, frame MAC, payload),
//     with a distinct error and counter per rejection reason;
//   - peer.go: the TCP transport — a Pusher that never blocks its caller,
//     a Listener that challenges every frame, authenticates its header
//     before reading the rest, bounds what unauthenticated connections
//     cost, and delivers verified messages, and an Inbox that keeps the
//     latest message of each peer for the run loop;
//   - role.go: where the active/standby role comes from (fixed in the
//     configuration, or following a virtual IP through netlink);
//   - decide.go: the pure decision logic — who writes (Node, the
//     split-brain rule) and the forwarding of operator edits made on a
//     follower (Outbox);
//   - epoch.go: the persisted epoch counter and the writer's record of
//     the followers' edits it applied.
//
// The package decides no weight: the monitor converts its ownership
// records to and from replica.DestState, and the controller's state
// travels as policy.Carried, as policy defines it. docs/director-pair.md
// describes the protocol, the security model and the keepalived set-up.
package scheduler
