// Package sim is the cluster simulator behind lvs-sim: a deterministic,
// seeded, discrete-event simulation of an LVS director and its real
// servers, which measures how well a weight policy balances them.
//
// # What it owns
//
//   - The model: the director's IPVS table and its kernel schedulers
//     (rr, wrr, lc, wlc, sed, with the kernel's tie-breaks), real servers
//     as exact processor-sharing queues whose capacity changes under
//     scenario events, the request streams, the agents' samples and the
//     response probes (scenario.go, workload.go, sched.go, server.go,
//     run.go).
//   - The real monitor in the loop: the monitor policies run
//     monitor.Monitor itself — its Cycle and Guard on the simulated clock,
//     against a simulated ipvs.Table, agent client, prober and store
//     (monitor.go).
//   - The yardsticks the monitor is compared with: static weights, the
//     ideal-weights counterfactual, the PS-greedy oracle and the pooled
//     server (policy.go); and a recorded weight schedule replayed as
//     written (replay.go).
//   - The scoring: response-time percentiles (failed requests counted)
//     against the ideal weights (the smallest exact integer weights,
//     ideal.go), utilisation, hot windows, overload seconds, weight writes, oscillation,
//     recovery time of the sliding p99 against the ideal run after each
//     capacity event (recovery.go), reach and settle times, and the
//     tables, CSV and plots that report them (metrics.go, bench.go,
//     table.go, plot.go).
//
// Every policy of a seed replays the same requests, and a run is a pure
// function of its scenario, seed, scheduler and policy, whatever the
// parallelism of a bench.
//
// # What it must not do
//
//   - No real I/O: no sockets, no real IPVS, agents or probes; the only
//     files are the scenarios it is given and the output asked for.
//   - No wall clock: time is the simulated clock (Deps.Now of the monitor
//     included); randomness comes from the seed only.
//   - No second copy of the monitor's decisions: the simulator observes
//     and applies what monitor.Monitor decides and never re-implements its
//     weight rules; an idea for the controller is tried as a monitor
//     configuration (NAME=FILE, sim/variants) or in monitor/ itself.
//
// docs/developer/simulator.md describes the model and the scenario format;
// docs/results/notebook.md holds the measurements.
package sim
