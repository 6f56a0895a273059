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
// requests (operator.go, confirm.go), metrics (metrics.go) and the cycle
// history (history.go) read the decision records; they do not decide.
// The edges — the IPVS table, agents, probes, the state file and the
// clock — sit behind the narrow interfaces of Deps (monitor.go), so the
// same code runs against the kernel, the in-memory table and a simulator.
//
// A director that is one of a synchronised group runs the same cycle:
// pair.go and replicate.go carry the pair's snapshots and edits,
// fleet.go the etcd fleet's documents (packages scheduler and fleet hold
// the transports).
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
