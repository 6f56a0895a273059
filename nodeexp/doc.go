// Package nodeexp reads a real server's load from Prometheus node_exporter
// instead of lvs-agent, for fleets that already run node_exporter on every
// server and want no second agent there (docs/node-exporter.md).
//
// It owns three steps, kept apart so that the arithmetic is testable
// without a network:
//
//   - [Parse] reads one exposition (the text format, with the Prometheus
//     project's own parser, expfmt) into a [Snapshot]: the counters and
//     gauges the loads come from, checked — bounded in size, each series
//     typed as node_exporter types it, finite, not negative, not
//     duplicated, every needed family present.
//   - [Derive] turns two snapshots of one server into an [agent.Report]
//     with the same four loads lvs-agent reports: CPU busy and disk I/O
//     from counter deltas, memory, disk space and runnable tasks from the
//     latest scrape. It is a pure function. Without a usable earlier
//     snapshot (the first scrape, a reboot, an old one) it returns an error
//     wrapping [ErrNoBaseline]: not yet measured, never a made-up 0.
//   - [Client] scrapes over HTTP, bounded in time by the caller's timeout
//     and in size by [MaxExpositionBytes], and [Client.Poll] keeps the
//     caller's baseline up to date.
//
// Like the agent, this package only measures; the monitor decides.
package nodeexp
