package monitor

import (
	"context"
	"net/http"
	"time"

	"lvs-feedback/agent"
)

// AgentClient fetches a real server's load report from its agent, giving
// up after timeout (agent_timeout) or when ctx ends.
type AgentClient interface {
	Fetch(ctx context.Context, addr string, timeout time.Duration) (agent.Report, error)
}

// HTTPAgentClient polls lvs-agent's GET /v1/load over HTTP.
type HTTPAgentClient struct {
	Client *http.Client
}

// NewHTTPAgentClient returns a client that opens a fresh connection for
// every poll and keeps none open between intervals: kept-alive connections
// cost goroutines and buffers per agent and go stale when agents restart,
// which a poll every few seconds does not need (docs/developer/scale.md has the
// measurement).
//
// Each poll is bounded by the timeout the monitor passes (agent_timeout,
// re-read at every cycle, so a reload takes effect); the client has no
// timeout of its own.
func NewHTTPAgentClient() *HTTPAgentClient {
	tr := &http.Transport{
		Proxy:              nil,
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	return &HTTPAgentClient{Client: &http.Client{Transport: tr}}
}

// Fetch implements AgentClient.
func (c *HTTPAgentClient) Fetch(ctx context.Context, addr string, timeout time.Duration) (agent.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return agent.Fetch(ctx, c.Client, "http://"+addr)
}
