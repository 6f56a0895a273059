package scheduler

import (
	"net/netip"
	"testing"
	"time"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/monitor/monitortest"
)

// The edges the group tests give their monitors: agents answered from a
// map, probes that always answer, one service of three real servers, and
// a configuration on which the LVS formula's weights follow CPU alone.

// stubAgents are monitortest's agents, set by agent address to a report
// of CPU alone.
type stubAgents struct{ *monitortest.Agents }

func newStubAgents() *stubAgents { return &stubAgents{monitortest.NewAgents()} }

func (s *stubAgents) set(addr string, cpu float64) {
	s.Set(addr, agent.Report{Schema: agent.SchemaVersion, Time: time.Now(), CPU: cpu})
}

// newStubProber answers every probe in 1 ms.
func newStubProber() *monitortest.Prober { return monitortest.NewProber(time.Millisecond) }

var (
	svcKey = ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.MustParseAddrPort("192.0.2.10:80")}
	rsA    = netip.MustParseAddrPort("198.51.100.11:80")
	rsB    = netip.MustParseAddrPort("198.51.100.12:80")
	rsC    = netip.MustParseAddrPort("198.51.100.13:80")
)

func agentOf(rs netip.AddrPort) string { return netip.AddrPortFrom(rs.Addr(), 9771).String() }

// cpuOnlyConfig runs the LVS formula on CPU alone, so that expected
// weights are easy to compute by hand.
const cpuOnlyConfig = `
interval = "1s"
agent_timeout = "500ms"
probe_timeout = "500ms"
[availability]
fall = 1
rise = 1
[weight]
controller = "lvs"
[coefficients]
input = 0.0
cpu = 1.0
memory = 0.0
disk = 0.0
response = 0.0
process = 0.0
[[service]]
address = "192.0.2.10:80/tcp"
[[service.server]]
address = "198.51.100.11:80"
weight = 10
[[service.server]]
address = "198.51.100.12:80"
weight = 10
[[service.server]]
address = "198.51.100.13:80"
weight = 10
`

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
