package sim

import (
	"math"
	"slices"
)

// server is one simulated real server: an exact processor-sharing queue.
// Every request present receives the same service rate
//
//	rate(n) = min(perJob, capacity/n)
//
// (one request runs on at most one core; n requests share the cores left
// over by any background job). Because every request gets the same rate,
// the server keeps one virtual clock v — the service each present request
// has received since the server started — and a request of demand d that
// arrives at virtual time v finishes when v reaches v+d: its tag. The next
// departure is the smallest tag; jobs are kept in a min-heap on tags.
type server struct {
	spec ServerSpec

	speedFactor float64 // 1 = nominal speed
	background  float64 // fraction of the CPU taken by a background job
	down        bool
	hung        bool // down, and answering nothing (else refusing)
	agentDown   bool

	perJob   float64 // fastest rate one request can get
	capacity float64 // service rate left for requests
	full     float64 // the machine's whole rate (normalises busy)
	bgBusy   float64 // busy fraction the background job adds

	jobs minHeap[int32] // the requests present (their indices), keyed by tag; seq unused
	v    float64        // virtual time (attained service per present job)
	last float64        // simulated time v and busyInt were brought up to
	ver  uint64         // departure-event version; stale events are skipped

	busyInt float64 // ∫ busy fraction dt, the agent's CPU counter

	// Resources besides the CPU (disk.go): the server's disk, a PS queue
	// each request visits before its CPU (nil when the workload does no
	// I/O); the disk's degrade factor; the memory squeeze's thrash factor
	// (1 = none: the share of time a request on the CPU makes progress,
	// the rest stalled on page faults, which is not CPU busy) and the
	// memory used fraction the agent reports during the squeeze.
	disk       *server
	diskFactor float64
	thrash     float64
	memoryUsed float64
}

func newServer(spec ServerSpec) *server {
	s := &server{spec: spec, speedFactor: 1, diskFactor: 1, thrash: 1}
	s.recompute()
	return s
}

// recompute derives the rates from the server's current condition.
func (s *server) recompute() {
	se := s.spec.Speed * s.speedFactor * s.thrash
	s.perJob = se
	s.full = s.spec.Cores * se
	s.capacity = s.full * (1 - s.background)
	s.bgBusy = s.background
	if s.down {
		s.capacity, s.perJob, s.bgBusy = 0, 0, 0
	}
}

// Capacity is the server's true current capacity for requests (0 when
// down).
func (s *server) Capacity() float64 { return s.capacity }

// rate is the service rate each of n present requests receives.
func (s *server) rate(n int) float64 {
	if n <= 0 || s.capacity <= 0 {
		return 0
	}
	return math.Min(s.perJob, s.capacity/float64(n))
}

// busy is the CPU busy fraction with n requests present.
func (s *server) busy(n int) float64 {
	if s.down || s.full <= 0 {
		return 0
	}
	return s.bgBusy + s.thrash*math.Min(float64(n)*s.perJob, s.capacity)/s.full
}

// advance brings v and the busy integral up to time t.
func (s *server) advance(t float64) {
	dt := t - s.last
	if dt <= 0 {
		return
	}
	n := len(s.jobs)
	s.v += dt * s.rate(n)
	s.busyInt += dt * s.busy(n)
	s.last = t
}

// nextDeparture returns when the first present request completes at the
// current rate, or +Inf.
func (s *server) nextDeparture() float64 {
	n := len(s.jobs)
	r := s.rate(n)
	if n == 0 || r <= 0 {
		return math.Inf(1)
	}
	return s.last + math.Max(0, s.jobs[0].key-s.v)/r
}

// push adds a request of demand d (the caller has advanced the server).
func (s *server) push(d float64, req int) {
	s.jobs.push(s.v+d, 0, int32(req))
}

// pop removes the request with the smallest tag and returns its index.
func (s *server) pop() int32 {
	_, req := s.jobs.pop()
	return req
}

// done reports whether the smallest tag has been reached (within rounding).
func (s *server) done() bool {
	if len(s.jobs) == 0 {
		return false
	}
	return s.jobs[0].key <= s.v+1e-12*math.Max(1, math.Abs(s.v))
}

// addedDelay returns by how much the sum of the response times of every
// request present, plus a new one of demand d, exceeds that sum without the
// new one, assuming no further arrivals: the cost the PS-greedy oracle
// minimises. It follows the exact PS departure sequence of both sets.
func (s *server) addedDelay(d float64) float64 {
	if s.capacity <= 0 {
		return math.Inf(1)
	}
	rem := make([]float64, len(s.jobs), len(s.jobs)+1)
	for i, j := range s.jobs {
		rem[i] = math.Max(0, j.key-s.v)
	}
	slices.Sort(rem)
	without := s.totalCompletion(rem)
	i, _ := slices.BinarySearch(rem, d)
	rem = slices.Insert(rem, i, d)
	return s.totalCompletion(rem) - without
}

// totalCompletion is the sum of completion times (from now) of requests
// with the given ascending remaining demands under PS with this server's
// rate function.
func (s *server) totalCompletion(rem []float64) float64 {
	var t, sum, w float64
	n := len(rem)
	for k, r := range rem {
		m := n - k
		t += (r - w) / s.rate(m)
		sum += t
		w = r
	}
	return sum
}
