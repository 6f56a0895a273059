// Package monitor is the Monitor Daemon of the LVS dynamic-feedback
// algorithm: every interval it reads the IPVS table, gathers each real
// server's inputs (agent report, response probe, connection counters),
// computes one aggregate load per server, turns it into a new weight and
// writes the weights whose change passes the threshold.
//
// The cycle is a pipeline of small stages: read table and reconcile
// ownership (cycle.go) → gather inputs (gather.go) → compute load, compute
// weight and decide (decide.go) → write (write.go). The math (load.go) and
// the ownership and availability rules (ownership.go) are pure functions
// with no I/O; the edges — the IPVS table, agents, probes, the
// state file and the clock — sit behind narrow interfaces so the same code
// runs against the kernel, the in-memory table and a simulator.
//
// The configuration is read by CheckConfig (config.go): each key and its
// type against the keys derived from Config's toml tags (configkeys.go),
// at the line the TOML syntax tree gives it (configindex.go), then the
// values; docs/configuration.md describes the rules.
//
// The package owns weight decisions and the persisted knowledge of who set
// which weight. It must not talk to netlink directly (package ipvs does),
// sample /proc (package agent does), or hold global state.
package monitor
