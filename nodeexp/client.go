package nodeexp

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"lvs-feedback/agent"
)

// DefaultPort is node_exporter's port, used when a server names no URL.
const DefaultPort = 9100

// Client scrapes node_exporter over HTTP. The zero value is not usable;
// build one with NewClient.
type Client struct {
	http *http.Client
	now  func() time.Time
}

// NewClient returns a client that, like the monitor's lvs-agent client,
// opens a fresh connection per scrape and keeps none between intervals,
// and asks for no compression: the size bound applies to the bytes
// parsed, and a scrape of ~20 KB every few seconds gains nothing from
// gzip but the exporter's CPU time. It follows no redirect. Each scrape is bounded by the timeout
// the caller passes; the client has none of its own.
func NewClient() *Client {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}
	// node_exporter never redirects /metrics: a redirect is answered as
	// its status, not followed to wherever it points.
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{http: &http.Client{Transport: tr, CheckRedirect: noRedirect}, now: time.Now}
}

// TargetURL checks a server's node_exporter URL, or builds the default
// one, http://ADDR:9100/metrics, from the server's address when agent is
// empty. The URL must be http or https with a host and a path, and no
// user information (credentials do not belong in the configuration file's
// log lines).
func TargetURL(agentURL string, addr netip.Addr) (string, error) {
	if agentURL == "" {
		if !addr.IsValid() {
			return "", nil // the server's address is wrong, and said so elsewhere
		}
		return "http://" + netip.AddrPortFrom(addr, DefaultPort).String() + "/metrics", nil
	}
	u, err := url.Parse(agentURL)
	if err != nil {
		return "", fmt.Errorf("want the node_exporter URL, e.g. \"http://10.0.0.5:9100/metrics\": %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("want an http:// or https:// URL of node_exporter, e.g. \"http://10.0.0.5:9100/metrics\", got %q", agentURL)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("URL %q has no host", agentURL)
	case u.User != nil:
		return "", fmt.Errorf("URL %q carries credentials; node_exporter sources take none", agentURL)
	case u.Path == "" || u.Path == "/":
		return "", fmt.Errorf("URL %q has no path (node_exporter serves /metrics)", agentURL)
	case u.Fragment != "":
		return "", fmt.Errorf("URL %q has a fragment", agentURL)
	}
	return agentURL, nil
}

// Scrape GETs target and parses the reply with Parse. It requires status
// 200 (otherwise an *agent.StatusError) and the text format's content
// type. ctx bounds the whole exchange. The snapshot's Target and At are
// set.
func (c *Client) Scrape(ctx context.Context, target string) (Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return Snapshot{}, err
	}
	// The text format only: no OpenMetrics, no protobuf.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.http.Do(req)
	if err != nil {
		return Snapshot{}, fmt.Errorf("get metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return Snapshot{}, &agent.StatusError{Code: resp.StatusCode, Message: strings.ToValidUTF8(strings.TrimSpace(string(b)), "?")}
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "text/plain" {
		return Snapshot{}, fmt.Errorf("content type %q, want text/plain (the Prometheus text format)", ct)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		return Snapshot{}, err
	}
	s.Target, s.At = target, c.now()
	return s, nil
}

// Poll scrapes target within timeout and derives the server's loads from
// this scrape and *base, the previous one (Derive, with maxAge). A scrape
// that parses becomes the new *base, whether or not it could be compared
// with the old one; a failed scrape leaves *base as it was. Errors start
// with "node_exporter TARGET:"; one that wraps ErrNoBaseline means the
// exporter answered well but nothing could be measured yet.
func (c *Client) Poll(ctx context.Context, target string, timeout, maxAge time.Duration, base *Snapshot) (agent.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cur, err := c.Scrape(ctx, target)
	if err != nil {
		return agent.Report{}, fmt.Errorf("node_exporter %s: %w", target, err)
	}
	prev := *base
	*base = cur
	r, err := Derive(prev, cur, maxAge)
	if err != nil {
		return agent.Report{}, fmt.Errorf("node_exporter %s: %w", target, err)
	}
	return r, nil
}
