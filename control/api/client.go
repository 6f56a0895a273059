package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// DefaultSocket is where lvs-monitor listens unless control_socket says
// otherwise.
const DefaultSocket = "/run/lvs-monitor/control.sock"

// maxReply bounds a reply body (a status of 10,000 servers is a few MB).
const maxReply = 64 << 20

// Client talks to lvs-monitor's control socket.
type Client struct {
	path string
	hc   *http.Client
}

// NewClient returns a client for the socket at path. timeout bounds each
// request (a drain waits for a running cycle: allow an interval or two).
func NewClient(path string, timeout time.Duration) *Client {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:    1,
		IdleConnTimeout: 10 * time.Second,
	}
	return &Client{path: path, hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// UnreachableError means the client could not talk to lvs-monitor at all
// (no socket, no permission, nobody listening).
type UnreachableError struct {
	Path string
	Err  error
}

func (e *UnreachableError) Error() string {
	hint := "is lvs-monitor running? (systemctl status lvs-monitor)"
	switch {
	case errors.Is(e.Err, fs.ErrPermission):
		hint = "the control socket is root's: run lvsctl as root"
	case errors.Is(e.Err, fs.ErrNotExist):
		hint = "no socket there: is lvs-monitor running, and is -socket the control_socket of its configuration?"
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		hint = "nobody is listening: lvs-monitor is not running (a stale socket is left)"
	}
	return fmt.Sprintf("cannot reach lvs-monitor at %s: %v\n%s", e.Path, e.Err, hint)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := "http://lvs-monitor" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return &UnreachableError{Path: c.path, Err: op.Err}
		}
		return fmt.Errorf("lvs-monitor at %s: %w", c.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return fmt.Errorf("lvs-monitor at %s: reading the reply: %w", c.path, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Code, e.Message = CodeInternal, fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(data))
		}
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("lvs-monitor at %s: bad reply: %w", c.path, err)
	}
	return nil
}

// Status returns every configured service and server at the last cycle.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &st)
	return st, err
}

// Drain sets a real server's weight to 0 as an operator drain.
func (c *Client) Drain(ctx context.Context, service, server string) (Ack, error) {
	var a Ack
	err := c.do(ctx, http.MethodPost, "/v1/drain", nil, Target{Service: service, Server: server}, &a)
	return a, err
}

// Undrain gives a drained or down server its default weight back (with
// slow start).
func (c *Client) Undrain(ctx context.Context, service, server string) (Ack, error) {
	var a Ack
	err := c.do(ctx, http.MethodPost, "/v1/undrain", nil, Target{Service: service, Server: server}, &a)
	return a, err
}

// Connections returns a server's weight and connection counts now.
func (c *Client) Connections(ctx context.Context, service, server string) (Connections, error) {
	var r Connections
	err := c.do(ctx, http.MethodGet, "/v1/connections", url.Values{"service": {service}, "server": {server}}, nil, &r)
	return r, err
}

// Explain returns the computation of a server's weight in the last cycle.
func (c *Client) Explain(ctx context.Context, service, server string) (Explanation, error) {
	var e Explanation
	err := c.do(ctx, http.MethodGet, "/v1/explain", url.Values{"service": {service}, "server": {server}}, nil, &e)
	return e, err
}

// Reload makes lvs-monitor re-read its configuration file. A refused file
// is an *Error with CodeReloadFailed; the running configuration stays.
func (c *Client) Reload(ctx context.Context) (Reload, error) {
	var r Reload
	err := c.do(ctx, http.MethodPost, "/v1/reload", nil, struct{}{}, &r)
	return r, err
}
