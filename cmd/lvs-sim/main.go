// Command lvs-sim runs the cluster simulator: every scenario × seed ×
// kernel scheduler × weight policy, with the real lvs-monitor in the loop
// for the monitor policies, and prints the balancing-quality table.
//
//	lvs-sim [flags] SCENARIO.toml...
//
// -h prints the flags, -version the build information; both exit 0. Bad
// flags exit 2, a failed run 1. See docs/developer/simulator.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"lvs-feedback/internal/cmdline"
	"lvs-feedback/sim"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, errUsage):
		os.Exit(cmdline.ExitUsage)
	case err != nil:
		fmt.Fprintln(os.Stderr, "lvs-sim:", err)
		os.Exit(1)
	}
}

// errUsage is run's answer to a flag mistake, which it has printed.
var errUsage = errors.New("bad flags")

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lvs-sim", flag.ContinueOnError)
	policies := fs.String("policies", strings.Join(sim.DefaultPolicies, ","), "comma-separated `policies`: built-ins "+strings.Join(sim.DefaultPolicies, ", ")+", ideal-poll[:DURATION], ideal-lag:DURATION, or NAME=monitor.toml")
	var extra listFlag
	fs.Var(&extra, "monitor", "add a policy `NAME=FILE` running the real monitor with FILE (monitor TOML without [[service]]); repeatable")
	scheds := fs.String("sched", "", "comma-separated kernel `schedulers` (default: each scenario's list)")
	seeds := fs.String("seeds", "", "comma-separated `seeds` (default: each scenario's list)")
	nseeds := fs.Int("nseeds", 0, "use seeds 1..`N` instead of each scenario's list")
	duration := fs.Duration("duration", 0, "override every scenario's `duration` (warm-up and events kept where they fit)")
	noCPUTime := fs.Bool("no-cpu-time", false, "agents report no running CPU totals (as agents before cpu_time): the monitor uses each agent's last window")
	agentWindow := fs.Duration("agent-window", 0, "override every scenario's agent sampling `window` (lvs-agent -interval)")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "runs in parallel")
	plotDir := fs.String("plot", "", "write SVG time series of the first seed into `DIR`")
	plotPolicies := fs.String("plot-policies", "", "policies to plot one file each for (default: all kernel policies)")
	overview := fs.String("overview", "", "write one SVG to `FILE`: the first scenario under its first scheduler, the weights the default policy wrote against static weights and the sliding p99 of both (needs default and nominal among -policies)")
	csvPath := fs.String("csv", "", "write one CSV line per run to `FILE`")
	timelinePath := fs.String("timeline", "", "write every run's per-server timeline (new and failed connections, active and inactive counts, weight per window) as CSV to `FILE`")
	timelineWindow := fs.Duration("timeline-window", 5*time.Second, "the timeline's `window`")
	quiet := fs.Bool("q", false, "no progress on stderr")
	pivot := fs.Bool("pivot", false, "print the compact policy × scenario table of p99/ideal (per scheduler) instead of the full table")
	// Generated scenario families (docs/developer/simulator.md, "Scenario families").
	family := fs.String("family", "", "scenario `family` to generate from: "+strings.Join(sim.FamilyNames, " or ")+" (tune on train, report on test)")
	generate := fs.Int("generate", 0, "run scenarios 0..`N`-1 of -family after the files given")
	outDir := fs.String("out", "", "with -generate: write the generated scenarios as TOML files into `DIR` and run nothing")
	steady := fs.Bool("steady", false, "with -generate: leave out every incident, flash crowd and wave (the same clusters when nothing changes)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lvs-sim [flags] SCENARIO.toml...\n\nflags:")
		fs.PrintDefaults()
	}
	if code, done := cmdline.Parse(fs, args, stdout, stderr); done {
		if code != cmdline.ExitOK {
			return errUsage
		}
		return nil
	}
	if (*family == "") != (*generate == 0) || *generate < 0 || ((*outDir != "" || *steady) && *generate == 0) {
		return errors.New("-family and -generate N (N > 0) go together; -out and -steady need both")
	}
	var generated []*sim.Scenario
	if *generate > 0 {
		var err error
		if generated, err = sim.GenerateFamily(*family, *generate); err != nil {
			return err
		}
		if *steady {
			for _, sc := range generated {
				sim.MakeSteady(sc)
			}
		}
	}
	if *outDir != "" {
		return writeScenarios(*outDir, generated, stdout)
	}
	if fs.NArg() == 0 && len(generated) == 0 {
		fs.Usage()
		return errors.New("no scenario given")
	}

	var scs []*sim.Scenario
	for _, path := range fs.Args() {
		sc, err := sim.LoadScenario(path)
		if err != nil {
			return err
		}
		scs = append(scs, sc)
	}
	scs = append(scs, generated...)
	for _, sc := range scs {
		if *agentWindow > 0 {
			sc.Agent.Window = *agentWindow
		}
		if *noCPUTime {
			sc.Agent.NoCPUTime = true
		}
		if *duration > 0 {
			sc.Duration = *duration
			if sc.Warmup >= sc.Duration {
				sc.Warmup = sc.Duration / 10
			}
			kept := sc.Events[:0]
			for _, e := range sc.Events {
				if e.At < sc.Duration {
					kept = append(kept, e)
				}
			}
			sc.Events = kept
		}
	}

	var specs []sim.PolicySpec
	for _, name := range splitList(*policies) {
		spec, err := policySpec(name)
		if err != nil {
			return err
		}
		specs = append(specs, spec)
	}
	for _, e := range extra {
		spec, err := policySpec(e)
		if err != nil {
			return err
		}
		specs = append(specs, spec)
	}

	if *timelineWindow < 100*time.Millisecond {
		// A line per window, server and run: a tiny window is a huge file.
		return fmt.Errorf("-timeline-window %v: at least 100ms", *timelineWindow)
	}
	b := &sim.Bench{Scenarios: scs, Policies: specs, Workers: *workers, KeepSeries: *plotDir != "" || *overview != ""}
	if *timelinePath != "" {
		b.Timeline = *timelineWindow
	}
	b.Schedulers = splitList(*scheds)
	if *seeds != "" {
		s, err := parseSeeds(*seeds)
		if err != nil {
			return err
		}
		b.Seeds = s
	}
	for i := 1; i <= *nseeds; i++ {
		b.Seeds = append(b.Seeds, uint64(i))
	}
	start := time.Now()
	if !*quiet {
		b.Progress = func(done, total int) {
			if done == total || done%25 == 0 {
				fmt.Fprintf(stderr, "\r%d/%d runs, %.0fs", done, total, time.Since(start).Seconds())
			}
			if done == total {
				fmt.Fprintln(stderr)
			}
		}
	}
	results, err := b.Run()
	if err != nil {
		return err
	}
	rows := sim.Summarise(results, scs, specs, b.Schedulers)
	if *pivot {
		if err := sim.WritePivot(stdout, rows, scs, specs); err != nil {
			return err
		}
	} else if err := sim.WriteTable(stdout, rows, scs); err != nil {
		return err
	}
	if len(generated) > 0 {
		title := fmt.Sprintf("Family %s, scenarios %s-00 to %s: p99/ideal per scenario, summarised", *family, *family, generated[len(generated)-1].Name)
		if err := sim.WriteFamilySummary(stdout, title, sim.SummariseFamily(rows, generated, specs)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\n%d runs in %.1fs (%d workers). Times in ms; ± is the standard deviation over seeds; a failed request counts as +Inf in the percentiles (fail %% beside p99); recovery, reach and settle are the worst seed, in seconds, per event.\n",
		len(results), time.Since(start).Seconds(), *workers)
	if *csvPath != "" {
		f, err := os.Create(*csvPath)
		if err != nil {
			return err
		}
		if err := sim.WriteCSV(f, results); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if *timelinePath != "" {
		if err := writeFile(*timelinePath, func(w io.Writer) error { return sim.WriteTimeline(w, results) }); err != nil {
			return err
		}
	}
	if *plotDir != "" {
		files, err := sim.WritePlots(*plotDir, results, scs, splitList(*plotPolicies))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d plots in %s\n", len(files), *plotDir)
	}
	if *overview != "" {
		sc := scs[0]
		sched := sc.Schedulers[0]
		if *scheds != "" {
			sched = splitList(*scheds)[0]
		}
		if err := sim.WriteOverview(*overview, results, sc, sched, sim.PolDefault); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "overview in %s\n", *overview)
	}
	return nil
}

// writeFile creates path and fills it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// writeScenarios writes generated scenarios as NAME.toml files into dir.
func writeScenarios(dir string, scs []*sim.Scenario, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, sc := range scs {
		path := filepath.Join(dir, sc.Name+".toml")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := sim.EncodeScenario(f, sc); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintln(stdout, path)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// policySpec reads a built-in policy name, or NAME=FILE for a monitor
// configuration file.
func policySpec(s string) (sim.PolicySpec, error) {
	name, file, ok := strings.Cut(s, "=")
	if !ok {
		return sim.BuiltinPolicy(s)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return sim.PolicySpec{}, fmt.Errorf("policy %s: %w", name, err)
	}
	return sim.PolicySpec{Name: name, Monitor: string(data)}, nil
}

func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, p := range splitList(s) {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", p, err)
		}
		out = append(out, v)
	}
	return out, nil
}
