package sim

import "math"

// The director's connection table under the kernel accounting
// (Director.Accounting = "kernel"): every connection is in the TCP state
// IPVS would hold it in (net/netfilter/ipvs/ip_vs_proto_tcp.c, tcp_states[]
// for the transitions, tcp_timeouts[] for how long an entry lives,
// tcp_state_active_table[] for whether it counts in ActiveConn or
// InActConn). The model follows a connection through the states it spends
// time in:
//
//   - served: ESTABLISHED (active) from its SYN until the response, and on
//     through a keep-alive's idle time; then TIME_WAIT (inactive, 120 s)
//     after both FINs; an idle connection longer than the ESTABLISHED
//     timeout (Director.TCP) simply expires.
//   - to a crashed server (the host answers the SYN with RST): active for
//     a round trip, taken as 0, then CLOSE (inactive, 10 s).
//   - to a hung server (nothing answers): SYN_RECV (active) until 60 s
//     after the client's last SYN (lastSYN).
//   - in flight when its server crashes: reset, CLOSE; when it hangs:
//     ESTABLISHED until the client gives up (Client.Timeout) and sends its
//     FIN, then CLOSE_WAIT (inactive, 60 s).
//
// Within each of TIME_WAIT, CLOSE, SYN_RECV (of a hang) and CLOSE_WAIT
// every entry lives the same time, so entries expire in the order they
// entered: a FIFO per state replaces a timer per connection, and the
// destination's counts are all the table keeps.

// Kernel timeouts the model uses (tcp_timeouts[]), in seconds.
const (
	timeWaitTimeout  = 120
	closeTimeout     = 10
	synRecvTimeout   = 60
	closeWaitTimeout = 60
)

// SYNRetries is Linux's default net.ipv4.tcp_syn_retries: a connecting
// client retransmits its SYN this many times, the first after 1 s
// (TCP_TIMEOUT_INIT), each wait twice the last, and gives up one more
// wait after the last.
const SYNRetries = 6

// lastSYN returns, for a client that gives up after timeout seconds of
// silence, when (after its first SYN) it sends its last SYN and when it
// gives up. A retransmission due exactly at the timeout is not sent.
func lastSYN(timeout float64) (last, giveUp float64) {
	rto := 1.0
	for i := 0; i < SYNRetries && last+rto < timeout; i++ {
		last += rto
		rto *= 2
	}
	return last, math.Min(timeout, last+rto)
}

// synRecvHold is how long an unanswered connection's entry stays in
// SYN_RECV: each retransmitted SYN restarts the 60 s timer.
func synRecvHold(timeout float64) float64 {
	last, _ := lastSYN(timeout)
	return last + synRecvTimeout
}

// The constant-timeout states' queues.
const (
	qTimeWait = iota
	qClose
	qSynRecv
	qCloseWait
	nQueues
)

// expiry is one table entry waiting for its timeout.
type expiry struct {
	t float64
	k int32
}

// expiryQueue holds the entries of one state, oldest first.
type expiryQueue struct {
	q    []expiry
	head int
}

func (e *expiryQueue) push(t float64, k int) { e.q = append(e.q, expiry{t, int32(k)}) }

// popDue removes and returns the oldest entry if it expires by t.
func (e *expiryQueue) popDue(t float64) (int, bool) {
	if e.head >= len(e.q) || e.q[e.head].t > t {
		return 0, false
	}
	k := e.q[e.head].k
	e.head++
	if e.head >= 4096 && e.head*2 >= len(e.q) {
		n := copy(e.q, e.q[e.head:])
		e.q, e.head = e.q[:n], 0
	}
	return int(k), true
}

// table is the kernel accounting's state beside r.dests' counts.
type table struct {
	q [nQueues]expiryQueue
	// synRecv counts each destination's SYN_RECV entries of a hang: they
	// are active in the table but no connection the server holds.
	synRecv []int
	hold    float64 // synRecvHold of the scenario's client timeout
}

func newTable(sc *Scenario, n int) *table {
	return &table{synRecv: make([]int, n), hold: synRecvHold(sc.Client.Timeout.Seconds())}
}

// enter puts a new entry for destination k into state queue q at now.
func (r *run) enter(q, k int) {
	d := &r.dests[k]
	switch q {
	case qTimeWait:
		d.Inactive++
		r.tab.q[q].push(r.now+timeWaitTimeout, k)
	case qClose:
		d.Inactive++
		r.tab.q[q].push(r.now+closeTimeout, k)
	case qCloseWait:
		d.Inactive++
		r.tab.q[q].push(r.now+closeWaitTimeout, k)
	case qSynRecv:
		d.Active++
		r.tab.synRecv[k]++
		r.tab.q[q].push(r.now+r.tab.hold, k)
	}
}

// expire removes every entry whose timeout has passed by t (an entry
// expiring at the time of an event is gone before the event).
func (r *run) expire(t float64) {
	if r.tab == nil {
		return
	}
	for q := range r.tab.q {
		for {
			k, ok := r.tab.q[q].popDue(t)
			if !ok {
				break
			}
			if q == qSynRecv {
				r.dests[k].Active--
				r.tab.synRecv[k]--
			} else {
				r.dests[k].Inactive--
			}
		}
	}
}

// serverConns is the number of connections server k itself holds open
// (the agent's memory model): the table's counts less what the server
// does not hold — with the kernel accounting, its inactive entries and a
// hang's SYN_RECV entries; the linger model counts both gauges, as it
// always has.
func (r *run) serverConns(k int) int {
	d := r.dests[k]
	if r.tab == nil {
		return d.Active + d.Inactive
	}
	return d.Active - r.tab.synRecv[k]
}
