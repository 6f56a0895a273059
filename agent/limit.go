package agent

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// DefaultMaxConns is lvs-agent's default -max-conns. The monitors of a
// director group open one connection per poll, so a few are enough; the
// rest of the room absorbs curl, Prometheus' blackbox and the like.
const DefaultMaxConns = 64

// limitLogEvery is how often at most the limiter logs that it closed or
// refused connections, so that a flood does not become a log flood.
const limitLogEvery = time.Minute

// ConnStats counts what a [ConnLimiter] did.
type ConnStats struct {
	Open     int    // connections open now
	Accepted uint64 // connections handed to the server
	Evicted  uint64 // waiting connections closed to make room for a new one
	Refused  uint64 // new connections closed at once: every open one was busy
}

// ConnLimiter is a net.Listener that keeps at most a fixed number of an
// http.Server's connections open. Create it with [LimitConns].
//
// A listener that merely stops accepting at the limit (a semaphore) does
// not protect the poller: 500 connections that never finish their
// request header fill the slots, and the poller's connection waits in the
// kernel's accept queue behind all of them, for as many read-header
// timeouts as there are rounds of them. ConnLimiter accepts at once
// instead, and at the limit closes a connection that is waiting: one that
// has not sent a whole request header yet (a slowloris) or sits idle
// between requests. It takes it from the source address that holds the
// most connections, the longest-waiting of that address's: a director
// polls with one connection at a time, so a flood from elsewhere closes
// its own connections, not the director's, however fast it reconnects.
// Only when no open connection is waiting is the new one closed at once;
// requests are served from memory and bounded by the read and write
// timeouts.
type ConnLimiter struct {
	net.Listener
	max int
	log *slog.Logger

	mu      sync.Mutex
	conns   map[*limitedConn]struct{}
	bySrc   map[netip.Addr]int // open connections per source address
	tick    uint64             // orders the moments connections started waiting
	stats   ConnStats
	logged  ConnStats // stats at the last log line
	lastLog time.Time
}

// limitedConn is one connection handed out by a ConnLimiter.
type limitedConn struct {
	net.Conn
	l       *ConnLimiter
	src     netip.Addr
	waiting bool   // no request in progress: new or idle
	since   uint64 // the limiter's tick when it started waiting
}

// LimitConns returns a listener for srv.Serve that keeps at most max
// (≥ 1) of ln's connections open, and hooks srv.ConnState (keeping any
// hook already set) to learn which connections are waiting for a request.
// Closed or refused connections are logged to log at warning level, at
// most once a minute; a nil log discards them.
func LimitConns(srv *http.Server, ln net.Listener, max int, log *slog.Logger) *ConnLimiter {
	l := newConnLimiter(ln, max, log)
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if lc, ok := c.(*limitedConn); ok && lc.l == l {
			l.setState(lc, s)
		}
		if prev != nil {
			prev(c, s)
		}
	}
	return l
}

// newConnLimiter returns a limiter of ln's connections to max (≥ 1). With
// no server to report their state, every connection counts as waiting.
func newConnLimiter(ln net.Listener, max int, log *slog.Logger) *ConnLimiter {
	if max < 1 {
		max = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ConnLimiter{Listener: ln, max: max, log: log, conns: map[*limitedConn]struct{}{}, bySrc: map[netip.Addr]int{}}
}

// Accept accepts the next connection, making room for it if needed.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c)
		l.mu.Lock()
		var victim *limitedConn
		if len(l.conns) >= l.max {
			victim = l.victimLocked()
			if victim == nil {
				l.stats.Refused++
				note := l.noteLocked()
				l.mu.Unlock()
				c.Close()
				note()
				continue
			}
			l.removeLocked(victim)
			l.stats.Evicted++
		}
		note := l.noteLocked()
		l.tick++
		lc := &limitedConn{Conn: c, l: l, src: src, waiting: true, since: l.tick}
		l.conns[lc] = struct{}{}
		l.bySrc[src]++
		l.stats.Accepted++
		l.mu.Unlock()
		if victim != nil {
			// Its server goroutine sees the error and finishes.
			victim.Conn.Close()
		}
		note()
		return lc, nil
	}
}

// Stats returns the limiter's counts.
func (l *ConnLimiter) Stats() ConnStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Open = len(l.conns)
	return s
}

// sourceOf returns c's remote address without its port; the zero Addr
// when it has none (a non-IP listener), which makes every such connection
// one source.
func sourceOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// victimLocked chooses the connection to close to make room for a new
// one: a waiting one from the source address that holds the most
// connections; among those, the one that has waited longest. nil when no
// connection is waiting. The limit is small, so a scan costs less than
// keeping an order. l.mu is held.
func (l *ConnLimiter) victimLocked() *limitedConn {
	var best *limitedConn
	for c := range l.conns {
		if !c.waiting {
			continue
		}
		if best == nil {
			best = c
			continue
		}
		if h, bh := l.bySrc[c.src], l.bySrc[best.src]; h > bh || (h == bh && c.since < best.since) {
			best = c
		}
	}
	return best
}

func (l *ConnLimiter) setState(c *limitedConn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateNew, http.StateIdle:
		if !c.waiting {
			l.tick++
			c.waiting, c.since = true, l.tick
		}
	case http.StateActive:
		c.waiting = false
	case http.StateClosed, http.StateHijacked:
		l.removeLocked(c)
	}
}

// removeLocked forgets c, once. l.mu is held.
func (l *ConnLimiter) removeLocked(c *limitedConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if l.bySrc[c.src]--; l.bySrc[c.src] <= 0 {
		delete(l.bySrc, c.src)
	}
}

// noteLocked returns a function that logs the evictions and refusals
// since the last line, at most once per limitLogEvery; call it once l.mu
// is released, so that a slow log never holds up Accept.
func (l *ConnLimiter) noteLocked() func() {
	evicted, refused := l.stats.Evicted-l.logged.Evicted, l.stats.Refused-l.logged.Refused
	now := time.Now()
	if evicted+refused == 0 || (!l.lastLog.IsZero() && now.Sub(l.lastLog) < limitLogEvery) {
		return func() {}
	}
	l.logged, l.lastLog = l.stats, now
	return func() {
		l.log.Warn("connection limit reached (-max-conns): closed connections that sent no request",
			"max_conns", l.max, "closed_waiting", evicted, "refused_new", refused)
	}
}

// Close removes the connection from its limiter's count and closes it.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.removeLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
