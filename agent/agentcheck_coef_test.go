package agent_test

import (
	"math"
	"testing"

	"lvs-feedback/agent"
	"lvs-feedback/monitor"
)

// TestAgentCheckPercentFollowsMonitorDefaults: the percentage's weights are
// the monitor's default coefficients for the agent's four figures,
// renormalised; a change of those defaults must be a change here too.
func TestAgentCheckPercentFollowsMonitorDefaults(t *testing.T) {
	c := monitor.DefaultConfig().Coefficients
	sum := c.CPU + c.Memory + c.Disk + c.Process
	for _, r := range []agent.Report{
		{CPU: 0.62},
		{Memory: 0.62},
		{Disk: 0.62},
		{Processes: 0.62},
		{CPU: 0.3, Memory: 0.2, Disk: 0.7, Processes: 0.9},
	} {
		load := (c.CPU*r.CPU + c.Memory*r.Memory + c.Disk*r.Disk + c.Process*r.Processes) / sum
		want := int(math.Round(100 * (1 - load)))
		if got := agent.AgentCheckPercent(r); got != want {
			t.Errorf("%+v: %d%%, want %d%% from the monitor's defaults %+v", r, got, want, c)
		}
	}
}
