package monitor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"lvs-feedback/replica"
	"net/netip"
	"sync"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/nodeexp"
	"lvs-feedback/policy"
)

// Deps are the edges the monitor talks to. Every field is required except
// Logger (default: discard).
type Deps struct {
	Table  ipvs.Table
	Agents AgentClient
	Prober Prober
	Store  Store
	Logger *slog.Logger
	// Metrics, if non-nil, receives every cycle's figures.
	Metrics *Metrics
	// History, if non-nil, records every cycle (not in a dry run).
	History *Recorder
	// Now is the clock (default time.Now). A simulator passes its own so
	// that everything time-based in the monitor follows simulated time.
	Now func() time.Time
}

// Monitor runs the dynamic-feedback cycle of one director. Create it with
// New; scheduler.Run drives it (alone, or as one of a pair or fleet), and
// tests and simulators that keep their own clock call Cycle. A Monitor is
// not safe for concurrent use, except Last, which may be called from any
// goroutine.
type Monitor struct {
	cfg    Config
	engine *policy.Engine // decides, from cfg (rebuilt on reload)
	dryRun bool
	deps   Deps
	log    *slog.Logger

	state State // ownership, persisted; written only by setRecord
	// stateGen counts the writes to state, from 1 (a destination's copy
	// of its record is good while it is unchanged).
	stateGen uint64
	// mem and services: what the monitor remembers between cycles, in
	// memory only. byConfig caches mem's entries by the configuration's
	// [service][server] index (rebuilt after a reload), so that a cycle
	// looks up no destination key.
	mem      map[DestKey]*destMemory
	byConfig [][]*destMemory
	services map[ipvs.ServiceKey]*policy.ServiceState
	noted    map[string]bool // one-time notices already logged
	// schedulers: each service's scheduler at the last read that worked
	// (policy.HashingScheduler: the guard leaves it alone;
	// policy.CountingScheduler: the guard predicts no backlog there)
	schedulers map[ipvs.ServiceKey]string
	conns      connBudget // when the guard may read the connection table again
	started    time.Time
	nodeExp    *nodeexp.Client // scrapes the servers whose source is node_exporter

	// follower: another director of a synchronised group writes; this one
	// reads, reconciles and gathers but neither decides nor writes, and
	// collects operator changes made here in localEdits (TakeEdits).
	follower   bool
	localEdits []replica.Edit
	// shared: this director's own figures and, where it decides, the
	// other directors' (figures.go); nil unless ShareFigures was called.
	shared *sharedFigures

	// opMu serialises cycles and operator requests (drain, undrain, reload).
	opMu sync.Mutex

	// Storage reused by cycles and backlog checks (under opMu): spare is
	// the report entries the next one fills — the report before last's,
	// or with a recorder one it has given back (CycleReport says how long
	// a report stays); held is the latest report's, given back by the
	// recorder but still read until the next cycle; the rest is scratch
	// no report refers to.
	spare   []DestStatus
	held    []DestStatus
	rows    []destRow
	byAddr  map[netip.AddrPort]int
	jobs    []gatherJob
	svs     []policy.Server
	changes []change

	reloaded chan struct{} // Reload signals Reloaded: the interval may have changed

	mu         sync.Mutex // guards last, sync, lastFrames, confirmer and the reload fields
	last       CycleReport
	sync       *SyncStatus
	lastFrames map[string]uint64 // sync frame counts at the last SetSyncStatus
	confirmer  ConfirmFunc       // while running as one of a director pair (SetConfirm)
	reloadedAt time.Time
	reloadErr  error
}

// ErrDryRun means a request would have written a weight, and the monitor
// runs with -dry-run: nothing was written.
var ErrDryRun = errors.New("lvs-monitor runs with -dry-run: nothing written")

// New returns a monitor for cfg (already checked by ParseConfig). It loads
// the persisted ownership state; a missing or corrupt state file is logged
// and the monitor starts safe: every weight-0 destination is then taken for
// an operator drain.
func New(cfg Config, deps Deps, dryRun bool) (*Monitor, error) {
	if deps.Table == nil || deps.Agents == nil || deps.Prober == nil || deps.Store == nil {
		return nil, errors.New("monitor: Table, Agents, Prober and Store are required")
	}
	engine, err := policy.NewEngine(cfg.Policy())
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	m := &Monitor{
		cfg:    cfg,
		engine: engine,
		dryRun: dryRun,
		deps:   deps,
		log:    log,

		mem:        map[DestKey]*destMemory{},
		services:   map[ipvs.ServiceKey]*policy.ServiceState{},
		noted:      map[string]bool{},
		schedulers: map[ipvs.ServiceKey]string{},
		started:    deps.Now(),
		nodeExp:    nodeexp.NewClient(),

		reloaded: make(chan struct{}, 1),
	}
	deps.Metrics.reload(true, float64(deps.Now().Unix())) // the initial load counts as one
	m.stateGen = 1
	st, err := deps.Store.Load()
	var corrupt *CorruptStateError
	switch {
	case err == nil:
		m.state = st
	case errors.Is(err, fs.ErrNotExist):
		log.Info("no state file: starting safe, a weight-0 server counts as drained by the operator (as down by the health checker in a service with health_checker)", "error", err)
		m.state = State{}
	case errors.As(err, &corrupt) && corrupt.Previous != "":
		log.Warn("state file unusable: the records of the previous save are used", "error", err)
		m.state = st
	default:
		log.Warn("state file unusable: starting safe, a weight-0 server counts as drained by the operator (as down by the health checker in a service with health_checker)", "error", err)
		m.state = State{}
	}
	return m, nil
}

// destMemory is what the monitor remembers of one destination between
// cycles: what policy remembers, and what the observation stage does.
type destMemory struct {
	policy policy.ServerState
	seen   observed

	// The destination's ownership record as of write stateGen of
	// Monitor.state (record); 0: not taken.
	rec      policy.DestRecord
	recKnown bool
	recGen   uint64

	// tableAt is where the destination was in its service's table at
	// the last read: the table keeps its order from one read to the
	// next, so it is almost always there again (readTable).
	tableAt int
}

// setRecord writes key's ownership record: every write to m.state goes
// through here, so that no destination's copy (record) outlives it.
func (m *Monitor) setRecord(key DestKey, rec policy.DestRecord) {
	m.state[key] = rec
	m.stateGen++
}

// record returns key's ownership record, from mem's copy when no record
// has been written since it was taken: a steady cycle or check looks up
// none of 10,000 records in the map.
func (m *Monitor) record(mem *destMemory, key DestKey) (policy.DestRecord, bool) {
	if mem.recGen == m.stateGen {
		return mem.rec, mem.recKnown
	}
	rec, known := m.state[key]
	mem.rec, mem.recKnown, mem.recGen = rec, known, m.stateGen
	return rec, known
}

// observed is what the observation stage keeps about one destination
// between cycles.
type observed struct {
	counter    uint32 // last reading of the connection counter
	counterSet bool
	// missing: the destination, or its service, was not in the table at a
	// read since the last one that found it (it will be created anew).
	missing bool
	active  int // active connections at the last reading

	agentOK      time.Time      // last good agent reply
	agentFailing bool           // the last poll failed
	agentStale   bool           // silent longer than agent_expiry at the last poll
	failLogged   time.Time      // when the agent's last failure was warned about
	cpuTime      *agent.CPUTime // the agent's CPU totals at the last good poll

	// nodeExp is a node_exporter source's last scrape, its baseline.
	nodeExp nodeexp.Snapshot
}

// GuardCheck returns the running configuration's backlog check period (0:
// the guard is off).
func (m *Monitor) GuardCheck() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.Guard.Check
}

// Reloaded signals that a reload may have changed the interval or the
// backlog check period: the loop that runs the cycles (scheduler.Run)
// reads Interval and GuardCheck again. One signal stands for any number
// of reloads.
func (m *Monitor) Reloaded() <-chan struct{} { return m.reloaded }

// Interval returns the running configuration's interval.
func (m *Monitor) Interval() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.Interval
}

// Last returns a copy of the report of the latest completed cycle.
func (m *Monitor) Last() CycleReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last.Clone()
}

// noteOnce logs msg once per key for the monitor's lifetime.
func (m *Monitor) noteOnce(key string, level slog.Level, msg string, args ...any) {
	if m.noted[key] {
		return
	}
	m.noted[key] = true
	m.log.Log(context.Background(), level, msg, args...)
}

// saveState persists the records of configured destinations.
func (m *Monitor) saveState() error {
	if m.dryRun {
		return nil
	}
	keep := State{}
	for i := range m.cfg.Services {
		s := &m.cfg.Services[i]
		for j := range s.Servers {
			k := DestKey{Service: s.Key, Dest: s.Servers[j].Addr}
			if rec, ok := m.state[k]; ok {
				keep[k] = rec
			}
		}
	}
	if err := m.deps.Store.Save(keep); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}
