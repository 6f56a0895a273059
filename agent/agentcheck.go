package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// HAProxy's agent-check (its configuration manual, "agent-check" under the
// server options): HAProxy connects, reads one line of words and applies
// them; "75%" sets the server's weight to 75 % of its configured weight,
// "drain" and "ready" set and clear its administrative drain. See
// docs/haproxy.md for what this agent answers and why.

// Weights of the report's loads in the agent-check percentage: the
// monitor's default coefficients for the figures an agent has (cpu 0.3,
// memory 0.1, disk 0.1, process 0.1), divided by their sum 0.6 so that
// they sum to 1. The input share and the response time (the other 0.4)
// are measured on the director and have no counterpart here.
const (
	agentCheckCPUWeight       = 0.3 / 0.6
	agentCheckMemoryWeight    = 0.1 / 0.6
	agentCheckDiskWeight      = 0.1 / 0.6
	agentCheckProcessesWeight = 0.1 / 0.6
)

// Bounds of one agent-check connection. The line is a few bytes written
// at once, and HAProxy closes as soon as it has read it; what HAProxy may
// send first (its agent-send string) is read only to be dropped.
const (
	agentCheckTimeout      = 2 * time.Second
	agentCheckDiscardBytes = 1 << 10
)

// AgentCheckReadyWindow is how long the agent keeps adding "ready" to its
// answers after it started and after it last answered "drain". HAProxy
// leaves DRAIN only on "ready", but "ready" also lifts a drain an operator
// set on HAProxy's own CLI, so the agent says it only while one of its own
// drains may still be in force somewhere: each front end polls at least
// once within the window at any sane agent-inter (HAProxy's default: 2 s).
const AgentCheckReadyWindow = time.Minute

// AgentCheckPercent maps a report to the weight percentage an agent-check
// answer carries: the share of capacity left, 100 × (1 − load), where load
// is the monitor's default composite of the report's four loads (see
// agentCheckCPUWeight). The result is clamped to [1, 100]: above 100 would
// raise a server beyond its configured weight, and 0 would drain it, which
// only an operator decides — a farm that is overloaded everywhere keeps
// serving, at 1 % each.
func AgentCheckPercent(r Report) int {
	load := agentCheckCPUWeight*r.CPU + agentCheckMemoryWeight*r.Memory +
		agentCheckDiskWeight*r.Disk + agentCheckProcessesWeight*r.Processes
	if !(load >= 0) { // NaN: not a figure (DecodeReport and the sampler never let one through)
		return 100
	}
	return int(max(1, min(100, math.Round(100*(1-load)))))
}

// AgentCheckLine is the whole answer to one agent-check connection, with
// its newline:
//
//   - "drain" while drain is set (the drain file exists);
//   - otherwise the percentage of rep, or "100%" when the sample is
//     missing, failed or stale (sampleErr not nil): without figures the
//     server gets its configured weight, as if it had no agent, and is
//     never marked down — HAProxy's health check says whether it is up;
//   - preceded by "ready " when ready is set, to lift an earlier drain.
func AgentCheckLine(rep Report, sampleErr error, drain, ready bool) string {
	if drain {
		return "drain\n"
	}
	pct := 100
	if sampleErr == nil {
		pct = AgentCheckPercent(rep)
	}
	line := strconv.Itoa(pct) + "%\n"
	if ready {
		line = "ready " + line
	}
	return line
}

// AgentCheckOptions configure an [AgentCheck].
type AgentCheckOptions struct {
	// DrainFile, when set, is an absolute path: while a file exists there
	// the agent answers "drain". Its directory must exist.
	DrainFile string
	// MaxConns bounds the open connections, as -max-conns does for the
	// HTTP server (at least 1).
	MaxConns int
}

// AgentCheck answers HAProxy's agent-check from a [Sampler]'s latest
// report: one line per connection, then the connection is closed. It
// samples nothing itself.
type AgentCheck struct {
	s    *Sampler
	opts AgentCheckOptions
	log  *slog.Logger
	now  func() time.Time

	limiter atomic.Pointer[ConnLimiter] // set by Serve

	mu           sync.Mutex
	readyUntil   time.Time
	lastDrainErr string // the last drain-file error logged, so it is logged once
}

// NewAgentCheck returns an agent-check server for s. A nil log discards
// logging.
func NewAgentCheck(s *Sampler, opts AgentCheckOptions, log *slog.Logger) (*AgentCheck, error) {
	if s == nil {
		return nil, errors.New("agent-check: nil sampler")
	}
	if opts.MaxConns < 1 {
		return nil, fmt.Errorf("agent-check: max conns %d, want at least 1", opts.MaxConns)
	}
	if f := opts.DrainFile; f != "" {
		if !filepath.IsAbs(f) {
			return nil, fmt.Errorf("drain file %q is not an absolute path", f)
		}
		if st, err := os.Stat(filepath.Dir(f)); err != nil {
			return nil, fmt.Errorf("drain file %q: %w", f, err)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("drain file %q: %s is not a directory", f, filepath.Dir(f))
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &AgentCheck{s: s, opts: opts, log: log, now: time.Now}
	a.readyUntil = a.now().Add(AgentCheckReadyWindow)
	return a, nil
}

// Serve answers the connections of ln until ctx is done, then closes ln
// and returns nil once every connection in progress has finished. At most
// MaxConns connections are open at once; at the limit the oldest of the
// source address holding the most is closed (see [ConnLimiter]).
func (a *AgentCheck) Serve(ctx context.Context, ln net.Listener) error {
	limited := newConnLimiter(ln, a.opts.MaxConns, a.log.With("listener", "agent-check"))
	a.limiter.Store(limited)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 5 * time.Millisecond
	for {
		c, err := limited.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("agent-check: %w", err)
			}
			// Out of descriptors and the like: wait and try again, as
			// net/http does, rather than spin or give up.
			a.log.Warn("agent-check: accept failed", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		wg.Go(func() { a.serveConn(c) })
	}
}

// Stats returns the connection limiter's counts; zero before Serve.
func (a *AgentCheck) Stats() ConnStats {
	if l := a.limiter.Load(); l != nil {
		return l.Stats()
	}
	return ConnStats{}
}

// serveConn writes the answer and closes c.
func (a *AgentCheck) serveConn(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(agentCheckTimeout))
	line := a.Answer()
	if _, err := io.WriteString(c, line); err != nil {
		a.log.Debug("agent-check: write failed", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	a.log.Debug("agent-check answered", "remote", c.RemoteAddr().String(), "line", line[:len(line)-1])
	// Closing a socket with unread input makes the kernel reset the
	// connection, which may throw away the line still on its way. So end
	// our side after the line, and read (and drop) whatever HAProxy sent
	// until it closes its side.
	inner := c
	if lc, ok := c.(*limitedConn); ok {
		inner = lc.Conn
	}
	if cw, ok := inner.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, agentCheckDiscardBytes))
}

// Answer returns the line the agent answers now (see [AgentCheckLine]).
func (a *AgentCheck) Answer() string {
	drain := a.draining()
	now := a.now()
	a.mu.Lock()
	if drain {
		a.readyUntil = now.Add(AgentCheckReadyWindow)
	}
	ready := !drain && now.Before(a.readyUntil)
	a.mu.Unlock()
	rep, err := a.s.Latest()
	return AgentCheckLine(rep, err, drain, ready)
}

// draining reports whether the drain file exists. An error other than
// "does not exist" (a permission changed) counts as not draining and is
// logged once: a mistake that drains every server of a farm at once is
// worse than a drain that does not happen.
func (a *AgentCheck) draining() bool {
	if a.opts.DrainFile == "" {
		return false
	}
	_, err := os.Stat(a.opts.DrainFile)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		a.noteDrainErr(nil)
		return err == nil
	}
	a.noteDrainErr(err)
	return false
}

func (a *AgentCheck) noteDrainErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	a.mu.Lock()
	changed := msg != a.lastDrainErr
	a.lastDrainErr = msg
	a.mu.Unlock()
	switch {
	case changed && err != nil:
		a.log.Warn("agent-check: cannot read the drain file; answering as not drained", "err", err)
	case changed:
		a.log.Info("agent-check: drain file readable again")
	}
}
