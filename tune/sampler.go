package tune

import (
	"slices"
	"strings"
	"time"

	"lvs-feedback/history"
)

// Sampler makes samples of history records read one at a time, oldest
// first (as history.Read gives them): the samples SamplesFromHistory
// makes of the same records, in the same order, holding only the last
// two cycles of each service. It reads the records in the order they
// come: a cycle whose time is not after the service's previous one (a
// clock stepped back) is not paired with it. Call Flush after the last
// record.
type Sampler struct {
	emit     func(Sample)
	services map[string]*cyclePair
	pending  []Sample // samples of one cycle time, put in order before they go
}

// cyclePair is a service's last two cycles: the servers' figures at
// each.
type cyclePair struct {
	prevTime, curTime time.Time
	prev, cur         map[string]point // prev nil: no cycle to pair the current one with
}

// point is what a sample needs of one record.
type point struct {
	managed, hasInputs bool
	x                  Vector
	weightAfter        int
	active             int
}

// NewSampler returns a Sampler that calls emit with each sample.
func NewSampler(emit func(Sample)) *Sampler {
	return &Sampler{emit: emit, services: map[string]*cyclePair{}}
}

// Add takes the next record.
func (s *Sampler) Add(r history.Record) {
	p := point{managed: r.State == "managed", weightAfter: r.WeightAfter, active: r.ActiveConns}
	if in := r.Inputs; in != nil {
		p.hasInputs, p.x = true, Vector{in.Input, in.CPU, in.Memory, in.Disk, in.Response, in.Process}
	}
	c := s.services[r.Service]
	switch {
	case c == nil:
		c = &cyclePair{curTime: r.Time, cur: map[string]point{}}
		s.services[r.Service] = c
	case r.Time.Equal(c.curTime):
	case r.Time.After(c.curTime):
		s.pair(r.Service, c)
		recycled := c.prev
		c.prev, c.prevTime = c.cur, c.curTime
		if recycled == nil {
			recycled = map[string]point{}
		}
		clear(recycled)
		c.cur, c.curTime = recycled, r.Time
	default: // back in time: start afresh
		s.pair(r.Service, c)
		c.prev, c.cur, c.curTime = nil, map[string]point{}, r.Time
	}
	c.cur[r.Server] = p // a later record of the same cycle and server wins
}

// Flush makes the samples of the last cycles held.
func (s *Sampler) Flush() {
	names := make([]string, 0, len(s.services))
	for name := range s.services {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := s.services[name]
		s.pair(name, c)
		c.prev = nil
	}
	s.flushPending()
}

// pair makes the samples of the service's previous cycle, whose outcome
// is in its current one (the rule SamplesFromHistory documents).
func (s *Sampler) pair(service string, c *cyclePair) {
	if c.prev == nil {
		return
	}
	servers := make([]string, 0, len(c.prev))
	for name := range c.prev {
		servers = append(servers, name)
	}
	slices.Sort(servers)
	type pending struct {
		s       Sample
		perUnit float64
	}
	var ps []pending
	var sum float64
	for _, srv := range servers {
		now := c.prev[srv]
		then, ok := c.cur[srv]
		if !ok || !now.hasInputs || !now.managed || !then.managed || now.weightAfter <= 0 {
			continue
		}
		perUnit := float64(then.active) / float64(now.weightAfter)
		ps = append(ps, pending{Sample{Time: c.prevTime, Service: service, Server: srv, X: now.x}, perUnit})
		sum += perUnit
	}
	if len(ps) < 2 || sum <= 0 {
		return
	}
	mean := sum / float64(len(ps))
	for _, p := range ps {
		p.s.Y = p.perUnit / mean
		if len(s.pending) > 0 && !s.pending[0].Time.Equal(p.s.Time) {
			s.flushPending()
		}
		s.pending = append(s.pending, p.s)
	}
}

// flushPending emits the held samples of one time, by service (each
// service's already by server).
func (s *Sampler) flushPending() {
	slices.SortStableFunc(s.pending, func(a, b Sample) int { return strings.Compare(a.Service, b.Service) })
	for _, smp := range s.pending {
		s.emit(smp)
	}
	s.pending = s.pending[:0]
}
