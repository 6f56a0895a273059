// Package monitortest holds the test doubles of a monitor's edges that
// the packages driving a monitor share: agents answered from a map
// (monitor.AgentClient) and a prober with a response time per server
// (monitor.Prober). The director group's tests and the control socket's
// rig (control/controltest) use them. Package monitor's own tests keep
// their doubles: importing this package from inside monitor would be a
// cycle. Both doubles are safe for the concurrent polls and probes of a
// cycle; neither does any I/O.
package monitortest

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/monitor"
)

// Agents answers agent polls from a report per agent address (host:port);
// an address without one fails as a refused connection would.
type Agents struct {
	mu      sync.RWMutex // polls run concurrently: they only read
	reports map[string]agent.Report
}

// NewAgents returns agents that all fail until Set.
func NewAgents() *Agents { return &Agents{reports: map[string]agent.Report{}} }

// Set makes the agent at addr answer rep.
func (a *Agents) Set(addr string, rep agent.Report) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reports[addr] = rep
}

// Fail makes the agent at addr stop answering.
func (a *Agents) Fail(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.reports, addr)
}

// Fetch implements monitor.AgentClient.
func (a *Agents) Fetch(_ context.Context, addr string, _ time.Duration) (agent.Report, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	rep, ok := a.reports[addr]
	if !ok {
		return agent.Report{}, fmt.Errorf("agent %s: connection refused", addr)
	}
	return rep, nil
}

// Prober answers probes with a response time per server (the default for
// a server never Set); a server marked Down fails as a refused connection,
// in the words of the probe's type ("http probe …", "tcp probe …").
type Prober struct {
	mu   sync.Mutex
	def  time.Duration
	rtt  map[netip.AddrPort]time.Duration
	down map[netip.AddrPort]bool
}

// NewProber returns a prober under which every server answers in def.
func NewProber(def time.Duration) *Prober {
	return &Prober{def: def, rtt: map[netip.AddrPort]time.Duration{}, down: map[netip.AddrPort]bool{}}
}

// Set makes rs answer in rtt (and no longer fail).
func (p *Prober) Set(rs netip.AddrPort, rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rtt[rs], p.down[rs] = rtt, false
}

// Down makes rs's probes fail (down) or answer again.
func (p *Prober) Down(rs netip.AddrPort, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down[rs] = down
}

// Probe implements monitor.Prober.
func (p *Prober) Probe(_ context.Context, rs netip.AddrPort, cfg monitor.ProbeConfig, _ time.Duration) (time.Duration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down[rs] {
		kind := cfg.Type
		if kind == "" {
			kind = "tcp"
		}
		return 0, fmt.Errorf("%s probe %s: connection refused", kind, rs)
	}
	if rtt, ok := p.rtt[rs]; ok {
		return rtt, nil
	}
	return p.def, nil
}
