package monitor

import (
	"context"
	"net/http"
	"time"

	"lvs-feedback/agent"
)

// AgentClient fetches a real server's load report from its agent.
type AgentClient interface {
	Fetch(ctx context.Context, addr string) (agent.Report, error)
}

// HTTPAgentClient polls lvs-agent's GET /v1/load over HTTP.
type HTTPAgentClient struct {
	Client *http.Client
}

// NewHTTPAgentClient returns a client that keeps connections to agents
// alive between intervals (one idle connection per agent).
func NewHTTPAgentClient(timeout time.Duration) *HTTPAgentClient {
	tr := &http.Transport{
		Proxy:                 nil,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		DisableCompression:    true,
	}
	return &HTTPAgentClient{Client: &http.Client{Transport: tr, Timeout: timeout}}
}

// Fetch implements AgentClient.
func (c *HTTPAgentClient) Fetch(ctx context.Context, addr string) (agent.Report, error) {
	return agent.Fetch(ctx, c.Client, "http://"+addr)
}
