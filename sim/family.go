package sim

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Scenario families: generated clusters, loads and incidents far wider than
// the shipped scenarios, for tuning on one family and reporting on another
// that tuning never saw (docs/developer/simulator.md, "Scenario families").
const (
	// FamilyTrain is the family to tune on.
	FamilyTrain = "train"
	// FamilyTest is the held-out family to report on.
	FamilyTest = "test"
)

// FamilyNames lists the families GenerateScenario knows.
var FamilyNames = []string{FamilyTrain, FamilyTest}

// FamilySeedsPerScenario is how many simulation seeds a generated scenario
// carries.
const FamilySeedsPerScenario = 2

// FamilyMaxRate caps a generated scenario's mean arrival rate (connections
// per second): the simulation costs per request, so a big cluster gets
// proportionally longer requests instead of more of them. Under processor
// sharing the number of requests present, the utilisation and the probe's
// view do not depend on the demand's scale; only the time scale of queue
// fluctuations against the monitor's interval does.
const FamilyMaxRate = 800

// familyDuration and familyWarmup are every generated scenario's length
// and warm-up.
const (
	familyDuration = 600 * time.Second
	familyWarmup   = 60 * time.Second
)

// familyMaxLoad bounds offered load over available capacity at every
// moment of a generated scenario (incidents, wave peaks and flash crowds
// together): the family tests balancing, not a cluster drowning whatever
// the weights.
const familyMaxLoad = 1.05

// familyStream returns the random source of scenario index of a family:
// the family's name hashed (FNV-1a) is the PCG seed and the index the
// stream, so families never share a draw.
func familyStream(family string, index int) (*rand.Rand, error) {
	if !slices.Contains(FamilyNames, family) {
		return nil, fmt.Errorf("scenario family %q: want one of %v", family, FamilyNames)
	}
	if index < 0 {
		return nil, fmt.Errorf("scenario family %s: negative index %d", family, index)
	}
	h := fnv.New64a()
	h.Write([]byte("lvs-sim scenario family " + family))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(index))), nil
}

// familySeed turns a draw into a simulation seed that no other family and
// no shipped scenario uses: at least 2³², even for train, odd for test.
func familySeed(family string, draw uint64) uint64 {
	s := 1<<32 + (draw%(1<<40))*2
	if family == FamilyTest {
		s++
	}
	return s
}

// GenerateFamily returns scenarios 0..n-1 of a family.
func GenerateFamily(family string, n int) ([]*Scenario, error) {
	var out []*Scenario
	for i := 0; i < n; i++ {
		sc, err := GenerateScenario(family, i)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// hwType is one hardware generation of a generated cluster.
type hwType struct {
	cores, speed float64
}

// coreChoices are the core counts a hardware type draws from; 1 appears
// three times so that single-core servers are common.
var coreChoices = []float64{1, 1, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32}

// incident is one generated happening before it becomes events: server
// indices, a start and end (end ≥ duration: no return), the share of
// each server's capacity it takes, and its events.
type incident struct {
	start, end float64
	servers    []int
	loss       float64 // share of each server's capacity lost while active
	rate       float64 // arrival-rate factor while active (flash crowd), else 0
	events     []EventSpec
	flash      *FlashCrowd
	what       string
}

// GenerateScenario returns scenario index of a family: a pure function of
// (family, index). The scenario is checked (defaults filled).
func GenerateScenario(family string, index int) (*Scenario, error) {
	rng, err := familyStream(family, index)
	if err != nil {
		return nil, err
	}
	sc := generate(rng, failKinds(family, index), family, index)
	if err := sc.Check(); err != nil {
		return nil, fmt.Errorf("generated scenario %s: %w", sc.Name, err)
	}
	return sc, nil
}

// round rounds x to a multiple of 1/per (dividing by per keeps 0.95 exactly
// the literal 0.95, where multiplying by 0.05 would not).
func round(x, per float64) float64 { return math.Round(x*per) / per }

func uniform(rng *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }

// failKinds returns the source of the crash-or-hang choice of each failure
// of scenario index: a stream of its own, so that the choice draws nothing
// from the scenario's main stream.
func failKinds(family string, index int) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte("lvs-sim failure kinds " + family))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(index)))
}

// failKind draws a failure's kind: half crash (refuses), half hang
// (answers nothing).
func failKind(kinds *rand.Rand) string {
	if kinds.IntN(2) == 0 {
		return EvCrash
	}
	return EvHang
}

func generate(rng, kinds *rand.Rand, family string, index int) *Scenario {
	sc := &Scenario{
		Name:       fmt.Sprintf("%s-%02d", family, index),
		Duration:   familyDuration,
		Warmup:     familyWarmup,
		Schedulers: []string{"wrr", "wlc", "sed"},
	}
	for range FamilySeedsPerScenario {
		sc.Seeds = append(sc.Seeds, familySeed(family, rng.Uint64()))
	}

	// Servers: 3–40, of 1–4 hardware types.
	n := 3 + rng.IntN(38)
	types := make([]hwType, 1+rng.IntN(min(4, n)))
	for t := range types {
		types[t] = hwType{cores: coreChoices[rng.IntN(len(coreChoices))], speed: round(uniform(rng, 0.5, 1.5), 20)}
	}
	if rng.Float64() < 0.5 {
		types[0].cores = 1
	}
	for i := 0; i < n; i++ {
		t := i
		if i >= len(types) {
			t = rng.IntN(len(types))
		}
		sc.Servers = append(sc.Servers, ServerSpec{Name: fmt.Sprintf("s%02d", i+1), Speed: types[t].speed, Cores: types[t].cores})
	}
	nominal := sc.NominalCapacity()

	// Workload.
	w := &sc.Workload
	w.Utilisation = round(uniform(rng, 0.3, 0.95), 100)
	mean := []float64{0.005, 0.01, 0.02, 0.05, 0.1}[rng.IntN(5)]
	mean = math.Max(mean, w.Utilisation*nominal/FamilyMaxRate)
	w.MeanDemand = time.Duration(math.Ceil(mean*1000)) * time.Millisecond
	if rng.Float64() < 0.2 {
		w.Demand = "exp"
	}
	if rng.Float64() < 0.6 {
		w.Keepalive = Keepalive{Fraction: round(uniform(rng, 0.2, 0.9), 20), IdleMean: time.Duration(uniform(rng, 1, 15)) * time.Second}
	}
	peak := 1.0
	if rng.Float64() < 0.25 {
		amp := math.Min(round(uniform(rng, 0.1, 0.3), 20), 1/w.Utilisation-1)
		if amp >= 0.05 {
			w.Wave = Wave{Amplitude: round(amp, 100), Period: time.Duration(120+rng.IntN(481)) * time.Second}
			peak = 1 + w.Wave.Amplitude
		}
	}
	if rng.Float64() < 0.15 {
		// Clients more patient than the default with a hung server: more
		// SYNs, a longer SYN_RECV.
		sc.Client.Timeout = time.Duration(10+rng.IntN(51)) * time.Second
	}
	sc.Agent.Noise = round(uniform(rng, 0.01, 0.04), 200)
	sc.Agent.MemoryPerConn = round(uniform(rng, 0, 0.0005), 20000)
	sc.Probe.Noise = round(uniform(rng, 0, 0.1), 100)

	// Incidents: 1–4, some starting together, none overlapping another on
	// the same server, none pushing the load past familyMaxLoad.
	var incs []incident
	want := 1 + rng.IntN(4)
	for tries := 0; len(incs) < want && tries < 40; tries++ {
		start := float64(90 + rng.IntN(361))
		if len(incs) > 0 && rng.Float64() < 0.3 {
			start = incs[len(incs)-1].start // several at once
		}
		inc, ok := drawIncident(rng, kinds, sc, start)
		if !ok || !fits(sc, incs, inc, peak) {
			continue
		}
		incs = append(incs, inc)
	}
	var what []string
	for _, inc := range incs {
		sc.Events = append(sc.Events, inc.events...)
		if inc.flash != nil {
			w.Flash = append(w.Flash, *inc.flash)
		}
		what = append(what, inc.what)
	}
	sc.Description = describe(sc, types, what)
	return sc
}

// drawIncident draws one incident starting at start.
func drawIncident(rng, kinds *rand.Rand, sc *Scenario, start float64) (incident, bool) {
	dur := sc.Duration.Seconds()
	end := start + float64(60+rng.IntN(181))
	if end > dur-30 {
		end = math.Inf(1) // does not come back within the run
	}
	at := func(t float64) time.Duration { return time.Duration(t) * time.Second }
	k := rng.IntN(len(sc.Servers))
	name := sc.Servers[k].Name
	inc := incident{start: start, end: end, servers: []int{k}}
	pair := func(on, off EventSpec) {
		on.At, on.Server = at(start), name
		inc.events = append(inc.events, on)
		if !math.IsInf(end, 1) {
			off.At, off.Server = at(end), name
			inc.events = append(inc.events, off)
		}
	}
	span := func() string {
		if math.IsInf(end, 1) {
			return fmt.Sprintf("%gs–", start)
		}
		return fmt.Sprintf("%gs–%gs", start, end)
	}
	switch kind := rng.IntN(9); kind {
	case 0: // background job
		f := round(uniform(rng, 0.3, 0.8), 20)
		inc.loss = f
		pair(EventSpec{Kind: EvBackground, Fraction: f}, EventSpec{Kind: EvBackground})
		inc.what = fmt.Sprintf("background %.0f%% on %s %s", 100*f, name, span())
	case 1: // degrade (a step)
		f := round(uniform(rng, 0.3, 0.7), 20)
		inc.loss = 1 - f
		pair(EventSpec{Kind: EvSpeed, Factor: f}, EventSpec{Kind: EvSpeed, Factor: 1})
		inc.what = fmt.Sprintf("%s degraded to ×%g %s", name, f, span())
	case 2: // gradual drift down, maybe back
		f := round(uniform(rng, 0.4, 0.8), 20)
		over := time.Duration(60+rng.IntN(181)) * time.Second
		// The drift back must not start before the drift down ends.
		if !math.IsInf(end, 1) {
			over = min(over, time.Duration(end-start)*time.Second)
		}
		inc.loss = 1 - f
		pair(EventSpec{Kind: EvDrift, Factor: f, Over: over}, EventSpec{Kind: EvDrift, Factor: 1, Over: over})
		inc.end += over.Seconds()
		inc.what = fmt.Sprintf("%s drifts to ×%g over %gs %s", name, f, over.Seconds(), span())
	case 3: // crash or hang, and return
		inc.loss = 1
		fk := failKind(kinds)
		pair(EventSpec{Kind: fk}, EventSpec{Kind: EvRecover})
		inc.what = fmt.Sprintf("%s %ss %s", name, fk, span())
	case 4: // flapping: fail/return repeated
		t := start
		cycles := 3 + rng.IntN(4)
		fk := failKind(kinds)
		for c := 0; c < cycles && t < dur-20; c++ {
			down := float64(3 + rng.IntN(13))
			inc.events = append(inc.events, EventSpec{At: at(t), Server: name, Kind: fk}, EventSpec{At: at(t + down), Server: name, Kind: EvRecover})
			t += down + float64(5+rng.IntN(26))
		}
		inc.loss, inc.end = 1, t
		inc.what = fmt.Sprintf("%s flaps (%s) %d times from %gs", name, fk, len(inc.events)/2, start)
	case 5: // flash crowd
		f := round(math.Min(uniform(rng, 1.3, 2.5), familyMaxLoad/sc.Workload.Utilisation), 20)
		if f < 1.15 {
			return incident{}, false
		}
		length := time.Duration(20+rng.IntN(101)) * time.Second
		inc.servers, inc.rate, inc.end = nil, f, start+length.Seconds()
		inc.flash = &FlashCrowd{At: at(start), Length: length, Factor: f}
		inc.what = fmt.Sprintf("flash crowd ×%g for %gs from %gs", f, length.Seconds(), start)
	case 6: // operator drain and undrain
		inc.loss = 1
		pair(EventSpec{Kind: EvDrain}, EventSpec{Kind: EvUndrain})
		inc.what = fmt.Sprintf("%s drained %s", name, span())
	case 7: // the agent dies, the server keeps serving
		pair(EventSpec{Kind: EvAgentDown}, EventSpec{Kind: EvAgentUp})
		inc.what = fmt.Sprintf("%s's agent down %s", name, span())
	case 8: // several servers at once (a rack, a noisy neighbour): degrade or fail together
		m := min(len(sc.Servers)-1, 2+rng.IntN(3))
		if m < 2 {
			return incident{}, false
		}
		inc.servers = rng.Perm(len(sc.Servers))[:m]
		slices.Sort(inc.servers)
		on, off := EventSpec{Kind: failKind(kinds)}, EventSpec{Kind: EvRecover}
		inc.loss = 1
		if rng.Float64() < 0.6 {
			f := round(uniform(rng, 0.3, 0.7), 20)
			on, off = EventSpec{Kind: EvSpeed, Factor: f}, EventSpec{Kind: EvSpeed, Factor: 1}
			inc.loss = 1 - f
		}
		var names []string
		for _, s := range inc.servers {
			name = sc.Servers[s].Name
			pair(on, off)
			names = append(names, name)
		}
		what := on.Kind
		if on.Kind == EvSpeed {
			what = fmt.Sprintf("degraded to ×%g", on.Factor)
		}
		inc.what = fmt.Sprintf("%s %s together %s", strings.Join(names, ","), what, span())
	}
	return inc, true
}

// fits reports whether inc can join incs: it touches no server another
// incident holds at an overlapping time, and the offered load stays within
// familyMaxLoad of the available capacity at every second.
func fits(sc *Scenario, incs []incident, inc incident, peak float64) bool {
	overlap := func(a, b incident) bool { return a.start <= b.end && b.start <= a.end }
	for _, o := range incs {
		if !overlap(o, inc) {
			continue
		}
		for _, s := range inc.servers {
			if slices.Contains(o.servers, s) {
				return false
			}
		}
	}
	all := append(slices.Clone(incs), inc)
	nominal := sc.NominalCapacity()
	for t := 0.0; t < sc.Duration.Seconds(); t++ {
		avail, rate := nominal, peak
		for _, o := range all {
			if t < o.start || t > o.end {
				continue
			}
			for _, s := range o.servers {
				avail -= o.loss * sc.Servers[s].Capacity()
			}
			if o.rate > 0 {
				rate *= o.rate
			}
		}
		if avail <= 0 || sc.Workload.Utilisation*nominal*rate/avail > familyMaxLoad {
			return false
		}
	}
	return true
}

// describe summarises a generated scenario for the table's heading.
func describe(sc *Scenario, types []hwType, what []string) string {
	count := map[hwType]int{}
	for _, s := range sc.Servers {
		count[hwType{s.Cores, s.Speed}]++
	}
	var hw []string
	for _, t := range types {
		if c := count[t]; c > 0 {
			hw = append(hw, fmt.Sprintf("%d×(%g cores ×%g)", c, t.cores, t.speed))
			count[t] = 0
		}
	}
	w := sc.Workload
	demand := w.Demand
	if demand == "" {
		demand = "pareto"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Generated: %d servers %s, load %.0f %%, %s %v", len(sc.Servers), strings.Join(hw, " + "), 100*w.Utilisation, demand, w.MeanDemand)
	if w.Keepalive.Fraction > 0 {
		fmt.Fprintf(&b, ", keep-alive %.0f %% (%v)", 100*w.Keepalive.Fraction, w.Keepalive.IdleMean)
	}
	if w.Wave.Amplitude > 0 {
		fmt.Fprintf(&b, ", wave ±%.0f %% (%v)", 100*w.Wave.Amplitude, w.Wave.Period)
	}
	if sc.Client.Timeout > 0 {
		fmt.Fprintf(&b, ", client timeout %v", sc.Client.Timeout)
	}
	if len(what) > 0 {
		fmt.Fprintf(&b, "; %s", strings.Join(what, "; "))
	}
	return b.String() + "."
}

// EncodeScenario writes sc as a scenario TOML file that ParseScenario
// reads back to the same scenario.
func EncodeScenario(w io.Writer, sc *Scenario) error {
	if err := toml.NewEncoder(w).Encode(sc); err != nil {
		return fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	return nil
}

// MakeSteady removes every incident from a scenario — events, flash crowds
// and the wave — leaving its cluster and its steady workload: what the
// controller writes when nothing changes (docs/developer/simulator.md).
func MakeSteady(sc *Scenario) {
	sc.Events, sc.Workload.Flash, sc.Workload.Wave = nil, nil, Wave{}
	sc.Description = strings.TrimRight(sc.Description, ". ") + "; steady: incidents, flash crowds and wave left out"
}
