package sim

import (
	"encoding/csv"
	"io"
	"strconv"
)

// TimelineRow is one server's window of a run's timeline: what the
// kernel's counters would show for it, to be set beside a measurement on
// real IPVS window by window.
type TimelineRow struct {
	End    float64 // the window's end, seconds since the start; it began Window earlier
	Server int
	// New connections scheduled to the server in the window; Failed, those
	// of them and of its connections in flight that failed in the window
	// (refused, unanswered, lost when it died).
	New, Failed int
	// Active and Inactive are the table's counts at the window's end,
	// Weight the destination's weight then.
	Active, Inactive, Weight int
}

// timelineRec collects a run's timeline; a nil one records nothing.
type timelineRec struct {
	dt          float64
	newC, failC []int
	rows        []TimelineRow
}

func newTimelineRec(dt float64, n int) *timelineRec {
	return &timelineRec{dt: dt, newC: make([]int, n), failC: make([]int, n)}
}

// add counts a new (failed false) or failed connection of destination k.
func (t *timelineRec) add(k int, failed bool) {
	if t == nil || k >= len(t.newC) {
		return
	}
	if failed {
		t.failC[k]++
	} else {
		t.newC[k]++
	}
}

// window closes the current window.
func (t *timelineRec) window(r *run) {
	for k := range t.newC {
		d := r.dests[k]
		t.rows = append(t.rows, TimelineRow{End: r.now, Server: k, New: t.newC[k], Failed: t.failC[k],
			Active: d.Active, Inactive: d.Inactive, Weight: d.Weight})
		t.newC[k], t.failC[k] = 0, 0
	}
}

// WriteTimeline writes every run's timeline as CSV, one line per run,
// window and server.
func WriteTimeline(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"scenario", "scheduler", "policy", "seed", "t_start", "t_end", "server",
		"new", "failed", "active", "inactive", "weight"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range results {
		for _, row := range r.Timeline {
			_ = cw.Write([]string{r.Scenario, r.Scheduler, r.Policy, strconv.FormatUint(r.Seed, 10),
				f(row.End - r.TimelineWindow), f(row.End), r.ServerNames[row.Server],
				strconv.Itoa(row.New), strconv.Itoa(row.Failed), strconv.Itoa(row.Active),
				strconv.Itoa(row.Inactive), strconv.Itoa(row.Weight)})
		}
	}
	cw.Flush()
	return cw.Error()
}
