package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"lvs-feedback/ipvs"
)

// client plays the part of the clients and of the kernel's scheduler: every
// tick it picks a real server by weighted round-robin over the weights the
// table holds now (weight 0 gets nothing), counts the connection in the
// table, as the kernel would, and sends a real GET / to the server over a
// new TCP connection.
type client struct {
	table ipvs.Table
	svc   ipvs.ServiceKey
	// count, if not nil, bumps the table's cumulative connection counter
	// (ipvs.Mem.RecordConnection). The kernel counts its own connections;
	// with -table kernel the demo's traffic does not pass through IPVS, so
	// there is nothing to count.
	count func(ipvs.ServiceKey, netip.AddrPort) error
	// setActive, if not nil, sets the table's active connection gauge
	// (ipvs.Mem.SetActive) to the requests in flight to each server, as
	// the kernel counts established connections: the history's outcome
	// for lvs-tune regress. Nil with -table kernel, for the same reason.
	setActive   func(svc ipvs.ServiceKey, dst netip.AddrPort, active, inactive int) error
	rate        int // requests per second
	maxInFlight int
	http        *http.Client

	mu       sync.Mutex
	stats    map[netip.AddrPort]*serverStats
	inFlight map[netip.AddrPort]int // requests in flight per server (setActive)
	skip     atomic.Int64           // ticks skipped: too many requests in flight
	pickE    atomic.Int64           // ticks with no server to pick, or a table error
}

// serverStats counts one server's requests.
type serverStats struct {
	sent, ok, failed atomic.Int64
	lastErr          atomic.Value // string
}

func newClient(table ipvs.Table, svc ipvs.ServiceKey, rate int, count func(ipvs.ServiceKey, netip.AddrPort) error) *client {
	return &client{
		table:       table,
		svc:         svc,
		count:       count,
		rate:        rate,
		maxInFlight: 64,
		http: &http.Client{
			// A new connection per request, like the connections IPVS
			// schedules one by one.
			Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
			Timeout:   2 * time.Second,
		},
		stats:    map[netip.AddrPort]*serverStats{},
		inFlight: map[netip.AddrPort]int{},
	}
}

// run sends requests until ctx ends, then waits for those in flight (they
// are not cancelled: each is bounded by the client's timeout, and a request
// cut short by the end of the demo is not a server's failure).
func (c *client) run(ctx context.Context) {
	reqCtx := context.WithoutCancel(ctx)
	t := time.NewTicker(time.Second / time.Duration(c.rate))
	defer t.Stop()
	sem := make(chan struct{}, c.maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	var rr smoothWRR
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dests, err := c.table.Destinations(c.svc)
		if err != nil {
			c.pickE.Add(1)
			continue
		}
		dst, ok := rr.pick(dests)
		if !ok {
			c.pickE.Add(1)
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			c.skip.Add(1) // bounded: never more than maxInFlight at once
			continue
		}
		if c.count != nil {
			if err := c.count(c.svc, dst); err != nil {
				c.pickE.Add(1)
			}
		}
		st := c.statsFor(dst)
		st.sent.Add(1)
		c.addInFlight(dst, 1)
		wg.Go(func() {
			defer func() { <-sem }()
			defer c.addInFlight(dst, -1)
			if err := c.get(reqCtx, dst); err != nil {
				st.failed.Add(1)
				st.lastErr.Store(err.Error())
				return
			}
			st.ok.Add(1)
		})
	}
}

// addInFlight counts a request to dst starting (+1) or ending (-1) and
// sets the table's active connections to the count.
func (c *client) addInFlight(dst netip.AddrPort, delta int) {
	if c.setActive == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight[dst] += delta
	if err := c.setActive(c.svc, dst, c.inFlight[dst], 0); err != nil {
		c.pickE.Add(1)
	}
}

func (c *client) statsFor(dst netip.AddrPort) *serverStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats[dst]
	if st == nil {
		st = &serverStats{}
		c.stats[dst] = st
	}
	return st
}

// get sends one GET / to dst and reads the reply.
func (c *client) get(ctx context.Context, dst netip.AddrPort) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dst.String()+"/", nil)
	if err != nil {
		return fmt.Errorf("request to %s: %w", dst, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("request to %s: %w", dst, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)); err != nil {
		return fmt.Errorf("request to %s: read reply: %w", dst, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("request to %s: status %d", dst, resp.StatusCode)
	}
	return nil
}

// smoothWRR is smooth weighted round-robin: each pick, every server's
// credit grows by its weight, the server with the most credit is chosen and
// pays back the total. Over any run of picks each server gets its weight's
// share, interleaved evenly, and a weight change takes effect at the next
// pick. (The kernel's wrr gives the same shares with a different
// interleaving.) The zero value is ready to use.
type smoothWRR struct {
	credit map[netip.AddrPort]int
}

// pick chooses one of dests with a weight above 0; false if there is none.
func (s *smoothWRR) pick(dests []ipvs.Destination) (netip.AddrPort, bool) {
	if s.credit == nil {
		s.credit = map[netip.AddrPort]int{}
	}
	total, best := 0, -1
	for i, d := range dests {
		if d.Weight <= 0 {
			delete(s.credit, d.Addr) // out of rotation: no credit kept
			continue
		}
		s.credit[d.Addr] += d.Weight
		total += d.Weight
		if best < 0 || s.credit[d.Addr] > s.credit[dests[best].Addr] {
			best = i
		}
	}
	if best < 0 {
		return netip.AddrPort{}, false
	}
	s.credit[dests[best].Addr] -= total
	return dests[best].Addr, true
}
