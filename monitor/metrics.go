package monitor

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"lvs-feedback/internal/buildinfo"
	"lvs-feedback/policy"
)

// Metrics are lvs-monitor's Prometheus series, registered on a registry the
// caller owns (never the global one). docs/metrics.md describes each.
// Labels are stable: service and server name a destination; a state that
// changes is a 0/1 gauge, never a label value.
type Metrics struct {
	weight          *prometheus.GaugeVec
	defaultWeight   *prometheus.GaugeVec
	load            *prometheus.GaugeVec
	input           *prometheus.GaugeVec
	drained         *prometheus.GaugeVec
	down            *prometheus.GaugeVec
	agentStale      *prometheus.GaugeVec
	activeConns     *prometheus.GaugeVec
	inactiveConns   *prometheus.GaugeVec
	probeSeconds    *prometheus.GaugeVec
	agentSeconds    *prometheus.GaugeVec
	agentErrors     *prometheus.CounterVec
	probeErrors     *prometheus.CounterVec
	writes          *prometheus.CounterVec
	writeErrors     *prometheus.CounterVec
	guardCuts       *prometheus.CounterVec
	guardRaises     *prometheus.CounterVec
	backlogHeld     *prometheus.GaugeVec
	connReads       *prometheus.CounterVec
	frozen          *prometheus.GaugeVec
	cycleSeconds    prometheus.Histogram
	syncWriter      prometheus.Gauge
	syncUnreachable *prometheus.GaugeVec
	syncFrames      *prometheus.CounterVec
	reloadOK        prometheus.Gauge
	reloadTime      prometheus.Gauge
	historyErrors   prometheus.Counter
	historyDrops    prometheus.Counter
	guardChecks     prometheus.Counter
	// The fleet series (registered for every director; 0 outside a fleet).
	fleetLeader      prometheus.Gauge
	fleetEtcdUp      prometheus.Gauge
	fleetDirectors   prometheus.Gauge
	fleetDocRevision prometheus.Gauge
	fleetEtcdErrors  prometheus.Counter
	fleetErrorsSeen  uint64
	fleetDocRefused  prometheus.Counter
	fleetDocSeen     uint64
	fleetCtrRefused  prometheus.Counter
	fleetCtrSeen     uint64

	seen map[[2]string]bool // destinations with series, to delete removed ones
}

// Reasons a kernel write did not happen, the label of
// lvs_monitor_kernel_write_errors_total.
const (
	writeErrChanged  = "changed_by_other" // compare-and-set found another weight
	writeErrVanished = "vanished"         // destination removed between read and write
	writeErrOther    = "other"
)

// NewMetrics creates the series and registers them on reg, with
// lvs_monitor_build_info naming this binary's build.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return newMetrics(reg, buildinfo.Read())
}

// newMetrics is NewMetrics for the given build.
func newMetrics(reg prometheus.Registerer, build buildinfo.Info) *Metrics {
	dest := []string{"service", "server"}
	g := func(name, help string, labels ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "lvs_monitor", Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	c := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "lvs_monitor", Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	x := &Metrics{
		weight:          g("server_weight", "Weight of the real server in the IPVS table after the last cycle.", dest...),
		defaultWeight:   g("server_default_weight", "Default weight of the real server (configured, or set by an operator).", dest...),
		load:            g("server_load", "Aggregate load of the real server in the last cycle (0 idle, 1 fully loaded); absent when not computed.", dest...),
		input:           g("server_input", "Normalised input of the real server's aggregate load in the last cycle.", "service", "server", "input"),
		drained:         g("server_drained", "1 when the real server is drained by an operator.", dest...),
		down:            g("server_down", "1 when the real server failed its probe and lvs-monitor set its weight to 0.", dest...),
		agentStale:      g("server_agent_stale", "1 when the real server's agent has been silent longer than agent_expiry.", dest...),
		activeConns:     g("server_active_connections", "Active connections of the real server in the IPVS table.", dest...),
		inactiveConns:   g("server_inactive_connections", "Inactive connections of the real server in the IPVS table.", dest...),
		probeSeconds:    g("server_probe_seconds", "Duration of the last successful response probe.", dest...),
		agentSeconds:    g("server_agent_poll_seconds", "Duration of the last agent poll, successful or not.", dest...),
		agentErrors:     c("agent_poll_errors_total", "Agent polls that failed (no answer, bad reply, timeout).", dest...),
		probeErrors:     c("probe_failures_total", "Response probes that failed.", dest...),
		writes:          c("kernel_writes_total", "Weights written to the IPVS table.", dest...),
		guardCuts:       c("backlog_guard_cuts_total", "Weights cut by the backlog guard between cycles (also counted in kernel_writes_total).", dest...),
		guardRaises:     c("backlog_guard_raises_total", "Weights raised by the backlog guard between cycles: servers far below their share of active connections while their service's backlog grew (also counted in kernel_writes_total).", dest...),
		backlogHeld:     g("server_backlog_held", "1 while the backlog guard holds the real server's weight (cut or raised).", dest...),
		connReads:       c("backlog_guard_conn_reads_total", "Reads of the kernel's connection table by the backlog guard, for servers whose counters looked dead, by result: ok, error, or spaced (skipped after an expensive read).", "result"),
		writeErrors:     c("kernel_write_errors_total", "Weight writes not made: changed_by_other, vanished or other.", "reason"),
		syncUnreachable: g("sync_peer_unreachable", "1 when no sync message reached the peer director for three intervals.", "peer"),
		syncFrames:      c("sync_frames_received_total", "Sync frames received from other directors, by result: accepted or the rejection reason.", "result"),
		frozen:          g("service_frozen", "1 when the service is frozen because too many servers looked unreachable at once.", "service"),
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "lvs_monitor", Name: "cycle_duration_seconds", Help: "Duration of one cycle, from reading the table to persisting state.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		reloadOK:   prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "lvs_monitor", Name: "config_last_reload_successful", Help: "1 when the last configuration (re)load succeeded."}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "lvs_monitor", Name: "config_last_reload_timestamp_seconds", Help: "Unix time of the last configuration (re)load attempt."}),
		seen:       map[[2]string]bool{},
	}
	x.historyErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lvs_monitor", Name: "history_write_errors_total",
		Help: "Cycles whose history records were not all written (a disk error; logged once until writing works again)."})
	x.historyDrops = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lvs_monitor", Name: "history_dropped_cycles_total",
		Help: "Cycles not recorded in the history because the recorder was still writing earlier ones."})
	x.guardChecks = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lvs_monitor", Name: "backlog_guard_checks_total",
		Help: "Backlog checks of the IPVS table made between cycles."})
	reg.MustRegister(x.historyErrors, x.historyDrops, x.guardChecks)
	x.syncWriter = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "lvs_monitor", Name: "sync_writer", Help: "1 when this director writes the weights of its synchronised group (or runs alone)."})
	reg.MustRegister(x.cycleSeconds, x.reloadOK, x.reloadTime, x.syncWriter)
	gauge := func(name, help string) prometheus.Gauge {
		v := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "lvs_monitor", Name: name, Help: help})
		reg.MustRegister(v)
		return v
	}
	x.fleetLeader = gauge("fleet_leader", "1 when this director leads its etcd fleet (decides and writes the fleet's weights).")
	x.fleetEtcdUp = gauge("fleet_etcd_up", "1 when this fleet director's last etcd operation succeeded; 0 while etcd is unreachable (the table is held).")
	x.fleetDirectors = gauge("fleet_directors", "Directors of the fleet publishing counters (with a live etcd lease), as last read.")
	x.fleetDocRevision = gauge("fleet_document_revision", "etcd revision of the fleet's desired-state document last read or written.")
	x.fleetEtcdErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lvs_monitor", Name: "fleet_etcd_errors_total",
		Help: "Failed etcd operations of this fleet director (unreachable, lease lost, malformed values read)."})
	reg.MustRegister(x.fleetEtcdErrors)
	x.fleetDocRefused = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lvs_monitor", Name: "fleet_documents_refused_total",
		Help: "State documents this fleet director refused (malformed, not the elected leader's in its term, or a weight outside the configured range); the table is held."})
	x.fleetCtrRefused = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "lvs_monitor", Name: "fleet_counters_refused_total",
		Help: "Other directors' counters the fleet leader left out of its sums: untrusted records (a director not listed, or not under a live lease) and implausible figures (per server)."})
	reg.MustRegister(x.fleetDocRefused, x.fleetCtrRefused)
	revision := build.Revision
	if revision == "" {
		revision = "unknown"
	}
	g("build_info", "Always 1; its labels name the build of this lvs-monitor: version (the package's, the module's tag or pseudo-version, or (devel)), revision (the commit, or unknown) and goversion.",
		"version", "revision", "goversion").WithLabelValues(build.Version, revision, build.GoVersion).Set(1)
	x.syncWriter.Set(1)
	x.reloadOK.Set(1)
	for _, r := range []string{writeErrChanged, writeErrVanished, writeErrOther} {
		x.writeErrors.WithLabelValues(r)
	}
	return x
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// observeCycle updates the series from one cycle's report.
func (x *Metrics) observeCycle(rep CycleReport) {
	if x == nil {
		return
	}
	x.cycleSeconds.Observe(rep.Duration.Seconds())
	now := map[[2]string]bool{}
	frozen := map[string]bool{}
	for _, d := range rep.Dests {
		svc, srv := d.Key.Service.String(), d.Key.Dest.String()
		now[[2]string{svc, srv}] = true
		frozen[svc] = frozen[svc] || d.Decision.Trace.Frozen
		x.weight.WithLabelValues(svc, srv).Set(float64(d.KernelWeight))
		x.defaultWeight.WithLabelValues(svc, srv).Set(float64(d.DefaultWeight))
		x.drained.WithLabelValues(svc, srv).Set(b2f(d.State == policy.DrainedByOperator))
		x.down.WithLabelValues(svc, srv).Set(b2f(d.State == policy.Down))
		x.agentStale.WithLabelValues(svc, srv).Set(b2f(d.AgentStale))
		x.activeConns.WithLabelValues(svc, srv).Set(float64(d.ActiveConns))
		x.backlogHeld.WithLabelValues(svc, srv).Set(b2f(d.Decision.Trace.Guard != nil && d.Decision.Trace.Guard.Held > 0))
		x.inactiveConns.WithLabelValues(svc, srv).Set(float64(d.InactiveConns))
		if load := d.Decision.Trace.Load; math.IsNaN(load) {
			x.load.DeleteLabelValues(svc, srv)
			x.input.DeletePartialMatch(prometheus.Labels{"service": svc, "server": srv})
		} else {
			x.load.WithLabelValues(svc, srv).Set(load)
			in := d.Decision.Trace.Inputs
			x.input.WithLabelValues(svc, srv, "input").Set(in.Input)
			x.input.WithLabelValues(svc, srv, "response").Set(in.Response)
			for _, f := range []struct {
				name string
				v    float64
			}{{"cpu", in.CPU}, {"memory", in.Memory}, {"disk", in.Disk}, {"process", in.Process}} {
				if d.Decision.Trace.DirectorOnly { // not measured: no series, rather than 0
					x.input.DeleteLabelValues(svc, srv, f.name)
				} else {
					x.input.WithLabelValues(svc, srv, f.name).Set(f.v)
				}
			}
		}
		if d.ProbeErr != nil {
			x.probeErrors.WithLabelValues(svc, srv).Inc()
		} else if d.ProbeRTT > 0 {
			x.probeSeconds.WithLabelValues(svc, srv).Set(d.ProbeRTT.Seconds())
		}
		if d.AgentDuration > 0 {
			x.agentSeconds.WithLabelValues(svc, srv).Set(d.AgentDuration.Seconds())
		}
		if d.AgentErr != nil {
			x.agentErrors.WithLabelValues(svc, srv).Inc()
		} else {
			x.agentErrors.WithLabelValues(svc, srv) // exists from the start, at 0
		}
		x.probeErrors.WithLabelValues(svc, srv)
		if d.Outcome.Wrote {
			x.writes.WithLabelValues(svc, srv).Inc()
		} else {
			x.writes.WithLabelValues(svc, srv)
		}
		x.guardCuts.WithLabelValues(svc, srv)
		x.guardRaises.WithLabelValues(svc, srv)
	}
	for svc, f := range frozen {
		x.frozen.WithLabelValues(svc).Set(b2f(f))
	}
	// Destinations gone from the configuration or the table lose their series.
	for k := range x.seen {
		if !now[k] {
			x.forget(k[0], k[1])
		}
	}
	x.seen = now
}

func (x *Metrics) forget(svc, srv string) {
	for _, v := range []*prometheus.GaugeVec{x.weight, x.defaultWeight, x.load, x.drained, x.down, x.agentStale, x.activeConns, x.inactiveConns, x.probeSeconds, x.agentSeconds, x.backlogHeld} {
		v.DeleteLabelValues(svc, srv)
	}
	x.input.DeletePartialMatch(prometheus.Labels{"service": svc, "server": srv})
	for _, v := range []*prometheus.CounterVec{x.agentErrors, x.probeErrors, x.writes, x.guardCuts, x.guardRaises} {
		v.DeleteLabelValues(svc, srv)
	}
}

// observeSync updates the sync series; prev is the frame counts at the
// previous call.
func (x *Metrics) observeSync(s SyncStatus, prev map[string]uint64) {
	if x == nil {
		return
	}
	x.syncWriter.Set(b2f(s.Writer))
	for _, p := range s.Peers {
		x.syncUnreachable.WithLabelValues(p.Address).Set(b2f(p.Unreachable))
	}
	for result, n := range s.Frames {
		if n > prev[result] {
			x.syncFrames.WithLabelValues(result).Add(float64(n - prev[result]))
		}
	}
}

// guardChanged records what a backlog check between cycles did to one
// server (a cycle's report carries its own): a write — a cut or a raise,
// which hold the server (gs after it) — and whether it is held now.
// guardCheck counts one backlog check.
func (x *Metrics) guardCheck() {
	if x == nil {
		return
	}
	x.guardChecks.Inc()
}

// connRead counts one read (or skipped read) of the connection table.
func (x *Metrics) connRead(result string) {
	if x == nil {
		return
	}
	x.connReads.WithLabelValues(result).Inc()
}

func (x *Metrics) guardChanged(k DestKey, wrote bool, gs policy.GuardState) {
	if x == nil {
		return
	}
	svc, srv := k.Service.String(), k.Dest.String()
	if wrote {
		x.writes.WithLabelValues(svc, srv).Inc()
		switch {
		case gs.Holding() && gs.Raised:
			x.guardRaises.WithLabelValues(svc, srv).Inc()
		case gs.Holding():
			x.guardCuts.WithLabelValues(svc, srv).Inc()
		}
	}
	x.backlogHeld.WithLabelValues(svc, srv).Set(b2f(gs.Holding()))
}

func (x *Metrics) writeError(reason string) {
	if x != nil {
		x.writeErrors.WithLabelValues(reason).Inc()
	}
}

func (x *Metrics) reload(ok bool, unix float64) {
	if x != nil {
		x.reloadOK.Set(b2f(ok))
		x.reloadTime.Set(unix)
	}
}

func (x *Metrics) historyError() {
	if x != nil {
		x.historyErrors.Inc()
	}
}

func (x *Metrics) historyDropped() {
	if x != nil {
		x.historyDrops.Inc()
	}
}

// observeFleet updates the fleet series (an etcd fleet director).
func (x *Metrics) observeFleet(s FleetStatus) {
	if x == nil {
		return
	}
	x.syncWriter.Set(b2f(s.Leader))
	x.fleetLeader.Set(b2f(s.Leader))
	x.fleetEtcdUp.Set(b2f(s.EtcdUp))
	x.fleetDirectors.Set(float64(s.Directors))
	x.fleetDocRevision.Set(float64(s.DocRevision))
	if s.EtcdErrors > x.fleetErrorsSeen {
		x.fleetEtcdErrors.Add(float64(s.EtcdErrors - x.fleetErrorsSeen))
		x.fleetErrorsSeen = s.EtcdErrors
	}
	if s.DocumentsRefused > x.fleetDocSeen {
		x.fleetDocRefused.Add(float64(s.DocumentsRefused - x.fleetDocSeen))
		x.fleetDocSeen = s.DocumentsRefused
	}
	if s.CountersRefused > x.fleetCtrSeen {
		x.fleetCtrRefused.Add(float64(s.CountersRefused - x.fleetCtrSeen))
		x.fleetCtrSeen = s.CountersRefused
	}
}
