package sim

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Scenario is one simulated cluster, its workload and its events, read from
// a TOML file (docs/developer/simulator.md describes every key).
type Scenario struct {
	Name        string        `toml:"name"`
	Description string        `toml:"description,omitempty"`
	Duration    time.Duration `toml:"duration"`
	// Warmup is left out of every statistic (requests arriving before it,
	// time before it).
	Warmup time.Duration `toml:"warmup,omitzero"`
	Seeds  []uint64      `toml:"seeds,omitempty"`
	// Schedulers are the kernel schedulers to run the kernel policies with.
	Schedulers []string `toml:"schedulers,omitempty"`
	// Interval is the baselines' health-check interval and the unit in
	// which settling is judged; the monitor policies use their own
	// configured interval. Default 5s (the monitor's default).
	Interval time.Duration `toml:"interval,omitzero"`
	// SteadyAfter: a window this long after the start and after every
	// event is not "steady state" (writes, oscillation, hot windows).
	SteadyAfter time.Duration `toml:"steady_after,omitzero"`
	// Window is the length of the utilisation windows used for the
	// "server above 95 % while the cluster is below 90 %" check.
	Window time.Duration `toml:"window,omitzero"`

	Workload Workload     `toml:"workload,omitempty"`
	Director Director     `toml:"director,omitempty"`
	Client   Client       `toml:"client,omitempty"`
	Probe    ProbeModel   `toml:"probe,omitempty"`
	Agent    AgentModel   `toml:"agent,omitempty"`
	Servers  []ServerSpec `toml:"server"`
	Events   []EventSpec  `toml:"event,omitempty"`

	// File is where the scenario was read from (empty when built in code).
	File string `toml:"-"`
}

// Workload describes the request stream.
type Workload struct {
	// Utilisation is the offered load as a fraction of the cluster's total
	// nominal capacity; Rate (connections per second) is the alternative.
	// Exactly one is set.
	Utilisation float64 `toml:"utilisation,omitzero"`
	Rate        float64 `toml:"rate,omitzero"`
	// Demand is the service-demand distribution: "pareto" (bounded Pareto,
	// default), "exp" or "fixed". MeanDemand is its mean, in time at
	// speed 1.
	Demand     string        `toml:"demand,omitempty"`
	MeanDemand time.Duration `toml:"mean_demand"`
	Alpha      float64       `toml:"alpha,omitzero"`     // pareto shape, default 1.2
	MaxRatio   float64       `toml:"max_ratio,omitzero"` // pareto upper/lower bound, default 1000

	// IOMeanDemand is each request's mean I/O demand, disk work in time
	// at disk speed 1, done before its CPU demand (disk.go); 0 = no I/O,
	// no disks. IODemand is its distribution (default "exp").
	IOMeanDemand time.Duration `toml:"io_mean_demand,omitzero"`
	IODemand     string        `toml:"io_demand,omitempty"`

	Wave      Wave      `toml:"wave,omitempty"`
	Bursts    Bursts    `toml:"bursts,omitempty"`
	Keepalive Keepalive `toml:"keepalive,omitempty"`
	// Flash crowds: one-off steps of the arrival rate.
	Flash []FlashCrowd `toml:"flash,omitempty"`
}

// FlashCrowd multiplies the arrival rate by Factor from At for Length, once
// (a step up, then back down). Overlapping flash crowds multiply.
type FlashCrowd struct {
	At     time.Duration `toml:"at,omitzero"`
	Length time.Duration `toml:"length"`
	Factor float64       `toml:"factor"`
}

// Wave multiplies the arrival rate by 1 + amplitude·sin(2πt/period).
type Wave struct {
	Amplitude float64       `toml:"amplitude,omitzero"`
	Period    time.Duration `toml:"period,omitzero"`
}

// Bursts multiply the arrival rate by Factor for Length every Every,
// starting at Start.
type Bursts struct {
	Every  time.Duration `toml:"every,omitzero"`
	Length time.Duration `toml:"length,omitzero"`
	Factor float64       `toml:"factor,omitzero"`
	Start  time.Duration `toml:"start,omitzero"`
}

// Keepalive: a Fraction of connections stay open, idle, for an
// exponentially distributed time of mean IdleMean after their response.
// Idle connections count as inactive in the director's table.
type Keepalive struct {
	Fraction float64       `toml:"fraction,omitzero"`
	IdleMean time.Duration `toml:"idle_mean,omitzero"`
}

// Director models the parts of the director the schedulers see.
type Director struct {
	// Accounting is how connections are counted in the table:
	// AccountingKernel (the default) keeps each connection in the TCP
	// state the kernel would hold it in, for that state's timeout, and
	// counts it active or inactive as the kernel does (conntrack.go);
	// AccountingLinger is the older model kept for comparison: a closed
	// or failed connection is inactive for Linger, then gone, and a dead
	// server only refuses (a hang is a crash).
	Accounting string `toml:"accounting,omitempty"`
	// Linger: with AccountingLinger only.
	Linger time.Duration `toml:"linger,omitzero"`
	// TCP, TCPFin and UDP are the three timeouts ipvsadm --set changes:
	// ESTABLISHED (default 900 s), FIN_WAIT (default 120 s) and UDP. The
	// model has no UDP traffic, so UDP is refused.
	TCP    time.Duration `toml:"tcp,omitzero"`
	TCPFin time.Duration `toml:"tcpfin,omitzero"`
	UDP    time.Duration `toml:"udp,omitzero"`
	// Estimator is how often the cumulative connection counters the
	// monitor reads are refreshed (the kernel's rate estimator: 2 s).
	Estimator time.Duration `toml:"estimator,omitzero"`
}

// Client is how the clients behind the workload give up on a server that
// answers nothing (a hang). The model's clients never give up on a server
// that answers, however slowly.
type Client struct {
	// Timeout is how long a client waits in silence: for the answer to
	// its SYN (retransmitted after 1, 3, 7 … s, as Linux does, at most
	// SYNRetries times) or, on an open connection, for the next packet.
	// Default 2 s.
	Timeout time.Duration `toml:"timeout,omitzero"`
}

// Accounting models (Director.Accounting).
const (
	AccountingKernel = "kernel"
	AccountingLinger = "linger"
)

// ProbeModel is the response-time probe the monitor sends: a small request
// of Demand (time at speed 1) plus a network round trip RTT. Reference is
// the monitor's probe.reference ("fully loaded"). Noise is the relative
// standard deviation of a multiplicative noise.
type ProbeModel struct {
	Reference time.Duration `toml:"reference,omitzero"`
	RTT       time.Duration `toml:"rtt,omitzero"`
	Demand    time.Duration `toml:"demand,omitzero"`
	Noise     float64       `toml:"noise,omitzero"`
}

// AgentModel is what the simulated lvs-agent reports.
type AgentModel struct {
	// Window is the agent's sampling interval (lvs-agent -interval, 1 s).
	Window time.Duration `toml:"window,omitzero"`
	// Noise is the standard deviation of Gaussian noise added to every
	// reported load.
	Noise float64 `toml:"noise,omitzero"`
	// NoCPUTime: the agent reports no running CPU totals (an agent older
	// than agent.CPUTime), so the monitor uses its last window's CPU.
	NoCPUTime bool `toml:"no_cpu_time,omitempty"`
	// Memory = MemoryBase + MemoryPerConn·(active + inactive connections).
	MemoryBase    float64 `toml:"memory_base,omitzero"`
	MemoryPerConn float64 `toml:"memory_per_conn,omitzero"`
	Disk          float64 `toml:"disk,omitzero"`
}

// ServerSpec is one real server. Its nominal capacity is Cores·Speed
// (work per second); one request runs on at most one core.
type ServerSpec struct {
	Name  string  `toml:"name"`
	Speed float64 `toml:"speed"`          // per-core speed, 1 = reference core
	Cores float64 `toml:"cores,omitzero"` // default 1
	// Weight is the operator's configured weight: the static-nominal
	// baseline and the monitor's default weight. Default: proportional to
	// the nominal capacity, 10 for the smallest server.
	Weight int `toml:"weight,omitzero"`
	// Disk is the disk's speed (disk work per second, 1 = reference
	// disk); default 1 when the workload does I/O, and only then allowed.
	Disk float64 `toml:"disk,omitzero"`
}

// Capacity returns the nominal capacity cores·speed.
func (s ServerSpec) Capacity() float64 { return s.Cores * s.Speed }

// EventSpec is something that happens to one server at a time.
type EventSpec struct {
	At     time.Duration `toml:"at,omitzero"`
	Server string        `toml:"server"`
	// Kind: "background" (Fraction of the CPU taken by another job; 0 ends
	// it), "speed" (Factor of the nominal speed: 0.5 = degraded to half,
	// 1 = restored), "crash" (the server's process dies: the host
	// refuses every connection; "fail" is read as "crash"), "hang" (the
	// host answers nothing), "recover" (from either), "drain" (the operator writes weight
	// 0), "undrain" (the operator writes Weight, default the server's
	// configured weight), "agent_down", "agent_up", "disk_degrade"
	// (Factor of the nominal disk speed), "memory" (a squeeze: Factor =
	// share of time requests make progress, Fraction = memory used as
	// reported; disk.go), "drift" (the speed factor moves linearly from
	// its value at At to Factor over Over, in DriftStep steps).
	Kind     string  `toml:"kind"`
	Fraction float64 `toml:"fraction,omitzero"`
	Factor   float64 `toml:"factor,omitzero"`
	Weight   int     `toml:"weight,omitzero"`
	// Over is a drift's length.
	Over time.Duration `toml:"over,omitzero"`

	server int // index, filled by check
}

// Event kinds.
const (
	EvBackground = "background"
	EvSpeed      = "speed"
	EvFail       = "fail" // read as EvCrash
	EvCrash      = "crash"
	EvHang       = "hang"
	EvRecover    = "recover"
	EvDrain      = "drain"
	EvUndrain    = "undrain"
	EvAgentDown  = "agent_down"
	EvAgentUp    = "agent_up"
	EvDrift      = "drift"
)

// DriftStep is how often a drift event moves the speed factor: a gradual
// change is a staircase of this step, fine against the monitor's 5 s cycle.
const DriftStep = time.Second

// Schedulers the simulator reproduces.
var SchedulerNames = []string{"rr", "wrr", "lc", "wlc", "sed"}

// LoadScenario reads and checks a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, err := ParseScenario(path, data)
	if err != nil {
		return nil, err
	}
	sc.File = path
	return sc, nil
}

// ParseScenario decodes a scenario, fills defaults and checks it. Unknown
// keys are errors.
func ParseScenario(name string, data []byte) (*Scenario, error) {
	var sc Scenario
	md, err := toml.Decode(string(data), &sc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		var keys []string
		for _, k := range und {
			keys = append(keys, k.String())
		}
		return nil, fmt.Errorf("%s: unknown keys: %s", name, strings.Join(keys, ", "))
	}
	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	if err := sc.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &sc, nil
}

// Check fills defaults and validates the scenario.
func (sc *Scenario) Check() error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }

	if sc.Duration <= 0 {
		bad("duration must be positive")
	}
	if sc.Warmup < 0 || sc.Warmup >= sc.Duration {
		bad("warmup must be in [0, duration)")
	}
	if len(sc.Seeds) == 0 {
		sc.Seeds = []uint64{1, 2, 3, 4, 5}
	}
	if len(sc.Schedulers) == 0 {
		sc.Schedulers = []string{"wrr", "wlc"}
	}
	for _, s := range sc.Schedulers {
		if !slices.Contains(SchedulerNames, s) {
			bad("scheduler %q: want one of %v", s, SchedulerNames)
		}
	}
	if sc.Interval == 0 {
		sc.Interval = 5 * time.Second
	}
	if sc.SteadyAfter == 0 {
		sc.SteadyAfter = 60 * time.Second
	}
	if sc.Window == 0 {
		sc.Window = 30 * time.Second
	}
	if sc.Interval < 0 || sc.SteadyAfter < 0 || sc.Window < 0 {
		bad("interval, steady_after and window must be positive")
	}

	w := &sc.Workload
	if (w.Utilisation > 0) == (w.Rate > 0) {
		bad("workload: set exactly one of utilisation and rate")
	}
	if w.Utilisation < 0 || w.Rate < 0 {
		bad("workload: utilisation and rate must be positive")
	}
	if w.Demand == "" {
		w.Demand = "pareto"
	}
	switch w.Demand {
	case "pareto", "exp", "fixed":
	default:
		bad("workload.demand %q: want pareto, exp or fixed", w.Demand)
	}
	if w.MeanDemand <= 0 {
		bad("workload.mean_demand must be positive")
	}
	if w.Alpha == 0 {
		w.Alpha = 1.2
	}
	if w.MaxRatio == 0 {
		w.MaxRatio = 1000
	}
	if w.Alpha <= 0 || w.Alpha == 1 || w.MaxRatio <= 1 {
		bad("workload: alpha must be positive and not 1, max_ratio above 1")
	}
	if w.Wave.Amplitude < 0 || w.Wave.Amplitude >= 1 || (w.Wave.Amplitude > 0 && w.Wave.Period <= 0) {
		bad("workload.wave: amplitude in [0,1) and a positive period")
	}
	if w.Bursts.Factor != 0 && (w.Bursts.Factor < 0 || w.Bursts.Every <= 0 || w.Bursts.Length <= 0 || w.Bursts.Length > w.Bursts.Every) {
		bad("workload.bursts: positive factor, every ≥ length > 0")
	}
	if w.Keepalive.Fraction < 0 || w.Keepalive.Fraction > 1 || (w.Keepalive.Fraction > 0 && w.Keepalive.IdleMean <= 0) {
		bad("workload.keepalive: fraction in [0,1] and a positive idle_mean")
	}
	for i, f := range w.Flash {
		if f.At < 0 || f.Length <= 0 || !(f.Factor > 0) {
			bad("workload.flash %d: at not negative, positive length and factor", i)
		}
	}

	if sc.Director.Estimator == 0 {
		sc.Director.Estimator = 2 * time.Second
	}
	d := &sc.Director
	switch d.Accounting {
	case "":
		d.Accounting = AccountingKernel
	case AccountingKernel, AccountingLinger:
	default:
		bad("director.accounting %q: want %q or %q", d.Accounting, AccountingKernel, AccountingLinger)
	}
	if d.Linger != 0 && d.Accounting != AccountingLinger {
		bad("director.linger is the %q accounting's timer: set accounting = %q, or leave linger out (the kernel accounting uses the kernel's timeouts)", AccountingLinger, AccountingLinger)
	}
	if d.UDP != 0 {
		bad("director.udp: the simulated workload is TCP only")
	}
	if d.TCP == 0 {
		d.TCP = 900 * time.Second
	}
	if d.TCPFin == 0 {
		d.TCPFin = 120 * time.Second
	}
	if d.Linger < 0 || d.Estimator < 0 || d.TCP < 0 || d.TCPFin < 0 {
		bad("director: linger, estimator, tcp and tcpfin must not be negative")
	}
	if sc.Client.Timeout == 0 {
		sc.Client.Timeout = 2 * time.Second
	}
	if sc.Client.Timeout < 0 {
		bad("client.timeout must not be negative")
	}
	p := &sc.Probe
	if p.Reference == 0 {
		p.Reference = 100 * time.Millisecond
	}
	if p.RTT == 0 {
		p.RTT = 500 * time.Microsecond
	}
	if p.Demand == 0 {
		p.Demand = 5 * time.Millisecond
	}
	if p.Reference < 0 || p.RTT < 0 || p.Demand < 0 || p.Noise < 0 {
		bad("probe: durations and noise must not be negative")
	}
	a := &sc.Agent
	if a.Window == 0 {
		a.Window = time.Second
	}
	if a.MemoryBase == 0 {
		a.MemoryBase = 0.3
	}
	if a.Disk == 0 {
		a.Disk = 0.05
	}
	if a.Window < 0 || a.Noise < 0 || a.MemoryBase < 0 || a.MemoryPerConn < 0 || a.Disk < 0 {
		bad("agent: values must not be negative")
	}

	if len(sc.Servers) == 0 {
		bad("no [[server]]")
	}
	if len(sc.Servers) > 250 {
		bad("at most 250 servers")
	}
	minCap := math.Inf(1)
	names := map[string]int{}
	for i := range sc.Servers {
		s := &sc.Servers[i]
		if s.Name == "" {
			s.Name = fmt.Sprintf("s%d", i+1)
		}
		if _, dup := names[s.Name]; dup {
			bad("server %q named twice", s.Name)
		}
		names[s.Name] = i
		if s.Cores == 0 {
			s.Cores = 1
		}
		if !(s.Speed > 0) || !(s.Cores > 0) {
			bad("server %q: speed and cores must be positive", s.Name)
			continue
		}
		minCap = math.Min(minCap, s.Capacity())
	}
	for i := range sc.Servers {
		s := &sc.Servers[i]
		if s.Weight == 0 && s.Speed > 0 && s.Cores > 0 {
			s.Weight = int(math.Round(10 * s.Capacity() / minCap))
		}
		if s.Weight < 1 || s.Weight > 6553 {
			bad("server %q: weight must be from 1 to 6553 (scale 10 must stay within the kernel's 65535)", s.Name)
		}
	}
	errs = append(errs, sc.checkResources()...)
	sort.SliceStable(sc.Events, func(i, j int) bool { return sc.Events[i].At < sc.Events[j].At })
	for i := range sc.Events {
		e := &sc.Events[i]
		k, ok := names[e.Server]
		if !ok {
			bad("event %d: unknown server %q", i, e.Server)
		}
		e.server = k
		if e.At < 0 || e.At >= sc.Duration {
			bad("event %d: at must be within the duration", i)
		}
		switch e.Kind {
		case EvBackground:
			if e.Fraction < 0 || e.Fraction > 0.95 {
				bad("event %d: background fraction must be in [0, 0.95]", i)
			}
		case EvSpeed:
			if !(e.Factor > 0) {
				bad("event %d: speed factor must be positive", i)
			}
		case EvDrift:
			if !(e.Factor > 0) || e.Over <= 0 {
				bad("event %d: drift needs a positive factor and a positive over", i)
			}
		case EvUndrain:
			if e.Weight == 0 && ok {
				e.Weight = sc.Servers[k].Weight
			}
			if e.Weight < 1 || e.Weight > 65535 {
				bad("event %d: undrain weight must be from 1 to 65535", i)
			}
		case EvFail:
			e.Kind = EvCrash
		case EvCrash, EvHang, EvRecover, EvDrain, EvAgentDown, EvAgentUp:
		case EvDiskDegrade, EvMemory:
			if err := sc.checkResourceEvent(e); err != nil {
				bad("event %d: %w", i, err)
			}
		default:
			bad("event %d: unknown kind %q", i, e.Kind)
		}
	}
	return errors.Join(errs...)
}

// NominalCapacity is the sum of the servers' nominal capacities.
func (sc *Scenario) NominalCapacity() float64 {
	var c float64
	for _, s := range sc.Servers {
		c += s.Capacity()
	}
	return c
}

// BaseRate is the mean arrival rate (connections per second) before waves
// and bursts.
func (sc *Scenario) BaseRate() float64 {
	if sc.Workload.Rate > 0 {
		return sc.Workload.Rate
	}
	return sc.Workload.Utilisation * sc.NominalCapacity() / sc.Workload.MeanDemand.Seconds()
}

// EventLabel names event i for tables and plots, e.g. "fail b@120s".
func (sc *Scenario) EventLabel(i int) string {
	e := sc.Events[i]
	arg := ""
	switch e.Kind {
	case EvBackground:
		arg = fmt.Sprintf(" %.0f%%", e.Fraction*100)
	case EvSpeed:
		arg = fmt.Sprintf(" ×%g", e.Factor)
	case EvDiskDegrade, EvMemory:
		arg = resourceLabel(e)
	case EvDrift:
		arg = fmt.Sprintf(" →×%g/%gs", e.Factor, e.Over.Seconds())
	}
	return fmt.Sprintf("%s%s %s@%gs", e.Kind, arg, e.Server, e.At.Seconds())
}

// changesCapacity reports whether an event kind changes the ideal weights.
func changesCapacity(kind string) bool {
	switch kind {
	case EvAgentDown, EvAgentUp:
		return false
	}
	return true
}
