// Package policy decides weights. It owns every rule that turns what the
// monitor observed in one cycle into a weight, and records why:
//
//   - load.go: the normalised inputs and the aggregate load;
//   - formula.go: the LVS dynamic-feedback formula, w ← w + A·∛(0.95 − load);
//   - capacity.go: the capacity controller (capacity ÷ the service median,
//     anchored to the configured weight);
//   - controller.go: the one interface both controllers implement, chosen
//     once when the configuration is loaded;
//   - ownership.go: who owns a weight — the drain rule, undrain, another
//     tool's weight, down and restore;
//   - availability.go: fail-static freeze and slow start;
//   - guard.go: the backlog guard's arithmetic, holds and releases;
//   - decide.go: one service's decisions for one cycle, as records
//     (Decision) that logs, metrics, status and explain read;
//   - keys.go: the configuration keys policy owns — each declared
//     (Param: default, check, reference text) beside the code that reads
//     it ([weight]'s shared keys in controller.go, the formula's in
//     formula.go, the capacity controller's in capacity.go, the guard's in
//     guard.go, the coefficients in busy.go) — and their composition
//     into tables, defaults, checks and lvsctl status's Settings.
//
// The package must not do I/O: no kernel, network, files, logging, metrics
// or clock reads. Time comes in as a value. Package monitor observes, calls
// it, and applies its decisions.
package policy
