package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// WriteTable prints the summary as Markdown tables, one per scenario, with
// padded columns so that it also reads in a terminal.
func WriteTable(w io.Writer, rows []Row, scenarios []*Scenario) error {
	byName := map[string]*Scenario{}
	for _, sc := range scenarios {
		byName[sc.Name] = sc
	}
	header := []string{"sched", "policy", "mean ms", "p50 ms", "p95 ms", "p99 ms ±sd", "fail %", "p99/ideal ±sd",
		"util max", "util spread", "hot %", "writes/srv/min", "steady writes", "osc %", "flips/min", "recovery s", "reach s", "settle s"}
	var cur string
	var tab [][]string
	flush := func() error {
		if cur == "" {
			return nil
		}
		sc := byName[cur]
		if _, err := fmt.Fprintf(w, "\n### %s\n\n", cur); err != nil {
			return err
		}
		if sc != nil {
			if sc.Description != "" {
				fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(sc.Description))
			}
			if len(sc.Events) > 0 {
				var ev []string
				for i := range sc.Events {
					ev = append(ev, fmt.Sprintf("%d: %s", i+1, sc.EventLabel(i)))
				}
				fmt.Fprintf(w, "Events (recovery, reach and settle columns, in order): %s.\n\n", strings.Join(ev, "; "))
			}
		}
		return writeAligned(w, header, tab)
	}
	for _, r := range rows {
		if r.Scenario != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, tab = r.Scenario, nil
		}
		pol := r.Policy
		if r.Reference {
			pol += " (ref)"
		}
		tab = append(tab, []string{
			r.Scheduler, pol,
			ms(r.Mean.Mean), ms(r.P50.Mean), ms(r.P95.Mean),
			ms(r.P99.Mean) + " ±" + ms(r.P99.SD), fix(100*r.Failed.Mean, 2),
			fix(r.Ratio.Mean, 2) + " ±" + fix(r.Ratio.SD, 2),
			pct(r.UtilMax.Mean), pct(r.UtilSpread.Mean), pct(r.Hot.Mean),
			fix(r.Writes.Mean, 2), fix(r.SteadyWrites.Mean, 2),
			fix(100*r.Osc.Mean, 1), fix(r.Flips.Mean, 2),
			settleText(r.Recovery), settleText(r.Reach), settleText(r.Settle),
		})
	}
	return flush()
}

func writeAligned(w io.Writer, header []string, rows [][]string) error {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			b.WriteString(" ")
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", width[i]-len([]rune(c))))
			b.WriteString(" |")
		}
		return b.String()
	}
	if _, err := fmt.Fprintln(w, line(header)); err != nil {
		return err
	}
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	fmt.Fprintln(w, line(sep))
	for _, r := range rows {
		if _, err := fmt.Fprintln(w, line(r)); err != nil {
			return err
		}
	}
	return nil
}

func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "∞"
	}
	x := v * 1000
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func fix(v float64, d int) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "∞"
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(100*v, 'f', 0, 64)
}

func settleText(s []float64) string {
	var parts []string
	for _, v := range s {
		switch {
		case math.IsNaN(v):
			parts = append(parts, "-")
		case math.IsInf(v, 1):
			parts = append(parts, "∞")
		default:
			parts = append(parts, strconv.FormatFloat(v, 'f', 0, 64))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// WriteCSV writes every run's result, one line per run.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"scenario", "scheduler", "policy", "seed", "requests", "failed", "mean_s", "p50_s", "p95_s", "p99_s",
		"util_max", "util_spread", "hot", "writes_per_srv_min", "steady_writes_per_srv_min", "osc", "flips_per_srv_min", "util", "reach_s", "settle_s",
		"fail_share", "recovery_s", "drift_loss"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range results {
		var util, reach, settle, recovery, drift []string
		for _, u := range r.Util {
			util = append(util, f(u))
		}
		for i, s := range r.Settle {
			settle = append(settle, f(s))
			reach = append(reach, f(r.Reach[i]))
		}
		for _, v := range r.Recovery {
			recovery = append(recovery, f(v))
		}
		for _, v := range r.DriftLoss {
			drift = append(drift, f(v))
		}
		failShare := 0.0
		if r.Requests > 0 {
			failShare = float64(r.Failed) / float64(r.Requests)
		}
		_ = cw.Write([]string{r.Scenario, r.Scheduler, r.Policy, strconv.FormatUint(r.Seed, 10),
			strconv.Itoa(r.Requests), strconv.Itoa(r.Failed), f(r.Mean), f(r.P50), f(r.P95), f(r.P99),
			f(r.UtilMax), f(r.UtilSpread), f(r.Hot), f(r.Writes), f(r.SteadyWrites), f(r.Osc), f(r.Flips),
			strings.Join(util, ";"), strings.Join(reach, ";"), strings.Join(settle, ";"),
			f(failShare), strings.Join(recovery, ";"), strings.Join(drift, ";")})
	}
	cw.Flush()
	return cw.Error()
}

// WritePivot prints, per scheduler, one line per policy and one column per
// scenario with the p99 ratio to the ideal-weights counterfactual, then the
// worst ratio and the worst failure share over the scenarios, the policy's
// weight writes per server per minute (whole run, and steady state only)
// and oscillation averaged over the scenarios, its worst and median
// recovery time (over every seed and capacity event), and its worst reach
// and settle times.
func WritePivot(w io.Writer, rows []Row, scenarios []*Scenario, policies []PolicySpec) error {
	var scheds []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Scheduler] {
			seen[r.Scheduler] = true
			scheds = append(scheds, r.Scheduler)
		}
	}
	type key struct{ sc, sched, pol string }
	by := map[key]Row{}
	for _, r := range rows {
		by[key{r.Scenario, r.Scheduler, r.Policy}] = r
	}
	for _, sched := range scheds {
		fmt.Fprintf(w, "\n#### %s: p99 / ideal per scenario\n\n", sched)
		header := []string{"policy"}
		for _, sc := range scenarios {
			header = append(header, sc.Name)
		}
		header = append(header, "worst", "worst fail %", "writes/srv/min", "steady writes", "osc %",
			"worst recovery s", "median recovery s", "worst reach s", "worst settle s")
		var tab [][]string
		for _, p := range policies {
			line := []string{p.Name}
			worst, wr, osc, reach, settle := math.Inf(-1), 0.0, 0.0, math.NaN(), math.NaN()
			fail, all, recovery := math.NaN(), 0.0, math.NaN()
			var recs []float64
			n := 0
			for _, sc := range scenarios {
				r, ok := by[key{sc.Name, sched, p.Name}]
				if !ok {
					line = append(line, "-")
					continue
				}
				line = append(line, fix(r.Ratio.Mean, 2))
				worst = math.Max(worst, r.Ratio.Mean)
				fail = worstOf([]float64{fail, r.Failed.Mean})
				recovery = worstOf(append([]float64{recovery}, r.Recovery...))
				recs = append(recs, r.Recoveries...)
				if !math.IsNaN(r.SteadyWrites.Mean) {
					all += r.Writes.Mean
					wr += r.SteadyWrites.Mean
					osc += r.Osc.Mean
					n++
				}
				reach = worstOf(append([]float64{reach}, r.Reach...))
				settle = worstOf(append([]float64{settle}, r.Settle...))
			}
			if n > 0 {
				all /= float64(n)
				wr /= float64(n)
				osc /= float64(n)
			} else {
				all, wr, osc = math.NaN(), math.NaN(), math.NaN()
			}
			line = append(line, fix(worst, 2), fix(100*fail, 2), fix(all, 2), fix(wr, 2), fix(100*osc, 1),
				settleText([]float64{recovery}), settleText([]float64{median(recs)}),
				settleText([]float64{reach}), settleText([]float64{settle}))
			tab = append(tab, line)
		}
		if err := writeAligned(w, header, tab); err != nil {
			return err
		}
	}
	return nil
}

// median of vs (+Inf counts as the largest), NaN when vs is empty.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// worstOf is the largest of vs that is not NaN, NaN when there is none.
func worstOf(vs []float64) float64 {
	worst := math.NaN()
	for _, v := range vs {
		if !math.IsNaN(v) && (math.IsNaN(worst) || v > worst) {
			worst = v
		}
	}
	return worst
}
