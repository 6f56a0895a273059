package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// FamilySummary is one policy under one scheduler over a set of
// scenarios (a generated family): its p99/ideal per scenario (mean over
// the scenario's seeds) and its recovery times, summarised.
type FamilySummary struct {
	Scheduler, Policy string
	Scenarios         int
	// GeoMean is the geometric mean of the finite p99/ideal values;
	// Infinite counts the scenarios where it is ∞ (over 1 % of the
	// requests failed in some seed, so p99 is ∞, while the ideal's is
	// finite). Median is over every scenario, ∞ included.
	GeoMean, Median float64
	Infinite        int
	// Worst is the largest p99/ideal and WorstScenario where it happened.
	Worst         float64
	WorstScenario string
	// Within10 is the share of scenarios with p99/ideal ≤ 1.1.
	Within10 float64
	// Failed, Writes (whole run) and SteadyWrites are means over the
	// scenarios.
	Failed, Writes, SteadyWrites float64
	// RecoveryMedian is the median recovery time over every seed and
	// capacity event of the scenarios, Recovery15 the share of those
	// within 15 s; NaN without recovery times (references, no events).
	RecoveryMedian, Recovery15 float64
	// DriftMedian is the median, over every seed and slowing drift, of
	// the capacity share lost when the weight first followed
	// (Result.DriftLoss; +Inf: never), Drift15 the share of those at most
	// 15 %; NaN without drifts.
	DriftMedian, Drift15 float64
}

// familyRecoveryGood is the recovery time the summary counts as good,
// the threshold of results.md's recovery tables.
const familyRecoveryGood = 15.0

// familyDriftGood is the capacity loss by which a drifting server's weight
// should have started to follow: the target in docs/results/notebook.md.
const familyDriftGood = 0.15

// SummariseFamily summarises rows over the given scenarios, per scheduler
// (in the order rows give them) and policy (in the order given).
func SummariseFamily(rows []Row, family []*Scenario, policies []PolicySpec) []FamilySummary {
	in := map[string]bool{}
	for _, sc := range family {
		in[sc.Name] = true
	}
	var scheds []string
	type key struct{ sched, pol string }
	by := map[key][]Row{}
	for _, r := range rows {
		if !in[r.Scenario] {
			continue
		}
		if !slices.Contains(scheds, r.Scheduler) {
			scheds = append(scheds, r.Scheduler)
		}
		k := key{r.Scheduler, r.Policy}
		by[k] = append(by[k], r)
	}
	var out []FamilySummary
	for _, sched := range scheds {
		for _, p := range policies {
			if rs := by[key{sched, p.Name}]; len(rs) > 0 {
				out = append(out, summariseRows(sched, p.Name, rs))
			}
		}
	}
	return out
}

func summariseRows(sched, pol string, rs []Row) FamilySummary {
	s := FamilySummary{Scheduler: sched, Policy: pol, Scenarios: len(rs), WorstScenario: "-"}
	var ratios, recoveries, drifts []float64
	var logSum, finite float64
	for _, r := range rs {
		x := r.Ratio.Mean
		if math.IsNaN(x) || x <= 0 {
			continue
		}
		ratios = append(ratios, x)
		if math.IsInf(x, 1) {
			s.Infinite++
		} else {
			logSum += math.Log(x)
			finite++
		}
		if len(ratios) == 1 || x > s.Worst {
			s.Worst, s.WorstScenario = x, r.Scenario
		}
		for _, v := range r.Recoveries {
			if !math.IsNaN(v) {
				recoveries = append(recoveries, v)
			}
		}
		drifts = append(drifts, r.DriftLosses...)
	}
	s.Failed = meanOf(rs, func(r Row) float64 { return r.Failed.Mean })
	s.Writes = meanOf(rs, func(r Row) float64 { return r.Writes.Mean })
	s.SteadyWrites = meanOf(rs, func(r Row) float64 { return r.SteadyWrites.Mean })
	s.GeoMean = math.NaN()
	if finite > 0 {
		s.GeoMean = math.Exp(logSum / finite)
	}
	s.Median, s.Within10 = median(ratios), shareAtMost(ratios, 1.1)
	if len(ratios) == 0 {
		s.Worst = math.NaN()
	}
	s.RecoveryMedian, s.Recovery15 = median(recoveries), shareAtMost(recoveries, familyRecoveryGood)
	s.DriftMedian, s.Drift15 = median(drifts), shareAtMost(drifts, familyDriftGood)
	return s
}

// meanOf is the mean of f over rows where it is not NaN (NaN if none).
func meanOf(rs []Row, f func(Row) float64) float64 {
	var sum, n float64
	for _, r := range rs {
		if v := f(r); !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / n
}

// shareAtMost is the share of xs that are ≤ x, NaN when empty.
func shareAtMost(xs []float64, x float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	n := 0
	for _, v := range xs {
		if v <= x {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}

// fixInf is fix with ∞ for +Inf.
func fixInf(v float64, d int) string {
	if math.IsInf(v, 1) {
		return "∞"
	}
	return fix(v, d)
}

// WriteFamilySummary prints SummariseFamily as one table.
func WriteFamilySummary(w io.Writer, title string, sums []FamilySummary) error {
	if _, err := fmt.Fprintf(w, "\n### %s\n\n", title); err != nil {
		return err
	}
	header := []string{"sched", "policy", "scenarios", "p99/ideal geo-mean", "∞", "median", "≤ 1.1 %", "worst", "worst scenario",
		"fail %", "writes/srv/min", "steady writes", "recovery median s", "recovery ≤ 15 s %", "drift followed at % lost (median)", "drift ≤ 15 % lost %"}
	var tab [][]string
	for _, s := range sums {
		tab = append(tab, []string{
			s.Scheduler, s.Policy, strconv.Itoa(s.Scenarios),
			fix(s.GeoMean, 2), strconv.Itoa(s.Infinite), fixInf(s.Median, 2), pct(s.Within10), fixInf(s.Worst, 2), s.WorstScenario,
			fix(100*s.Failed, 2), fix(s.Writes, 2), fix(s.SteadyWrites, 2), fixInf(s.RecoveryMedian, 0), pct(s.Recovery15),
			fixInf(100*s.DriftMedian, 0), pct(s.Drift15),
		})
	}
	return writeAligned(w, header, tab)
}
