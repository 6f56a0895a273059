// Package tune owns fitting the coefficients of the aggregate load
// (policy.Coefficients, the [coefficients] of lvs-monitor) from evidence,
// by two methods:
//
//   - Regress: stepwise selection by partial F-tests (seed 003's method)
//     among the inputs the configured controller reads (ControllerReads),
//     then least squares under non-negativity with the coefficients
//     summing to 1, of an outcome the inputs do not contain (the next
//     cycle's active connections per unit of weight, relative to the
//     service) on the inputs of the cycle before, from the recorder's
//     history records; the last part of the time is held out and the
//     fit's errors there are compared, pair by pair, with the running
//     coefficients' and a constant's (regress.go, stepwise.go, nnls.go).
//     Proposal and Verdict turn a fit into a block or a verdict to keep
//     the running coefficients. RegressSource and Sampler do it on
//     records streamed from the files, keeping sums, not samples
//     (sampler.go).
//   - Search: a genetic search over coefficient vectors, each scored by
//     the simulator running the real monitor on a scenario, against the
//     ideal-weights counterfactual, on training seeds, reported on
//     held-out seeds (search.go). The fitness weighs two named parts,
//     balance and stability, by x1 + x2 = 1 (FitnessWeights); SearchVerdict
//     says whether the best beats the start beyond the uncertainty.
//   - ScenarioFromHistory: the scenario such a search can run on, built
//     from a service's recorded history — servers, load and capacity
//     changes as measured, and what it approximated (histscenario.go);
//     ScenarioFromHistorySource on streamed records, keeping a few
//     numbers per server and cycle.
//   - Benefit: the same scenario, from a window of the history, run
//     twice on the same requests — each server's default weight, and the
//     weights the monitor wrote, replayed at their cycles — for what the
//     monitor bought: p99 and overload seconds of both (benefit.go;
//     docs/history.md).
//
// It also writes a [coefficients] block into a configuration's text
// (coefficients.go). It does no I/O: cmd/lvs-tune reads the history and
// the files, and checks the result with monitor.CheckConfig.
// docs/tuning.md describes both methods and their limits.
package tune
