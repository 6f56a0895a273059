#!/usr/bin/env bash
# vmtest/bench-table.sh CONSOLE_LOG — the table at the end of
# `make bench-kernel`: for each benchmark of vmtest/bench.list, the median
# (and range) over its runs of ms/op and, for the monitor's cycle, of the
# bare netlink work, their ratio against its target (steady 1.5: one dump of
# the table; all-writing 1.2: one dump and every weight set), the cycle's CPU
# time and the bare work's.
set -euo pipefail
log=${1:?usage: bench-table.sh CONSOLE_LOG}
awk '
function median(list,   v, n, i, j, t) {
	n = split(list, v, " ")
	for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
	lo = v[1]; hi = v[n]
	return n % 2 ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
}
function cell(name, unit, scale, fmt,   m) {
	if (!((name, unit) in vals)) return "-"
	m = median(vals[name, unit])
	return sprintf(fmt " (" fmt ".." fmt ")", m * scale, lo * scale, hi * scale)
}
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in runs)) order[++n] = name
	runs[name]++
	for (i = 3; i < NF; i += 2) vals[name, $(i+1)] = vals[name, $(i+1)] " " $i
}
END {
	if (n == 0) { print "bench-table: no benchmark results in the console log" > "/dev/stderr"; exit 1 }
	printf "%-48s %4s  %-22s %-22s %-18s %-14s %-22s %s\n", "benchmark (median, range over runs)", "runs", "ms/op", "bare ms/op", "cycle/bare", "target", "cycle CPU ms/op", "bare CPU ms/op"
	for (k = 1; k <= n; k++) {
		nm = order[k]
		target = "-"
		if ((nm, "cycle/bare") in vals) {
			t = nm ~ /all-writing/ ? 1.2 : 1.5
			target = sprintf("<= %.1f %s", t, median(vals[nm, "cycle/bare"]) <= t ? "met" : "MISSED")
		}
		printf "%-48s %4d  %-22s %-22s %-18s %-14s %-22s %s\n", nm, runs[nm], cell(nm, "ns/op", 1e-6, "%.1f"), cell(nm, "bare-ms/op", 1, "%.1f"), cell(nm, "cycle/bare", 1, "%.2f"), target, cell(nm, "cpu-ms/op", 1, "%.1f"), cell(nm, "bare-cpu-ms/op", 1, "%.1f")
	}
}' "$log"
