package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
)

// FamilySummary is one policy under one scheduler over a set of
// scenarios (a generated family): its p99/ideal per scenario (mean over
// the scenario's seeds) summarised.
type FamilySummary struct {
	Scheduler, Policy string
	Scenarios         int
	// GeoMean and Median of the scenarios' p99/ideal; Worst is the largest
	// and WorstScenario where it happened.
	GeoMean, Median, Worst float64
	WorstScenario          string
	// Within10 is the share of scenarios with p99/ideal ≤ 1.1.
	Within10 float64
	// Failed and SteadyWrites are means over the scenarios.
	Failed, SteadyWrites float64
}

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
			rs := by[key{sched, p.Name}]
			if len(rs) == 0 {
				continue
			}
			s := FamilySummary{Scheduler: sched, Policy: p.Name, Worst: math.Inf(-1)}
			var ratios []float64
			var logSum, failed, writes float64
			var nWrites int
			for _, r := range rs {
				s.Scenarios++
				failed += r.Failed.Mean
				if !math.IsNaN(r.SteadyWrites.Mean) {
					writes += r.SteadyWrites.Mean
					nWrites++
				}
				x := r.Ratio.Mean
				if math.IsNaN(x) || x <= 0 {
					continue
				}
				ratios = append(ratios, x)
				logSum += math.Log(x)
				if x > s.Worst {
					s.Worst, s.WorstScenario = x, r.Scenario
				}
				if x <= 1.1 {
					s.Within10++
				}
			}
			s.Failed = failed / float64(s.Scenarios)
			s.SteadyWrites = math.NaN()
			if nWrites > 0 {
				s.SteadyWrites = writes / float64(nWrites)
			}
			s.GeoMean, s.Median, s.Within10 = math.NaN(), math.NaN(), math.NaN()
			if n := len(ratios); n > 0 {
				s.GeoMean = math.Exp(logSum / float64(n))
				slices.Sort(ratios)
				s.Median = ratios[n/2]
				if n%2 == 0 {
					s.Median = (ratios[n/2-1] + ratios[n/2]) / 2
				}
				s.Within10 = float64(countAtMost(ratios, 1.1)) / float64(n)
			} else {
				s.Worst = math.NaN()
			}
			out = append(out, s)
		}
	}
	return out
}

func countAtMost(sorted []float64, x float64) int {
	n := 0
	for _, v := range sorted {
		if v <= x {
			n++
		}
	}
	return n
}

// WriteFamilySummary prints SummariseFamily as one table.
func WriteFamilySummary(w io.Writer, title string, sums []FamilySummary) error {
	if _, err := fmt.Fprintf(w, "\n### %s\n\n", title); err != nil {
		return err
	}
	header := []string{"sched", "policy", "scenarios", "p99/ideal geo-mean", "median", "≤ 1.1 %", "worst", "worst scenario", "fail %", "steady writes"}
	var tab [][]string
	for _, s := range sums {
		tab = append(tab, []string{
			s.Scheduler, s.Policy, fmt.Sprint(s.Scenarios),
			fix(s.GeoMean, 2), fix(s.Median, 2), pct(s.Within10), fix(s.Worst, 2), s.WorstScenario,
			fix(100*s.Failed, 2), fix(s.SteadyWrites, 2),
		})
	}
	return writeAligned(w, header, tab)
}
