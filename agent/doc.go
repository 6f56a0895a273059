// Package agent is the part of lvs-feedback that runs on every real server.
//
// It owns three things:
//
//   - Sampling: a [Sampler] reads the load of one [Source] (the whole host,
//     one cgroup v2 group, or one process tree) in a background goroutine and
//     keeps the latest [Report], so that an HTTP request never waits on /proc.
//     Every load is normalised (0 = idle, 1 = fully loaded, > 1 overloaded),
//     finite, ≥ 0 and at most [MaxLoad]. A failed sample is kept and
//     reported as an error; it is never replaced by zeros or by a stale
//     number.
//   - Serving: [NewHandler] and [NewServer] expose GET /v1/load (the latest
//     Report as JSON) and GET /healthz on a hardened net/http server;
//     [LimitConns] bounds its connections.
//   - Decoding: [DecodeReport] and [Fetch] are the monitor's side of the
//     wire contract. They refuse anything that is not a well-formed, bounded,
//     current-schema Report with plausible values.
//
// The agent only measures. It must not decide weights, aggregate loads
// across servers or talk to IPVS: that is the monitor's job on the director.
// Keeping the agent dumb means one writer per weight and an agent that can be
// upgraded or restarted without touching traffic.
package agent
