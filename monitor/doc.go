// Package monitor is the Monitor Daemon of the LVS dynamic-feedback
// algorithm: every interval it reads the IPVS table, gathers each real
// server's inputs (agent report, response probe, connection counters),
// has package policy turn them into one decision per server, and writes
// the weights whose change passes the controller's rule.
//
// The cycle is a pipeline of small stages (cycle.go): read the table and
// reconcile ownership → gather inputs (gather.go, agents.go, probe.go,
// intervalcpu.go) → decide (package policy: load, weight and ownership
// rules are pure functions there) → apply (apply.go, the one place that
// writes a weight) → persist who owns which weight (state.go). Between
// cycles the backlog guard reads the table alone (guard.go). Operator
// requests (operator.go), metrics (metrics.go) and the cycle
// history (history.go) read the decision records; they do not decide.
// The edges — the IPVS table, agents, probes, the state file and the
// clock — sit behind the narrow interfaces of Deps (monitor.go), so the
// same code runs against the kernel, the in-memory table and a simulator.
//
// The monitor is one director and knows nothing of its peers. A director
// group (package scheduler: alone, a pair, an etcd fleet) runs it through
// a narrow set of methods, each documented where it is defined:
//
//   - Cycle and Guard run one cycle and one backlog check; Interval,
//     GuardCheck and Reloaded tell the loop when (monitor.go, cycle.go,
//     guard.go);
//   - Snapshot takes what a writer replicates, Adopt applies a writer's
//     snapshot on a follower, TakeEdits hands over the operator changes
//     made on a follower, Replay carries one out on the writer, and
//     SetFollower switches decide and write off or on (replicate.go; the
//     replicated types are package replica's);
//   - ShareFigures, OwnFigures, SetOthers, TakeRefused and CheckWeights
//     are the cycle's input and output in a group that shares one table's
//     traffic: this director's own connection figures, the other
//     directors' (checked against a plausibility bound before they are
//     added) and the weight range a follower accepts (figures.go);
//   - SetSyncStatus records the group's status for Status and the
//     metrics (syncstatus.go); SetConfirm installs the wait an operator's
//     drain in a pair answers with (confirm.go).
//
// Peers, transports, elections and who writes are the group's.
//
// The configuration is read by CheckConfig (config.go): each key and its
// type against the keys derived from Config's toml tags (configkeys.go),
// at the line the TOML syntax tree gives it (configindex.go), then the
// values; docs/configuration.md describes the rules. The keys of
// [coefficients], [weight] and [backlog_guard] are declared in package
// policy beside the code that reads them (policy.Param: default, check,
// the weight controller that reads it, reference text); DefaultConfig
// takes their defaults, check runs their checks and the ignored-key
// warnings come from them. The rest (top-level keys, [availability],
// [sync], [history], [[service]]) are declared here.
//
// The package owns weight decisions' application and the persisted
// knowledge of who set which weight. It must not talk to netlink
// directly (package ipvs does), sample /proc (package agent does), or hold
// global state.
package monitor
