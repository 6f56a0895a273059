// Command lvs-tune fits lvs-monitor's [coefficients] from evidence, by
// one of two methods:
//
//	lvs-tune regress [-config FILE] [-dir STATE_DIR] [-service S]
//	lvs-tune search -scenario FILE [-config FILE] [-base FILE] [-train 1-3] [-held 4-8] …
//	lvs-tune search -history DIR_OR_FILE -service SERVICE [-write-scenario FILE] …
//	lvs-tune benefit [-dir DIR_OR_FILE] [-window 1h] [-until now|last|TIME] [-textfile FILE] …
//
// regress fits the coefficients to the recorder's history for the
// controller the configuration runs (package tune, Regress: stepwise
// selection by partial F-tests at -significance); search runs a genetic
// search on the simulator (tune.Search), on a scenario file or on one
// built from a recorded history (tune.ScenarioFromHistory).
// benefit is not a method: it replays a window of the history through the
// simulator with static weights and with the weights the monitor wrote,
// and prints what the monitor bought (tune.Benefit; exit status 0
// printed, 1 failed, 2 bad flags). regress and search print a verdict
// first. To apply: the [coefficients] block, checked
// in the running configuration with the block replaced (as lvs-monitor
// -check would), what changes against the running file, and the expected
// gain with its spread. To keep the running coefficients (not better on
// held-out data beyond the uncertainty): why, and no block. -h prints the
// usage, -version the build information. Exit status: 0 a block to
// apply, or -h and -version; 3 keep your coefficients; 2 bad flags; 1 a
// failed run. See docs/tuning.md.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"lvs-feedback/history"
	"lvs-feedback/internal/cmdline"
	"lvs-feedback/monitor"
	"lvs-feedback/policy"
	"lvs-feedback/sim"
	"lvs-feedback/tune"
)

const defaultConfig = "/etc/lvs-monitor/lvs-monitor.toml"

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if code := exitCode(err); code != cmdline.ExitOK {
		if code == exitFailed {
			fmt.Fprintln(os.Stderr, "lvs-tune:", err)
		}
		os.Exit(code)
	}
}

// Exit statuses besides cmdline's 0 (a block to apply, or -h) and 2 (a
// command-line mistake).
const (
	// exitFailed: the run failed (an unreadable history or
	// configuration, too few samples, a failed simulation).
	exitFailed = 1
	// exitKeep: the run worked and its verdict is to keep the running
	// coefficients; no block was printed. Distinct so that a script does
	// not paste what was not offered.
	exitKeep = 3
)

// exitCode is the exit status for run's answer.
func exitCode(err error) int {
	switch {
	case err == nil:
		return cmdline.ExitOK
	case errors.Is(err, errUsage):
		return cmdline.ExitUsage
	case errors.Is(err, errKeep):
		return exitKeep
	}
	return exitFailed
}

// errUsage is run's answer to a command-line mistake, which it has
// printed.
var errUsage = errors.New("bad command line")

// errKeep is run's answer when its verdict, printed, is to keep the
// running coefficients.
var errKeep = errors.New("keep your coefficients")

// exitText ends every usage text.
const exitText = `
exit status: 0 a block to apply (printed and checked), or -h, -version; 3 keep your coefficients (the
fit or the search is not better than them beyond its uncertainty; no block printed); 2 a
command-line mistake; 1 a failed run
`

const usageText = `usage:
  lvs-tune regress [flags]   fit the coefficients to the history (lvs-tune regress -h)
  lvs-tune search [flags]    search them on the simulator (lvs-tune search -h)
  lvs-tune benefit [flags]   what the monitor's weights bought on the recorded traffic (lvs-tune benefit -h)

flags:
`

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lvs-tune", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), exitText)
	}
	if code, done := cmdline.Parse(fs, args, stdout, stderr); done {
		if code != cmdline.ExitOK {
			return errUsage
		}
		return nil
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "lvs-tune: no method given")
		fs.Usage()
		return errUsage
	}
	switch fs.Arg(0) {
	case "regress":
		return runRegress(fs.Args()[1:], stdout, stderr)
	case "search":
		return runSearch(fs.Args()[1:], stdout, stderr)
	case "benefit":
		return runBenefit(fs.Args()[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "lvs-tune: unknown method %q\n", fs.Arg(0))
	fs.Usage()
	return errUsage
}

// parseMethod parses a method's flags. done: -h, -version or a mistake in
// the flags or arguments (already reported), and err is what the method
// returns. Otherwise mistake reports a usage error the method finds later
// — the message under the method's name, then its usage — and returns
// errUsage.
func parseMethod(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (mistake func(format string, a ...any) error, done bool, err error) {
	if code, stop := cmdline.Parse(fs, args, stdout, stderr); stop {
		if code != cmdline.ExitOK {
			return nil, true, errUsage
		}
		return nil, true, nil
	}
	mistake = func(format string, a ...any) error {
		fmt.Fprintf(stderr, fs.Name()+": "+format+"\n", a...)
		fs.Usage()
		return errUsage
	}
	if fs.NArg() > 0 {
		return mistake, true, mistake("unexpected argument %q", fs.Arg(0))
	}
	return mistake, false, nil
}

func runRegress(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lvs-tune regress", flag.ContinueOnError)
	configPath := fs.String("config", defaultConfig, "the running configuration `FILE`: its coefficients, state_dir and the file the block is checked in")
	dir := fs.String("dir", "", "read the history from `STATE_DIR` (default: state_dir of -config)")
	service := fs.String("service", "", "fit one `SERVICE` only (as the history names it, e.g. 192.0.2.10:80/tcp; default: every service)")
	significance := fs.Float64("significance", tune.DefaultSignificance, "`level` of the stepwise F-tests and of the held-out comparisons, in (0, 0.5]")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lvs-tune regress [-config FILE] [-dir STATE_DIR] [-service SERVICE] [-significance LEVEL]\n\nflags:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), exitText)
	}
	mistake, done, err := parseMethod(fs, args, stdout, stderr)
	if done {
		return err
	}
	if !(*significance > 0 && *significance <= 0.5) {
		return mistake("-significance %v: want a level in (0, 0.5]", *significance)
	}
	cfgText, cfg, err := readConfig(*configPath)
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = cfg.StateDir
	}
	// The history is read twice, record by record (tune.RegressSource):
	// no record is kept, so memory does not grow with the history.
	var (
		records, reads int
		readErr        error
	)
	samples := func(fn func(tune.Sample)) error {
		sampler := tune.NewSampler(fn)
		notes, err := history.Read(*dir, history.Filter{Service: *service}, func(r history.Record) {
			if reads == 0 {
				records++
			}
			sampler.Add(r)
		})
		if err != nil {
			readErr = fmt.Errorf("read the history: %w", err)
			return readErr
		}
		sampler.Flush()
		if reads++; reads == 1 && len(notes) > 0 {
			fmt.Fprintf(stderr, "lvs-tune: %d history lines skipped, the first: %s\n", len(notes), notes[0])
		}
		return nil
	}
	ctl, err := tune.ControllerReads(cfg.Weight.Controller)
	if err != nil {
		return fmt.Errorf("configuration %s: %w", *configPath, err)
	}
	running := tune.VectorOf(cfg.Coefficients)
	fit, err := tune.RegressSource(samples, running, tune.RegressOptions{Significance: *significance, Candidates: ctl.Inputs})
	if readErr != nil {
		return readErr
	}
	if err != nil {
		return fmt.Errorf("%d history records in %s: %w", records, *dir, err)
	}
	proposal := tune.Proposal(fit, running, ctl)
	apply, why := tune.Verdict(fit, running, proposal, ctl)

	if apply {
		fmt.Fprintln(stdout, "verdict: apply — the fit predicts the held-out time better than the running coefficients and a constant, beyond the uncertainty")
	} else {
		fmt.Fprintf(stdout, "verdict: keep your coefficients — %s\n", why)
	}
	fmt.Fprintf(stdout, "\nregression on %d records of %s: %d samples fitted, the last %.0f %% of the time (%d samples) held out\n",
		records, *dir, fit.Train, tune.HeldOutShare*100, fit.Held)
	fmt.Fprintln(stdout, "outcome: active connections at the next cycle per unit of weight, relative to the service mean")
	switch {
	case ctl.Controller == policy.ControllerCapacity:
		fmt.Fprintf(stdout, "controller %q (%s): reads all six coefficients as sensitivities against the shipped values (above its shipped value an input counts more; input, response and process at or below theirs count as 0); the fit chooses among all six\n", ctl.Controller, *configPath)
	case ctl.Sizes:
		fmt.Fprintf(stdout, "controller %q (%s): reads all six coefficients, by size; the fit chooses among all six\n", ctl.Controller, *configPath)
	default:
		fmt.Fprintf(stdout, "controller %q (%s): reads only whether %s are above 0; the fit chooses among them, and %s change nothing under it (only the load status, explain, history and the metrics show) and keep their running values\n",
			ctl.Controller, *configPath, strings.Join(ctl.Names(), ", "), strings.Join(unread(ctl), ", "))
	}
	fmt.Fprintf(stdout, "stepwise selection at significance %g (partial F against the F(1, n−k−1) quantile, k figures in the model): ", fit.Significance)
	if len(fit.Steps) == 0 {
		fmt.Fprintln(stdout, "no figure entered")
	} else {
		steps := make([]string, len(fit.Steps))
		for i, st := range fit.Steps {
			steps[i] = st.String()
		}
		fmt.Fprintln(stdout, strings.Join(steps, ", "))
	}
	fmt.Fprintf(stdout, "\n%-9s %7s %8s %13s %10s %9s\n", "figure", "fitted", "running", "standardised", "partial F", "critical")
	for j, n := range tune.Names {
		f := fmt.Sprintf("%10.1f %9.2f", fit.F[j], fit.FCritical[j])
		switch {
		case !fit.Candidates[j]:
			f = fmt.Sprintf("%10s %9s", "-", "-")
		case fit.Constant[j]:
			f = fmt.Sprintf("%10s %9s", "constant", "-")
		}
		note := ""
		switch {
		case !fit.Candidates[j]:
			note = "  not read by " + ctl.Controller
		case fit.Selected[j]:
			note = "  selected"
		}
		fmt.Fprintf(stdout, "%-9s %7.2f %8.2f %13.2f %s%s\n", n, fit.Coefficients[j], running[j], fit.Standardised[j], f, note)
	}
	fmt.Fprintf(stdout, "\nheld-out RMSE %.4f, running coefficients %.4f, a constant %.4f (%.2f of a constant's; 1 = no better than the mean)\n",
		fit.HeldRMSE, fit.RunningRMSE, fit.ConstantRMSE, fit.HeldRelative)
	for _, c := range []struct {
		against string
		cmp     tune.Comparison
	}{{"the running coefficients", fit.VsRunning}, {"a constant", fit.VsConstant}} {
		outcome := "not better beyond the uncertainty"
		if c.cmp.Better {
			outcome = "better"
		}
		fmt.Fprintf(stdout, "held-out squared error against %s: %+.4f ± %.4f per sample (paired over %d held-out cycles; t %.2f, needs > %.2f): %s\n",
			c.against, c.cmp.Diff, c.cmp.SE, c.cmp.Cycles, c.cmp.T, c.cmp.Critical, outcome)
	}
	fmt.Fprintf(stdout, "expected gain: %.1f %% ± %.1f %% lower held-out error than the running coefficients (mean ± sd over %d stretches of the held-out time)\n",
		100*fit.GainMean, 100*fit.GainSD, tune.GainBlocks)
	if !apply {
		fmt.Fprintln(stdout, "\nno [coefficients] block: keep your coefficients")
		return errKeep
	}
	return report(stdout, *configPath, cfgText, running, proposal)
}

// unread names the figures the controller does not read.
func unread(r tune.Reads) []string {
	var out []string
	for j, n := range tune.Names {
		if !r.Inputs[j] {
			out = append(out, n)
		}
	}
	return out
}

func runSearch(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lvs-tune search", flag.ContinueOnError)
	scenario := fs.String("scenario", "", "the simulator scenario `FILE` to score coefficients on (sim/scenarios)")
	historyPath := fs.String("history", "", "build the scenario from the recorded history in `DIR_OR_FILE` (a state directory, or a file of JSON lines such as lvsctl history -o json writes) instead of -scenario")
	service := fs.String("service", "", "with -history: the `SERVICE` to replay, as the history names it (e.g. 192.0.2.10:80/tcp); default: the history's only service")
	writeScenario := fs.String("write-scenario", "", "with -history: also write the scenario built to `FILE` (TOML that lvs-sim reads)")
	dryRun := fs.Bool("n", false, "with -history: build and print (and write) the scenario, do not search")
	maxCycles := fs.Int("max-cycles", tune.DefaultMaxCycles, "with -history: build the scenario from the latest `N` cycles at most (bounds memory; default a day at 5 s)")
	configPath := fs.String("config", "", "the running configuration `FILE`: the start and the file the block is checked in (default: none; the start is -base's)")
	basePath := fs.String("base", "", "monitor configuration `FILE` without [[service]] (a sim/variants file) to run the candidates with (default: the simulator's lvs policy)")
	sched := fs.String("sched", "", "kernel `scheduler` (default: the scenario's first)")
	train := fs.String("train", "1-3", "training `seeds`: a list of numbers and ranges, e.g. 1-3,7")
	held := fs.String("held", "4-8", "held-out `seeds`, as -train (five: the verdict weighs the gain against its spread over them)")
	population := fs.Int("population", 8, "vectors per generation")
	generations := fs.Int("generations", 4, "generations, the first included")
	balance := fs.Float64("balance-weight", tune.DefaultFitnessWeights.Balance, "x1, the weight of the fitness's balance part (p99 ÷ the ideal weights' p99); x1 + x2 = 1, the other follows when one is given")
	stability := fs.Float64("stability-weight", tune.DefaultFitnessWeights.Stability, "x2, the weight of the fitness's stability part (weight writes per server per minute)")
	significance := fs.Float64("significance", tune.DefaultSignificance, "`level` of the held-out comparison with the start, in (0, 0.5]")
	seed := fs.Uint64("seed", 1, "the search's random `seed`")
	duration := fs.Duration("duration", 0, "override the scenario's `duration`")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "simulations in parallel")
	quiet := fs.Bool("q", false, "no progress on stderr")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: lvs-tune search -scenario FILE [-config FILE] [-base FILE] [-train SEEDS] [-held SEEDS] [flags]\n       lvs-tune search -history DIR_OR_FILE [-service SERVICE] [-write-scenario FILE] [-n] [flags]\n\nfitness per seed: x1 × p99 ÷ the ideal weights' p99 (balance) + x2 × weight writes per server per minute (stability)\n\nflags:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), exitText)
	}
	mistake, done, err := parseMethod(fs, args, stdout, stderr)
	if done {
		return err
	}
	if (*scenario == "") == (*historyPath == "") {
		return mistake("give exactly one of -scenario and -history")
	}
	if *historyPath == "" && (*service != "" || *writeScenario != "" || *dryRun) {
		return mistake("-service, -write-scenario and -n go with -history")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["balance-weight"] && !set["stability-weight"]:
		*stability = math.Round((1-*balance)*1e12) / 1e12 // 0.1, not 0.09999999999999998
	case set["stability-weight"] && !set["balance-weight"]:
		*balance = math.Round((1-*stability)*1e12) / 1e12
	}
	weights := tune.FitnessWeights{Balance: *balance, Stability: *stability}
	if !(*balance >= 0 && *stability >= 0) || math.Abs(*balance+*stability-1) > 1e-9 {
		return mistake("-balance-weight %v and -stability-weight %v: want two weights in [0, 1] summing to 1", *balance, *stability)
	}
	if !(*significance > 0 && *significance <= 0.5) {
		return mistake("-significance %v: want a level in (0, 0.5]", *significance)
	}
	trainSeeds, err := parseSeeds(*train)
	if err != nil {
		return mistake("-train: %v", err)
	}
	heldSeeds, err := parseSeeds(*held)
	if err != nil {
		return mistake("-held: %v", err)
	}
	var sc *sim.Scenario
	if *historyPath != "" {
		if sc, err = scenarioFromHistory(*historyPath, *service, *writeScenario, *maxCycles, stdout, stderr); err != nil {
			return err
		}
		if *dryRun {
			return nil
		}
	} else if sc, err = sim.LoadScenario(*scenario); err != nil {
		return err
	}
	if *duration > 0 {
		sc.Duration = *duration
	}
	if *sched == "" {
		if len(sc.Schedulers) == 0 {
			return fmt.Errorf("scenario %s names no scheduler: give -sched", *scenario)
		}
		*sched = sc.Schedulers[0]
	}
	base := sim.LVSConfigTOML
	if *basePath != "" {
		b, err := os.ReadFile(*basePath)
		if err != nil {
			return fmt.Errorf("base configuration: %w", err)
		}
		base = string(b)
	}
	baseCfg, err := sim.MonitorConfig("base", base, sc)
	if err != nil {
		return err
	}
	if baseCfg.Weight.Controller != policy.ControllerLVS {
		return fmt.Errorf("base configuration: controller %q: the coefficients steer weights only with controller = %q", baseCfg.Weight.Controller, policy.ControllerLVS)
	}
	start := tune.VectorOf(baseCfg.Coefficients)
	var cfgText []byte
	if *configPath != "" {
		var cfg monitor.Config
		if cfgText, cfg, err = readConfig(*configPath); err != nil {
			return err
		}
		start = tune.VectorOf(cfg.Coefficients)
	}
	s := &tune.Search{Scenario: sc, Scheduler: *sched, Base: base, Train: trainSeeds, Held: heldSeeds, Start: start,
		Population: *population, Generations: *generations, Weights: weights, Seed: *seed, Workers: *workers}
	if !*quiet {
		began := time.Now()
		s.Progress = func(g int, best tune.Score) {
			fmt.Fprintf(stderr, "generation %d: best %.3f %v (%s)\n", g, best.Fitness, best.Vector, time.Since(began).Round(time.Second))
		}
	}
	res, err := s.Run()
	if err != nil {
		return err
	}
	apply, t, critical, why := tune.SearchVerdict(res, start, *significance)
	if apply {
		fmt.Fprintln(stdout, "verdict: apply — the best vector scores better than the start on the held-out seeds, beyond the uncertainty")
	} else {
		fmt.Fprintf(stdout, "verdict: keep your coefficients — %s\n", why)
	}
	fmt.Fprintf(stdout, "\ngenetic search on %s (%s, %s), population %d, %d generations, %d vectors simulated\n",
		sc.Name, *sched, sc.Duration, *population, *generations, res.Evaluated)
	fmt.Fprintf(stdout, "score per seed: %g × balance (p99 ÷ the ideal weights' p99) + %g × stability (weight writes per server per minute)\n", weights.Balance, weights.Stability)
	fmt.Fprintf(stdout, "best fitness by generation (training seeds %s): %s\n", *train, floats(res.History))
	fmt.Fprintf(stdout, "held-out seeds %s: best p99 ratio %s, writes %s; start p99 ratio %s, writes %s\n",
		*held, floats(res.BestHeld.Ratio), floats(res.BestHeld.Writes), floats(res.StartHeld.Ratio), floats(res.StartHeld.Writes))
	test := fmt.Sprintf("t %.2f, needs > %.2f at significance %g", t, critical, *significance)
	if math.IsNaN(critical) {
		test = "one seed: no spread"
	}
	fmt.Fprintf(stdout, "expected gain: score %.3f ± %.3f lower than the start's (mean ± sd over the held-out seeds; %s)\n",
		res.GainMean, res.GainSD, test)
	if !apply {
		fmt.Fprintln(stdout, "\nno [coefficients] block: keep your coefficients")
		return errKeep
	}
	if cfgText == nil {
		// No running file: check the block as the simulator ran it.
		withBlock, err := tune.ReplaceCoefficients([]byte(base), res.Best)
		if err != nil {
			return err
		}
		if _, err := sim.MonitorConfig("result", string(withBlock), sc); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\n%s", res.Best.Block())
		printDiff(stdout, "the start", start, res.Best)
		return nil
	}
	return report(stdout, *configPath, cfgText, start, res.Best)
}

// scenarioFromHistory reads the history at path (a directory of history
// files or one file of records), builds the scenario of service from it,
// prints the report and writes the scenario to out when asked. The
// records are read one at a time and not kept (without -service, a
// first reading finds the services).
func scenarioFromHistory(path, service, out string, maxCycles int, stdout, stderr io.Writer) (*sim.Scenario, error) {
	reads := 0
	source := func(f history.Filter) func(fn func(history.Record)) error {
		return func(fn func(history.Record)) error {
			notes, err := eachRecord(path, f, fn)
			if err != nil {
				return err
			}
			if reads++; reads == 1 && len(notes) > 0 {
				fmt.Fprintf(stderr, "lvs-tune: %d history lines skipped, the first: %s\n", len(notes), notes[0])
			}
			return nil
		}
	}
	if service == "" {
		var services []string
		if err := source(history.Filter{})(func(r history.Record) {
			if !slices.Contains(services, r.Service) {
				services = append(services, r.Service)
			}
		}); err != nil {
			return nil, err
		}
		if len(services) != 1 {
			return nil, fmt.Errorf("history %s holds %d services (%s): give -service", path, len(services), strings.Join(services, ", "))
		}
		service = services[0]
	}
	sc, rep, err := tune.ScenarioFromHistorySource(source(history.Filter{Service: service}), service, tune.HistoryOptions{MaxCycles: maxCycles})
	if errors.Is(err, errReadHistory) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := rep.Write(stdout); err != nil {
		return nil, err
	}
	if out != "" {
		var b bytes.Buffer
		if err := sim.EncodeScenario(&b, sc); err != nil {
			return nil, err
		}
		if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
			return nil, fmt.Errorf("write the scenario: %w", err)
		}
		fmt.Fprintf(stdout, "scenario written to %s\n", out)
	}
	fmt.Fprintln(stdout)
	return sc, nil
}

// errReadHistory marks eachRecord's errors.
var errReadHistory = errors.New("history")

// eachRecord calls fn with every record f selects of a state directory's
// history files, or of one file (a history file of either format, or the
// JSON lines lvsctl history -o json prints), oldest first.
func eachRecord(path string, filter history.Filter, fn func(history.Record)) ([]history.Skipped, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errReadHistory, err)
	}
	if st.IsDir() {
		notes, err := history.Read(path, filter, fn)
		if err != nil {
			return notes, fmt.Errorf("read the %w: %w", errReadHistory, err)
		}
		return notes, nil
	}
	notes, err := history.ReadFile(path, history.Filter{Service: filter.Service}, fn)
	if err != nil {
		return notes, fmt.Errorf("%w: %w", errReadHistory, err)
	}
	return notes, nil
}

// readConfig reads and checks the running configuration.
func readConfig(path string) ([]byte, monitor.Config, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, monitor.Config{}, fmt.Errorf("configuration: %w", err)
	}
	cfg, _, err := monitor.CheckConfig(path, text)
	if err != nil {
		return nil, monitor.Config{}, fmt.Errorf("configuration %s: %w", path, err)
	}
	return text, cfg, nil
}

// report puts the block into the running file's text, checks the result
// as lvs-monitor -check does, and prints the block and the changes.
func report(w io.Writer, path string, text []byte, running, best tune.Vector) error {
	out, err := tune.ReplaceCoefficients(text, best)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	cfg, _, err := monitor.CheckConfig(path+" (with the new [coefficients])", out)
	if err != nil {
		return err
	}
	if got := tune.VectorOf(cfg.Coefficients); got != best {
		return fmt.Errorf("%s with the new block reads coefficients %v, not %v", path, got, best)
	}
	fmt.Fprintf(w, "\n%s", best.Block())
	fmt.Fprintf(w, "(checked: %s with this block passes lvs-monitor -check)\n", path)
	if cfg.Weight.Controller == policy.ControllerCapacity {
		fmt.Fprintf(w, "note: %s runs controller %q, which reads each coefficient as a sensitivity against its shipped value (docs/tuning.md)\n", path, cfg.Weight.Controller)
	}
	printDiff(w, path, running, best)
	return nil
}

func printDiff(w io.Writer, against string, from, to tune.Vector) {
	fmt.Fprintf(w, "\nchanges against %s:\n", against)
	changed := false
	for j, n := range tune.Names {
		if from[j] != to[j] {
			changed = true
			fmt.Fprintf(w, "-%s = %s\n+%s = %s\n", n, strconv.FormatFloat(from[j], 'f', -1, 64), n, strconv.FormatFloat(to[j], 'f', -1, 64))
		}
	}
	if !changed {
		fmt.Fprintln(w, "none")
	}
}

// parseSeeds reads "1-3,7" as 1, 2, 3, 7.
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: not a seed or a range of seeds", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a || b-a > 10000 {
				return nil, fmt.Errorf("%q: not a range of seeds such as 1-3", part)
			}
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
	}
	return out, nil
}

func floats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, " ")
}
