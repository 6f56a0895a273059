// Package controltest runs a real lvs-monitor core for tests of the control
// protocol and lvsctl: a monitor.Monitor on the in-memory IPVS table
// (ipvs.Mem) with stub agents and probes, a Prometheus registry, its
// configuration in a file, and a control.Server on a real unix socket in a
// temporary directory.
package controltest

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lvs-feedback/agent"
	"lvs-feedback/control"
	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
	"lvs-feedback/monitor/monitortest"
)

// Config is a configuration for the rig: one service, three servers of
// default weight 10 whose agents are at RIP:9771, the LVS web-cluster
// coefficients, HTTP probes with a 100 ms reference. STATE_DIR and SOCKET
// are replaced by the rig's.
const Config = `
interval = "1s"
agent_timeout = "500ms"
probe_timeout = "500ms"
state_dir = "STATE_DIR"
metrics_listen = ""
control_socket = "SOCKET"

[coefficients]
input    = 0.1
cpu      = 0.3
memory   = 0.1
disk     = 0.1
response = 0.3
process  = 0.1

[weight]
controller = "lvs"
gain      = 5.0
target    = 0.95
scale     = 10
min       = 1
threshold = 1

[[service]]
address = "192.0.2.10:80/tcp"
[service.probe]
type      = "http"
path      = "/"
reference = "100ms"

[[service.server]]
address = "198.51.100.11:80"
weight  = 10
[[service.server]]
address = "198.51.100.12:80"
weight  = 10
[[service.server]]
address = "198.51.100.13:80"
weight  = 10
`

// The rig's service and servers.
var (
	Service = ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.MustParseAddrPort("192.0.2.10:80")}
	A       = netip.MustParseAddrPort("198.51.100.11:80")
	B       = netip.MustParseAddrPort("198.51.100.12:80")
	C       = netip.MustParseAddrPort("198.51.100.13:80")
	// Unlisted is in the IPVS table but not in the configuration.
	Unlisted = netip.MustParseAddrPort("198.51.100.99:80")
)

// AgentOf returns the agent address of a rig server.
func AgentOf(rs netip.AddrPort) string { return netip.AddrPortFrom(rs.Addr(), 9771).String() }

// Rig is a running monitor core with its control server.
type Rig struct {
	T          testing.TB
	Dir        string
	ConfigPath string
	Socket     string
	Table      *ipvs.Mem
	Agents     *Agents
	Prober     *Prober
	Registry   *prometheus.Registry
	Monitor    *monitor.Monitor
	Server     *control.Server
	// History records every cycle in Dir ([history] of the configuration;
	// nil when it is off); Cycle waits until its records are written.
	History *monitor.Recorder
	// Reload is the server's reload function (control.FileReloader of
	// ConfigPath), as SIGHUP calls it in lvs-monitor.
	Reload control.ReloadFunc

	mu      sync.Mutex
	now     time.Time
	cycles  int
	cycleMu sync.Mutex
}

// New starts a rig with the configuration text (Config if empty).
func New(t testing.TB, config string) *Rig {
	t.Helper()
	if config == "" {
		config = Config
	}
	dir := t.TempDir()
	r := &Rig{
		T:          t,
		Dir:        dir,
		ConfigPath: filepath.Join(dir, "lvs-monitor.toml"),
		Socket:     filepath.Join(dir, "control.sock"),
		Table:      ipvs.NewMem(),
		Agents:     &Agents{monitortest.NewAgents()},
		Prober:     &Prober{monitortest.NewProber(0)},
		Registry:   prometheus.NewRegistry(),
		now:        time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	}
	r.WriteConfig(config)
	cfg, err := monitor.LoadConfig(r.ConfigPath)
	must(t, err)
	must(t, r.Table.AddService(Service, "wrr"))
	for _, rs := range []netip.AddrPort{A, B, C, Unlisted} {
		must(t, r.Table.AddDestination(Service, rs, 10))
		r.Agents.Set(rs, AtTarget) // with INPUT 1 and RESPONSE 0.95: load 0.95
		r.Prober.Set(rs, 95*time.Millisecond)
	}
	store, err := monitor.NewFileStore(cfg.StateDir)
	must(t, err)
	metrics := monitor.NewMetrics(r.Registry)
	if cfg.History.Enabled {
		r.History, err = monitor.OpenRecorder(cfg.StateDir, cfg.History, nil, metrics)
		must(t, err)
		t.Cleanup(func() { r.History.Close() })
	}
	r.Monitor, err = monitor.New(cfg, monitor.Deps{
		Table: r.Table, Agents: r.Agents, Prober: r.Prober, Store: store,
		Metrics: metrics, Now: r.Now, History: r.History,
	}, false)
	must(t, err)
	r.Reload = control.FileReloader(r.ConfigPath, r.Monitor)
	r.Server, err = control.Listen(control.Options{
		Path: r.Socket, Monitor: r.Monitor, Reload: r.Reload,
		Conns: r.Table, Now: r.Now,
	})
	must(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Server.Serve(); err != nil {
			t.Errorf("control server: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.Server.Shutdown(ctx); err != nil {
			t.Errorf("control server shutdown: %v", err)
		}
		<-done
	})
	return r
}

// WriteConfig writes the configuration file (STATE_DIR and SOCKET
// replaced).
func (r *Rig) WriteConfig(text string) {
	text = strings.ReplaceAll(text, "STATE_DIR", r.Dir)
	text = strings.ReplaceAll(text, "SOCKET", r.Socket)
	must(r.T, os.WriteFile(r.ConfigPath, []byte(text), 0o600))
}

// Now is the monitor's clock: it moves only with Cycle and Advance.
func (r *Rig) Now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

// Advance moves the clock.
func (r *Rig) Advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(d)
}

// Cycle runs one cycle, one interval after the previous one, and hands its
// report to the control server as lvs-monitor's main loop does.
func (r *Rig) Cycle() monitor.CycleReport {
	r.T.Helper()
	r.cycleMu.Lock()
	defer r.cycleMu.Unlock()
	if r.cycles > 0 {
		r.Advance(r.Monitor.Status().Config.Interval)
	}
	r.cycles++
	rep, err := r.Monitor.Cycle(context.Background())
	if err != nil {
		r.T.Errorf("cycle: %v", err)
	}
	if r.History != nil {
		r.History.Flush()
	}
	return rep
}

// Loop runs cycles every period until ctx ends (the clock advances one
// interval per cycle), like lvs-monitor's main loop.
func (r *Rig) Loop(ctx context.Context, period time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			r.Cycle()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// Weight returns a server's kernel weight.
func (r *Rig) Weight(rs netip.AddrPort) int {
	w, err := r.Table.Weight(Service, rs)
	must(r.T, err)
	return w
}

// AtTarget is what every agent reports at the start: with an even share
// of connections (INPUT 1) and a 95 ms probe (RESPONSE 0.95) the aggregate
// load is the target, 0.95, and the weights stay.
var AtTarget = Load{CPU: 0.95, Memory: 0.9, Disk: 0.9, Processes: 1}

// Load is what a stub agent reports, with the raw figures it is computed
// from filled in consistently.
type Load struct {
	CPU, Memory, Disk, Processes float64
}

// Agents are the rig's agents (monitortest.Agents), addressed by the
// server they run on (AgentOf).
type Agents struct{ *monitortest.Agents }

// Set makes rs's agent report l, from a 4-CPU host with 16 GiB.
func (a *Agents) Set(rs netip.AddrPort, l Load) {
	const total = 16 << 30
	a.SetReport(rs, agent.Report{
		Schema: agent.SchemaVersion, Time: time.Now(), Source: "host",
		CPU: l.CPU, Memory: l.Memory, Disk: l.Disk, Processes: l.Processes,
		Raw: agent.Raw{
			WindowSeconds: 1, CPUs: 4, CPUBusy: l.CPU,
			MemTotalBytes: total, MemAvailableBytes: uint64((1 - l.Memory) * total),
			DiskSpaceUsed: map[string]float64{"/": l.Disk}, DiskIOBusy: l.Disk / 4, DiskIODevice: "vda",
			RunnableTasks: int(l.Processes*4 + 0.5),
		},
	})
}

// SetReport makes rs's agent report rep as it is.
func (a *Agents) SetReport(rs netip.AddrPort, rep agent.Report) { a.Agents.Set(AgentOf(rs), rep) }

// Fail makes rs's agent stop answering.
func (a *Agents) Fail(rs netip.AddrPort) { a.Agents.Fail(AgentOf(rs)) }

// Prober is the rig's prober (monitortest.Prober, HTTP probes).
type Prober struct{ *monitortest.Prober }

// Down makes rs's probe fail.
func (p *Prober) Down(rs netip.AddrPort) { p.Prober.Down(rs, true) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
