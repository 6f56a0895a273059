package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/renameio/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"lvs-feedback/history"
	"lvs-feedback/tune"
)

const benefitUsage = `usage: lvs-tune benefit [-config FILE | -dir DIR_OR_FILE] [-service SERVICE] [-window D] [-until TIME]
                        [-sched S] [-seeds SEEDS] [-workers N] [-max-requests N] [-textfile FILE] [-v]

Replays the last -window of the recorded history through the simulator twice, on the same
requests: with each server's default weight throughout (static) and with the weights
lvs-monitor wrote, at the cycles that wrote them (monitor); prints both runs' p99 response time
and overload seconds (seconds in which some server's CPU or disk was busy at least 95 % of the
second), and static ÷ monitor. See docs/history.md.

flags:
`

const benefitExit = `
exit status: 0 printed (and written); 1 no history, no records in the window, a service that could
not be replayed (too few cycles, more than -max-requests), or the textfile not written; 2 a
command-line mistake
`

func runBenefit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lvs-tune benefit", flag.ContinueOnError)
	configPath := fs.String("config", defaultConfig, "lvs-monitor's configuration `FILE`, for its state_dir (only that key is read)")
	dir := fs.String("dir", "", "read the history in `DIR_OR_FILE`: a state directory, or one file of records (a history file, or lvsctl history -o json's JSON lines); default: state_dir of -config")
	service := fs.String("service", "", "replay one `SERVICE` (as the history names it, e.g. 192.0.2.10:80/tcp); default: every service recorded in the window")
	window := fs.Duration("window", time.Hour, "replay the cycles of the last `D` before -until")
	until := fs.String("until", "now", "the window's end: now, last (the history's last record) or an RFC 3339 `TIME`")
	sched := fs.String("sched", "wrr", "the kernel `scheduler` both runs use (the history does not record it): rr, wrr, lc, wlc or sed")
	seeds := fs.String("seeds", "1-3", "simulator `seeds`: each is one draw of the requests, the same for both runs; the figures are the means")
	textfile := fs.String("textfile", "", "also write the figures as node_exporter textfile-collector metrics to `FILE` (name it *.prom; written to a temporary file, then renamed)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "simulations in parallel (each holds about 30 bytes per request of its window)")
	maxRequests := fs.Float64("max-requests", tune.DefaultMaxRequests, "refuse a window of more than `N` requests to simulate per run (about 30 bytes each)")
	verbose := fs.Bool("v", false, "print the scenario each service's window was turned into")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benefitUsage)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), benefitExit)
	}
	mistake, done, err := parseMethod(fs, args, stdout, stderr)
	if done {
		return err
	}
	if *window <= 0 {
		return mistake("-window %v: want a positive duration such as 1h", *window)
	}
	if !(*maxRequests >= 1) {
		return mistake("-max-requests %v: want 1 or more", *maxRequests)
	}
	if *workers < 1 {
		return mistake("-workers %d: want 1 or more", *workers)
	}
	if !slices.Contains([]string{"rr", "wrr", "lc", "wlc", "sed"}, *sched) {
		return mistake("-sched %q: want rr, wrr, lc, wlc or sed", *sched)
	}
	seedList, err := parseSeeds(*seeds)
	if err != nil || len(seedList) > 100 {
		return mistake("-seeds %q: want a list of numbers and ranges such as 1-3, at most 100 seeds", *seeds)
	}
	var end time.Time
	switch *until {
	case "now":
		end = time.Now()
	case "last":
	default:
		if end, err = time.Parse(time.RFC3339, *until); err != nil {
			return mistake("-until %q: want now, last or an RFC 3339 time such as 2026-12-07T17:00:00Z", *until)
		}
	}
	if *dir == "" {
		*dir = stateDir(*configPath)
	}

	// A first reading finds the window's end (with -until last) and the
	// services recorded in the window.
	var earliest, latest time.Time
	notes, err := eachRecord(*dir, history.Filter{Service: *service}, func(r history.Record) {
		if earliest.IsZero() || r.Time.Before(earliest) {
			earliest = r.Time
		}
		if r.Time.After(latest) {
			latest = r.Time
		}
	})
	if err != nil {
		return err
	}
	if latest.IsZero() {
		return noRecords(*dir, *service, notes)
	}
	if len(notes) > 0 {
		fmt.Fprintf(stderr, "lvs-tune: %d parts of the history skipped, the first: %s\n", len(notes), notes[0])
	}
	if *until == "last" {
		end = latest
	}
	from := end.Add(-*window)
	services := []string{*service}
	if *service == "" {
		services = nil
		if _, err := eachRecord(*dir, history.Filter{}, func(r history.Record) {
			if r.Time.After(from) && !r.Time.After(end) && !slices.Contains(services, r.Service) {
				services = append(services, r.Service)
			}
		}); err != nil {
			return err
		}
		if len(services) == 0 {
			return fmt.Errorf("%w: no records in %s after %s up to %s (-window %s, -until %s); its records run from %s to %s (-until last replays the latest)",
				tune.ErrNoRecords, *dir, stampUTC(from), stampUTC(end), *window, *until, stampUTC(earliest), stampUTC(latest))
		}
		slices.Sort(services)
	}

	var results []tune.BenefitResult
	var failed []error
	for i, svc := range services {
		res, err := tune.Benefit(func(fn func(history.Record)) error {
			_, err := eachRecord(*dir, history.Filter{Service: svc}, fn)
			return err
		}, svc, tune.BenefitOptions{From: from, Until: end, Scheduler: *sched, Seeds: seedList, Workers: *workers, MaxRequests: *maxRequests})
		if err != nil {
			if errors.Is(err, errReadHistory) || len(services) == 1 {
				return err
			}
			err = fmt.Errorf("%s: %w", svc, err)
			fmt.Fprintf(stderr, "lvs-tune benefit: %v\n", err)
			failed = append(failed, err)
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if *verbose {
			if err := res.Report.Write(stdout); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		printBenefit(stdout, res, *seeds)
		results = append(results, res)
	}
	if *textfile != "" && len(results) > 0 {
		if err := writeBenefitTextfile(*textfile, results, time.Now()); err != nil {
			return fmt.Errorf("-textfile: %w", err)
		}
		fmt.Fprintf(stdout, "\nmetrics written to %s\n", *textfile)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d services not replayed", len(failed), len(services))
	}
	return nil
}

// noRecords is the error for a history that holds no record to replay:
// none at all, or only parts skipped (a format this lvs-tune does not
// read), which it names.
func noRecords(dir, service string, notes []history.Skipped) error {
	what := "no records"
	if service != "" {
		what = "no records of " + service
	}
	if len(notes) > 0 {
		return fmt.Errorf("%w: %s in %s that this lvs-tune reads: %d parts skipped, the first: %s",
			tune.ErrNoRecords, what, dir, len(notes), notes[0])
	}
	return fmt.Errorf("%w: %s in %s", tune.ErrNoRecords, what, dir)
}

// stateDir is state_dir of the configuration at path (only that key is
// read), else the default.
func stateDir(path string) string {
	var f struct {
		StateDir string `toml:"state_dir"`
	}
	if _, err := toml.DecodeFile(path, &f); err == nil && f.StateDir != "" {
		return f.StateDir
	}
	return history.DefaultDir
}

func stampUTC(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") }

// printBenefit writes one service's figures.
func printBenefit(w io.Writer, r tune.BenefitResult, seeds string) {
	weights := make([]string, len(r.StaticWeights))
	for i, x := range r.StaticWeights {
		weights[i] = strconv.Itoa(x)
	}
	fmt.Fprintf(w, "benefit of lvs-monitor's weights on %s, replayed in the simulator\n", r.Service)
	last := stampUTC(r.Last)
	if y, m, d := r.Last.UTC().Date(); r.First.UTC().Year() == y && r.First.UTC().Month() == m && r.First.UTC().Day() == d {
		last = r.Last.UTC().Format("15:04:05")
	}
	fmt.Fprintf(w, "window    %s to %s: %d cycles of %s (%s), %d servers\n",
		stampUTC(r.First), last, r.Report.Cycles, r.Report.Interval, r.Span, len(r.Servers))
	fmt.Fprintf(w, "static    each server's default weight throughout (%s), servers down taken out at each interval\n", strings.Join(weights, ", "))
	fmt.Fprintf(w, "monitor   the weights lvs-monitor wrote: %d changes, each replayed at its cycle\n", r.Writes)
	fmt.Fprintf(w, "runs      scheduler %s, seeds %s (the same requests for both runs; figures are the means)\n\n", r.Scheduler, seeds)
	row := func(name, static, monitor, ratio string) {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%-18s %10s %10s %17s", name, static, monitor, ratio), " "))
	}
	row("", "STATIC", "MONITOR", "STATIC ÷ MONITOR")
	row("p99 response time", seconds(r.Static.P99), seconds(r.Monitor.P99), ratioText(r.P99Ratio()))
	row("overload seconds", strconv.FormatFloat(r.Static.Overload, 'f', 0, 64), strconv.FormatFloat(r.Monitor.Overload, 'f', 0, 64), ratioText(r.OverloadRatio()))
	row("failed requests", fmt.Sprintf("%.2f%%", 100*r.Static.Failed), fmt.Sprintf("%.2f%%", 100*r.Monitor.Failed), "")
	fmt.Fprintln(w, "overload seconds: seconds in which some server's CPU or disk was busy at least 95 % of the second")
}

// seconds formats a response time: "inf" when more than 1 % of the
// requests failed (no finite p99).
func seconds(s float64) string {
	if math.IsInf(s, 1) {
		return "inf"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= 10*time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Second:
		d = d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		d = d.Round(100 * time.Microsecond)
	default:
		d = d.Round(time.Microsecond)
	}
	return d.String()
}

// ratioText formats static ÷ monitor: "-" when undefined (both 0, or
// both infinite), "inf" when only the monitor's is 0.
func ratioText(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case math.IsInf(x, 1):
		return "inf"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// writeBenefitTextfile writes the results as node_exporter textfile
// metrics: the text format of a registry of its own, written to a
// temporary file beside FILE and renamed over it (renameio), so that the
// collector never reads half a file. The temporary file is made 0644
// through its descriptor, never by its name: the directory may be
// writable by the collector's user, who could swap a link in under a
// name between a write and a chmod (client_golang's WriteToTextfile
// chmods by name).
func writeBenefitTextfile(path string, results []tune.BenefitResult, at time.Time) error {
	reg := prometheus.NewRegistry()
	p99 := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lvs_benefit_p99_seconds",
		Help: "p99 response time of the service's last window replayed in the simulator, by the weights it ran with: static (each server's default weight) or monitor (the weights lvs-monitor wrote)."}, []string{"service", "weights"})
	overload := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lvs_benefit_overload_seconds",
		Help: "Seconds of the replayed window in which some server's CPU or disk was busy at least 95 % of the second, by weights."}, []string{"service", "weights"})
	span := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lvs_benefit_window_seconds",
		Help: "Length of the window replayed: its cycles times the interval."}, []string{"service"})
	writes := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lvs_benefit_weight_changes",
		Help: "Weight changes lvs-monitor made in the window, replayed in the monitor run."}, []string{"service"})
	last := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lvs_benefit_last_run_timestamp_seconds",
		Help: "When lvs-tune benefit wrote this file (Unix time)."})
	reg.MustRegister(p99, overload, span, writes, last)
	for _, r := range results {
		p99.WithLabelValues(r.Service, "static").Set(r.Static.P99)
		p99.WithLabelValues(r.Service, "monitor").Set(r.Monitor.P99)
		overload.WithLabelValues(r.Service, "static").Set(r.Static.Overload)
		overload.WithLabelValues(r.Service, "monitor").Set(r.Monitor.Overload)
		span.WithLabelValues(r.Service).Set(r.Span.Seconds())
		writes.WithLabelValues(r.Service).Set(float64(r.Writes))
	}
	last.Set(float64(at.UnixNano()) / 1e9)
	fams, err := reg.Gather()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, mf := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			return err
		}
	}
	// Readable by all: the collector runs as another user.
	return renameio.WriteFile(path, b.Bytes(), 0o644, renameio.WithStaticPermissions(0o644), renameio.WithTempDir(filepath.Dir(path)))
}
