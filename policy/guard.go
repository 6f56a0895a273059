package policy

import (
	"fmt"
	"math"
	"time"

	"lvs-feedback/ipvs"
)

// The backlog guard: between cycles, the monitor reads only its own IPVS
// table (cheap: one netlink dump per service, no agent, no probe) and looks
// for a server whose active connections pile up. A server that suddenly
// lost capacity — a background job, a degraded disk — keeps receiving its
// full share under wrr until the next cycle measures it, and builds a
// backlog that it then serves slowly with what it has left. The table shows
// that backlog within a second: its active connections per unit of weight
// run away from its peers'. The guard then cuts the weight in proportion
// and holds it (cycles may lower it further, not raise it) until the backlog
// is gone; from then on the weight controller's weight applies.
//
// The other side of the same signal: while the whole service builds a
// backlog (it is overloaded), a server far *below* its share of active
// connections keeps up better than its weight says; it is raised (at most
// doubled) and held up the same way, until its share is back.
//
// wlc and sed balance active connections per unit of weight themselves, so
// the guard does not fire under them unless a server is far off what its
// weight says.

// HashingScheduler reports whether an IPVS scheduler places connections by
// hashing (sh, dh, mh): there a weight change remaps clients to other
// servers, so the backlog guard leaves such services alone.
func HashingScheduler(name string) bool {
	switch name {
	case "sh", "dh", "mh":
		return true
	}
	return false
}

// CountingScheduler reports whether an IPVS scheduler weighs each server's
// active connections when it places a new one (the kernel's ip_vs_lc.c,
// wlc, sed, nq, lblc, lblcr, ovf and twos): there a server whose active
// connections grow is already sent fewer, before any weight changes, and
// a cut on a predicted backlog mostly adds writes. rr, wrr and fo place by
// weight alone.
func CountingScheduler(name string) bool {
	switch name {
	case "lc", "wlc", "sed", "nq", "lblc", "lblcr", "ovf", "twos":
		return true
	}
	return false
}

// BacklogRatio is a server's active connections per unit of weight as a
// multiple of its service's median (median per unit of weight), and its
// excess over the median share: active − median·weight. A median of 0 gives
// ratio +Inf for a server with active connections.
func BacklogRatio(active, weight int, median float64) (ratio, excess float64) {
	if weight <= 0 {
		return math.NaN(), 0
	}
	expected := median * float64(weight)
	excess = float64(active) - expected
	if expected <= 0 {
		if active == 0 {
			return 0, 0
		}
		return math.Inf(1), excess
	}
	return float64(active) / expected, excess
}

// Backlogged reports whether a server with this ratio and excess at this
// check, and prevActive active connections at the previous one, is
// building a backlog: beyond the trigger with at least MinExcess more than
// its share, and growing.
func Backlogged(ratio, excess float64, active, prevActive int, g GuardParams) bool {
	return ratio >= g.Trigger && excess >= float64(g.MinExcess) && active > prevActive
}

// Starved reports whether a server with this ratio and excess at this
// check is far below its share while its service builds a backlog: at most
// 1/Trigger of the median per unit of weight with at least MinExcess fewer
// connections than its share, and the service's median growing.
func Starved(ratio, excess float64, building bool, g GuardParams) bool {
	return building && ratio <= 1/g.Trigger && -excess >= float64(g.MinExcess)
}

// Building reports whether a service builds a backlog at a check: its
// median per unit of weight med grew since the previous check and, once
// its usual median at cycles is known (minLevelCycles), is at least
// trigger times that. A median that only wanders — single-core servers'
// queues under heavy-tailed requests rise and fall from one second to the
// next — grows at every other check; a 32-core server that holds few
// connections per unit of weight was raised for it and put back at the
// next cycle, again and again with nothing changing.
func Building(med float64, st *ServiceState, trigger float64) bool {
	if !st.BacklogSeen || !(med > st.BacklogMedian) {
		return false
	}
	return !st.MedianLevel.Known() || med >= trigger*st.MedianLevel.Value
}

// GuardRaise is the weight a starved server is raised to: its weight
// divided by its ratio, at most doubled, at most ipvs.MaxWeight.
func GuardRaise(weight int, ratio float64) int {
	if !(ratio >= 0 && ratio < 1) {
		return weight
	}
	to := min(2*weight, ipvs.MaxWeight)
	if ratio > 0 {
		to = min(to, int(math.Ceil(float64(weight)/ratio)))
	}
	return max(to, weight)
}

// Sinking reports whether a server looks like a sink at a check: none of
// its connections is established while at least minEnded more ended since
// the previous check (its inactive connections grew by that many), and its
// service's servers do hold established connections (median per unit of
// weight above 0; the guard passes the larger of this check's and the
// previous one's, since under wlc a sink soon takes every new connection
// and its peers' established ones end). That is what a dead or refusing
// server looks like in the table — every connection it is sent fails and
// lingers as inactive — and under wlc or sed such a server, with nothing
// active, is sent almost every new connection until a probe takes it out.
// A healthy server with very short requests can look the same; the
// monitor only probes the server early (TakeDownSinks), so a false alarm
// costs one probe.
func Sinking(active, inactive, prevInactive int, median float64, minEnded int) bool {
	return active == 0 && median > 0 && inactive-prevInactive >= max(minEnded, 1)
}

// GuardCut is the weight a backlogged server is cut to: its weight divided
// by its backlog ratio, at least minWeight and below weight.
func GuardCut(weight int, ratio float64, minWeight int) int {
	if !(ratio > 1) {
		return weight
	}
	to := int(math.Floor(float64(weight) / ratio)) // +Inf: 0, so minWeight
	return max(minWeight, to)
}

// PredictBacklog is seed 000's predicted queue Q′ = Q + L − T·μ applied to
// a server's backlog: q, the active connections it holds beyond its share
// now; arrivals (L), the connections it is expected to be sent until the
// next check; served (T·μ), those it is expected to finish in that time;
// shareGrowth, how much its share itself grew at the last check (a burst,
// or idle keep-alive connections piling up everywhere, grows every
// server's count with its weight — that is no backlog). A share that fell
// counts as 0: a peer's crash or a burst ending elsewhere moves the share
// once, and extrapolated it would read as a backlog growing by the fall
// every check. Positive: the backlog it will hold at the next check.
func PredictBacklog(q, arrivals, served, shareGrowth float64) float64 {
	return q + arrivals - served - math.Max(shareGrowth, 0)
}

// CheckRates are a server's arrivals and finished connections per reading
// of the table (a check, or a cycle's) over the span since the kernel's
// connection counter last moved
// (the kernel publishes it every 2 s, so at a 1 s check every other
// reading is unchanged): arrivals, the counter's growth over that span ÷
// checks; served, arrivals less the growth of its active connections over
// the same span (ServedConnections), ÷ checks. ok is false when the span
// is empty or the counter went back (the destination was created anew):
// no figure.
func CheckRates(prevCounter, counter uint32, prevActive, active, checks int) (arrivals, served float64, ok bool) {
	d := ipvs.ConnectionDelta(prevCounter, counter)
	if checks <= 0 || d > math.MaxInt32 {
		return 0, 0, false
	}
	n := float64(checks)
	return float64(d) / n, ServedConnections(int64(d), active-prevActive) / n, true
}

// FinishingLess reports whether a server finished fewer connections than
// it was sent over a span of checks beyond chance: arrivals and served per
// check (CheckRates) over checks, the shortfall more than one Poisson
// standard deviation of what it was sent, √(arrivals·checks). A server
// at 80 % load sent 161 a check and finishing 158 is keeping up; one sent
// 4.8 over a span and finishing 1.6 is not.
func FinishingLess(arrivals, served float64, checks int) bool {
	n := float64(max(checks, 1))
	return (arrivals-served)*n > math.Sqrt(max(arrivals, 0)*n)
}

// predictNoise is how many standard deviations of a server's excess a
// predicted backlog must reach (PredictBar): its own measured scatter, and
// at least a Poisson count's √share. The prediction (its excess plus the
// excess's growth) scatters more than the excess itself, and a false cut
// costs two writes (the cut and the release).
const predictNoise = 6

// predictNow is the share of the bar a server's excess must already reach
// at the check; predictGrows the checks in a row its excess must have grown
// (a check at which it fell by less than predictTolerance connections —
// sent nothing, or the median moved by a fraction — does not count and
// does not break the run).
const (
	predictNow       = 0.75
	predictGrows     = 3
	predictTolerance = 1.0
)

// PredictBar is the predicted backlog at which a server whose share of the
// median holds share connections, and whose excess over it scatters by
// sigma from check to check (Spread), is cut: min_excess, and beyond that
// predictNoise times the larger of sigma and √share. Not the level test's
// (trigger − 1)·share: a server that holds hundreds of idle keep-alive
// connections at its share never doubles them, and a backlog of a few
// dozen among them is still far outside their noise; while a single-core
// server's queue at high load wanders by more than its share from one
// second to the next, and a bar at its share cut it at every other check.
func PredictBar(share, sigma float64, g GuardParams) float64 {
	return max(float64(g.MinExcess), predictNoise*max(sigma, math.Sqrt(max(share, 0))))
}

// Spread is how far a server's excess over its share scatters at checks:
// the bias-corrected decay of SmoothCapacity, spreadSmoothing per check,
// of the excess and of its square.
type Spread struct {
	Mean, Square float64
	N            int // checks folded in
}

// spreadSmoothing is the decay per check of a server's Spread: about 50
// checks, far slower than a backlog builds; spreadMinChecks how many
// checks it needs before it counts.
const (
	spreadSmoothing = 0.98
	spreadMinChecks = 10
)

// spreadRun is the checks of growth in a run (prediction.grows) from which
// a server's excess is no longer folded into its Spread.
const spreadRun = 2

// Fold takes the excess x of a check.
func (s *Spread) Fold(x float64) {
	s.N++
	s.Mean = SmoothCapacity(s.Mean, s.N, x, spreadSmoothing)
	s.Square = SmoothCapacity(s.Square, s.N, x*x, spreadSmoothing)
}

// Sigma is the standard deviation of the excess folded in.
func (s Spread) Sigma() float64 { return math.Sqrt(max(0, s.Square-s.Mean*s.Mean)) }

// Known reports whether enough checks are in for the spread to count.
func (s Spread) Known() bool { return s.N >= spreadMinChecks }

// PredictCut is the weight a server predicted to build a backlog is cut to:
// the lower of GuardCut at its predicted backlog ratio and, once its rates
// are known (arrivals > 0), the weight at which it is sent what it
// finishes, weight·served ÷ arrivals; at least minWeight, and weight
// itself when neither is below it.
func PredictCut(weight int, ratio, arrivals, served float64, minWeight int) int {
	to := GuardCut(weight, ratio, minWeight)
	if arrivals > 0 && served < arrivals {
		to = min(to, max(minWeight, int(math.Floor(float64(weight)*max(served, 0)/arrivals))))
	}
	return to
}

// GuardState is a server's backlog-guard memory.
type GuardState struct {
	PrevActive int // active connections at the previous check
	// PrevInactive: inactive connections at the previous check, Checked
	// once there was one (a first reading compares with nothing).
	PrevInactive int
	Checked      bool
	Over         bool // beyond the trigger at the previous check
	Under        bool // starved at the previous check
	From         int  // the weight before the move
	// Weight is the held weight (0: no hold; a cycle may move it further
	// the way the guard moved it).
	Weight int
	// Restore is the weight the server goes back to when the hold ends:
	// the weight before the move, or the controller's latest since.
	Restore int
	Raised  bool // the hold is a raise, not a cut
	// Usual is the server's usual backlog ratio (UsualRatio; 0: not
	// known yet, taken as 1). It outlives a hold.
	Usual float64
	// Level is the active connections per unit of weight the server
	// usually holds at cycles. It outlives a hold.
	Level Level
	// Suspect: at this check the server's counters looked like a dead
	// server's (Suspect): the monitor reads its entries in the connection
	// table (TableEvidence). PilingUp: its active connections at that,
	// which unanswered handshakes do (PilingUp), not only its inactive
	// count moving with none active, as a healthy server's with short
	// connections does at every check.
	Suspect, PilingUp bool
	// Excess is the server's active connections beyond its share at the
	// previous check (ExcessSet: not held then), Grows at how many checks
	// in a row, up to it, that excess grew: the prediction's growth and
	// its persistence.
	Excess    float64
	ExcessSet bool
	Grows     int
	// Spread is how far its excess scatters at checks. It outlives a
	// hold.
	Spread Spread
	// Counter and CounterActive are the kernel's connection counter and
	// the server's active connections at the check the counter last moved
	// (CounterSet), Since the checks since then; Arrivals and Served the
	// rates over the latest span (CheckRates), Rated once there is one.
	Counter       uint32
	CounterActive int
	Since         int
	CounterSet    bool
	Arrivals      float64
	Served        float64
	Rated         bool
	RateChecks    int // the checks of the span Arrivals and Served were taken over
}

// rates folds the kernel's counter and the server's active connections at
// a check into its arrival and service rates (CheckRates).
func (gs *GuardState) rates(counter uint32, active int) {
	gs.Since++
	if !gs.CounterSet || counter != gs.Counter {
		if gs.CounterSet {
			gs.Arrivals, gs.Served, gs.Rated = CheckRates(gs.Counter, counter, gs.CounterActive, active, gs.Since)
			gs.RateChecks = gs.Since
		}
		gs.Counter, gs.CounterActive, gs.Since, gs.CounterSet = counter, active, 0, true
	}
}

// kept is a fresh GuardState that keeps what outlives a hold.
func (gs GuardState) kept() GuardState {
	return GuardState{Usual: gs.Usual, Level: gs.Level, Spread: gs.Spread, Counter: gs.Counter, CounterActive: gs.CounterActive,
		Since: gs.Since, CounterSet: gs.CounterSet, Arrivals: gs.Arrivals, Served: gs.Served, Rated: gs.Rated, RateChecks: gs.RateChecks}
}

// usualSmoothing is the decay per cycle of a server's usual backlog ratio:
// about ten cycles, far slower than a backlog builds (two checks between
// cycles).
const usualSmoothing = 0.9

// usualMin and usualMax bound a server's usual backlog ratio: a server is never
// expected to hold more than 4 times, or less than a quarter of, the
// service's median per unit of weight.
const usualMin, usualMax = 0.25, 4.0

// UsualRatio folds a server's backlog ratio at a cycle, bounded to
// [usualMin, usualMax], into its usual ratio usual (0: none yet, which
// starts from 1, the share its weight says). Servers of one service differ
// in how many connections they hold per unit of weight at the same load:
// at high load a single-core server's queue holds many, a 32-core server
// with the same share of the work few. Compared with the median alone, the
// big server looks starved and the small ones backlogged at every check;
// compared with what each usually holds, only a change shows.
func UsualRatio(usual, ratio float64) float64 {
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		return usual
	}
	if usual <= 0 {
		usual = 1 // the prior: the share its weight says
	}
	return usualSmoothing*usual + (1-usualSmoothing)*clamp(ratio, usualMin, usualMax)
}

// Level is the usual value of a figure read at cycles — a server's active
// connections per unit of weight, a service's median of them: the
// bias-corrected decay of SmoothCapacity, 0.9 per cycle, so that the first
// cycles (a monitor's start, an empty service) count as one among the
// next, not as the level. The median per unit of weight is no reference
// when most of a service's servers are idle at a given moment (many
// single-core servers at moderate load): it is then 0, and any server
// holding connections would look backlogged — a 32-core server holding its
// usual 20 was cut to weight 1. A backlog is also a pile-up against the
// server's own past.
type Level struct {
	Value float64
	N     int // readings folded in
}

// Fold takes the reading x of a cycle.
func (l *Level) Fold(x float64) {
	l.N++
	l.Value = SmoothCapacity(l.Value, l.N, x, usualSmoothing)
}

// Known reports whether enough cycles are in for the level to count.
func (l Level) Known() bool { return l.N >= minLevelCycles }

// minLevelCycles is how many cycles a level needs before it counts.
const minLevelCycles = 3

// overLevel reports whether a server holding active connections at weight
// is over its usual level by the guard's trigger and min_excess, where the
// service's median cannot tell: when its share by the median (share) is
// under one connection — most of the service idle at that moment. Where
// it is a connection or more, and while the level is not known
// (minLevelCycles), it is true: the check against the service decides
// alone (in an overload every server's level rises with it, and a server
// that lost capacity would be cut later). A starved server is not compared
// with its past: it keeps up by holding what it usually holds while the
// others pile up.
func (gs *GuardState) overLevel(active, weight int, share float64, g GuardParams) bool {
	if share >= 1 || !gs.Level.Known() {
		return true
	}
	ratio, excess := BacklogRatio(active, weight, gs.Level.Value)
	return ratio >= g.Trigger && excess >= float64(g.MinExcess)
}

// levelText names the server's usual level at weight for a reason.
func (gs *GuardState) levelText(weight int) string {
	if !gs.Level.Known() {
		return ""
	}
	return fmt.Sprintf(" where it usually holds %.1f", gs.Level.Value*float64(weight))
}

// usual is the server's usual backlog ratio, 1 while none is known.
func (g *GuardState) usual() float64 {
	if g.Usual > 0 {
		return g.Usual
	}
	return 1
}

// expectedMedian is the service's median per unit of weight scaled by the
// server's usual ratio: what the server is expected to hold per unit.
func (g *GuardState) expectedMedian(med float64) float64 { return med * g.usual() }

// Holding reports whether the guard holds the weight: a held weight is at
// least weight.min, so never 0.
func (g GuardState) Holding() bool { return g.Weight > 0 }

// GuardEvent is what the backlog guard did to a server at one check.
type GuardEvent uint8

// The guard's events.
const (
	GuardNone     GuardEvent = iota
	GuardCutNow              // cut and held
	GuardRaiseNow            // raised and held
	GuardKept                // a cycle's write beyond the held weight was not made
	GuardReleased            // the hold ended
	GuardDropped             // the hold ended because the server left rotation
	GuardSink                // the server looks dead (Sinking): probed now (TakeDownSinks)
	// GuardReset: the connection table shows the server's new connections
	// reset (Refusing): probed now (TakeDownSinks).
	GuardReset
	// GuardUnanswered: the connection table shows the server's new
	// connections never complete their handshake (Unanswered): down at
	// once (TakeDownSinks), no probe can tell more.
	GuardUnanswered
)

// GuardTrace is the backlog guard's part of a decision.
type GuardTrace struct {
	Event GuardEvent
	// Held is the weight the guard holds the server at after this
	// decision and From its weight before the move (0: no hold); Raised:
	// the hold is a raise.
	Held, From int
	Raised     bool
	// Ratio and Active are the figures the event was decided on, Median
	// the service's active connections per unit of weight; Restore the
	// weight a released server goes back to; Controller the controller's
	// weight a hold kept from being written.
	Ratio, Median   float64
	Active, Restore int
	Controller      int
	// Ended: GuardSink, the server's inactive connections' growth since
	// the previous check.
	Ended int
	// Conns: GuardReset and GuardUnanswered, what the connection table
	// showed of the server.
	Conns     ipvs.ConnCounts
	DroppedAs Ownership // GuardDropped: the state the server left for
	// Prediction: between cycles, a server not held whose excess reached
	// half its prediction's bar: what the prediction made of it (nil
	// otherwise), for the debug log of a cut that comes or does not.
	Prediction *GuardPrediction
}

// GuardPrediction is the predicted backlog of a server at a check and the
// conditions a cut on it waits for (GuardState.predicted).
type GuardPrediction struct {
	Excess, Backlog, Bar float64 // its excess now, at the next check, the bar
	Grows                int     // checks of growth in its run
	Rated, FinishingLess bool    // the counter's rates known; finishing fewer than sent
	Over                 bool    // every condition met: cut
}

// Check runs one backlog check between cycles on a service whose servers
// were read from the table (only Record, Configured, Kernel and
// ActiveConns of their observations are used): backlogged servers are cut
// and held, starved ones raised; and a drain found on a destination
// created anew is written back at once, as a cycle would.
func (e *Engine) Check(s Service, st *ServiceState, servers []Server) {
	for _, sv := range servers {
		*sv.Out = NewDecision(KindGuard, sv.Obs.Kernel, sv.Obs.Record)
		keepDrain(sv.Obs, sv.Out)
	}
	e.guard(s, st, servers, false)
}

// TakeDownSinks acts on the probes the monitor made, between cycles, of
// the servers a backlog check found sinking (GuardSink) or resetting their
// connections (GuardReset), and on the connection table's evidence
// (GuardUnanswered): one that refused a probe (not a timeout: a refused or
// reset connection is the server's own answer) is marked down at once, as
// the next cycle's availability rule would, and so is one whose
// connections never complete their handshake; one that answered or timed
// out is left to the cycles. As in a cycle, when more than freeze_share of
// the service's servers that are not drained would be down — those already
// down counted — nothing is done: the director is more likely cut off than
// they are all dead. It
// returns how many it marked down.
func (e *Engine) TakeDownSinks(servers []Server) int {
	var out []Server
	eligible, down := 0, 0
	for _, sv := range servers {
		o := sv.Obs
		if o.Record.State != DrainedByOperator {
			eligible++
		}
		if o.Record.State == Down {
			down++ // counted as the cycle counts it: its probe fails too
		}
		g := sv.Out.Trace.Guard
		if g == nil || o.Record.State != Managed {
			continue
		}
		refused := (g.Event == GuardSink || g.Event == GuardReset) && o.Probed && o.ProbeErr != nil && !o.ProbeTimedOut
		if refused || g.Event == GuardUnanswered {
			out = append(out, sv)
		}
	}
	if len(out) == 0 || ShouldFreeze(len(out)+down, eligible, e.p.Availability.FreezeShare) {
		return 0
	}
	for _, sv := range out {
		g := sv.Out.Trace.Guard
		sv.State.Fails, sv.State.Passes = sv.State.Fails+1, 0
		var why string
		switch g.Event {
		case GuardSink:
			why = fmt.Sprintf("refused a probe at a backlog check, after %d of its connections ended with none established: %v", g.Ended, sv.Obs.ProbeErr)
		case GuardReset:
			why = fmt.Sprintf("refused a probe at a backlog check, after %d of its connections were reset within two seconds: %v", g.Conns.Resets, sv.Obs.ProbeErr)
		default:
			why = fmt.Sprintf("its connections never complete: %d unanswered handshakes, %d established, %d with a packet within a second", g.Conns.Handshakes, g.Conns.Established, g.Conns.Progressed)
		}
		markDown(sv.Obs, sv.State, sv.Out, why)
	}
	return len(out)
}

// handshakeMin is the fewest of a server's connections that must wait for
// their handshake for the connection table to show it unanswered: one or
// two can be handshakes caught in flight. resetMin is the fewest resets
// that make the monitor probe it: a probe confirms, so one more than a
// single client's reset is enough.
const handshakeMin, resetMin = 3, 2

// Suspect reports whether a server's counters at a check, against the
// previous check's, look like a dead server's, so that its entries in the
// connection table are worth reading: none active while its inactive
// count moves (a server that resets every connection holds none active,
// and under wrr its resets, lingering 10 s, replace its closed
// connections' 120 s one for one, so the inactive count hardly grows:
// Sinking cannot see it), or at least handshakeMin active and growing (the
// kernel counts a connection waiting for the server's handshake as
// active). A busy server with short connections, or a slow one, is
// suspect too: only the table tells them apart, and prevChecked is false
// at a first reading.
func Suspect(active, prevActive, inactive, prevInactive int, prevChecked bool) bool {
	return prevChecked && active == 0 && inactive != prevInactive || PilingUp(active, prevActive)
}

// PilingUp reports whether a server's active connections pile up — at
// least handshakeMin and more than at the previous check — as a server
// that answers nobody's do: the stronger of Suspect's two readings, and
// the rarer on a healthy director.
func PilingUp(active, prevActive int) bool {
	return active >= handshakeMin && active > prevActive
}

// Refusing reports whether a server's entries in the connection table
// show it refusing: at least resetMin of its connections reset within the
// last two seconds. A client can reset too; the monitor probes the server
// before it takes it down (TakeDownSinks).
func Refusing(c ipvs.ConnCounts) bool { return c.Resets >= resetMin }

// Unanswered reports whether a server's entries in the connection table
// show that its connections never complete: at least handshakeMin waiting
// for their handshake, more than it holds established, and more than its
// entries past the handshake that saw a packet within the last second.
// Under NAT the director sees the server's answers, so that is a server
// that answers nobody — or answers the director's probes but not the
// clients (a lost route back): a probe cannot tell. Not "none progressed":
// the clients of connections caught open by the failure retransmit into
// them (data, a FIN) with backoff for minutes, and each retransmission
// makes an entry fresh again; a healthy server closes about as many
// connections a second as it opens, and holds a connection in its
// handshake only for a client's round trip, so its fresh entries far
// outnumber its handshakes. A slow server completes its handshakes (the
// kernel answers them) and holds many established connections: never
// unanswered, however many it holds.
func Unanswered(c ipvs.ConnCounts) bool {
	return c.Handshakes >= handshakeMin && c.Handshakes > c.Established && c.Handshakes > c.Progressed
}

// TableEvidence takes, for a service's servers that were suspect at this
// check (GuardState.Suspect), what the connection table shows of them
// (conns, in the order of servers; ok false: not read): a server whose
// connections never complete gets a GuardUnanswered trace, one that resets
// them a GuardReset trace (unless a check already found it sinking); the
// monitor then probes the resetting ones and calls TakeDownSinks.
func (e *Engine) TableEvidence(servers []Server, conns []ipvs.ConnCounts, ok []bool) {
	for i, sv := range servers {
		if !ok[i] || !sv.State.Guard.Suspect || sv.Obs.Record.State != Managed || sv.Obs.Kernel <= 0 {
			continue
		}
		var ev GuardEvent
		switch c := conns[i]; {
		case Unanswered(c):
			ev = GuardUnanswered
		case Refusing(c):
			ev = GuardReset
		default:
			continue
		}
		tr := GuardTrace{}
		if g := sv.Out.Trace.Guard; g != nil {
			if g.Event == GuardSink && ev == GuardReset {
				continue // probed for it already
			}
			tr = *g
		}
		tr.Event, tr.Active, tr.Conns = ev, sv.Obs.ActiveConns, conns[i]
		sv.Out.Trace.Guard = &tr
	}
}

// medianPerWeight is the median of active connections per unit of weight
// over a service's servers in rotation (managed, weight > 0). A held
// server counts at the weight it had before the move.
func medianPerWeight(servers []Server, scratch *[]float64) float64 {
	v := (*scratch)[:0]
	for _, sv := range servers {
		o := sv.Obs
		if o.Record.State != Managed || o.Kernel <= 0 {
			continue
		}
		w := o.Kernel
		if g := &sv.State.Guard; g.Holding() {
			w = g.From
		}
		v = append(v, float64(o.ActiveConns)/float64(w))
	}
	*scratch = v
	return median(v)
}

// guard updates every server's guard state from the table, and the
// decisions:
//
//   - at a cycle, a held server whose backlog is gone (or the guard turned
//     off) is released: it goes back to its restore weight, unless the
//     cycle writes the controller's weight anyway; a server whose weight
//     someone else changed is released at once (that change stands);
//   - a held server stays held: in a cycle (inCycle), a write beyond the
//     held weight is not made but remembered as the weight to restore; one
//     the way the guard moved it is made and held;
//   - between cycles, a backlogged server is cut and a starved one raised,
//     and held.
//
// A server that leaves the managed state (drained, down) forgets its hold;
// a frozen service is left as it is. It reports whether the guard is off
// for the service only because of a hashing scheduler.
func (e *Engine) guard(s Service, st *ServiceState, servers []Server, inCycle bool) (offForHashing bool) {
	g := e.p.Guard
	if st.Frozen {
		return false
	}
	on := g.Enabled()
	if s.Hashing && on {
		on, offForHashing = false, true
	}
	predict := g.Predict && !s.Counting
	med := medianPerWeight(servers, &e.perWeight)
	building := Building(med, st, g.Trigger)
	if inCycle {
		st.MedianLevel.Fold(med)
	}
	// A sink drains its peers under wlc: judge it against the service as
	// it is or was a check ago.
	sinkMed := max(med, st.BacklogMedian)
	st.BacklogMedian, st.BacklogSeen = med, true
	for _, sv := range servers {
		o, gs, d := sv.Obs, &sv.State.Guard, sv.Out
		tr := GuardTrace{Median: med}
		leaving := d.Write && d.Record.State != Managed
		suspect := on && !inCycle && o.Record.State == Managed && o.Kernel > 0 && !leaving &&
			Suspect(o.ActiveConns, gs.PrevActive, o.InactiveConns, gs.PrevInactive, gs.Checked)
		pilingUp := suspect && PilingUp(o.ActiveConns, gs.PrevActive)
		switch {
		case o.Record.State != Managed || o.Kernel <= 0 || leaving:
			if gs.Holding() {
				tr.Event, tr.DroppedAs = GuardDropped, d.Record.State
			}
			*gs = GuardState{PrevActive: o.ActiveConns, PrevInactive: o.InactiveConns, Checked: true}
		case gs.Holding():
			gs.rates(o.Counter, o.ActiveConns)
			e.holdOrRelease(o, gs, d, &tr, med, inCycle, on, predict)
		default:
			gs.rates(o.Counter, o.ActiveConns)
			e.detect(o, sv.State, d, &tr, med, sinkMed, building, inCycle, on, predict)
		}
		gs.Suspect, gs.PilingUp = suspect, pilingUp
		if tr.Event != GuardNone || gs.Holding() || tr.Prediction != nil {
			tr.Held, tr.From, tr.Raised = gs.Weight, gs.From, gs.Raised
			kept := tr // only these escape to the heap
			d.Trace.Guard = &kept
		}
	}
	return offForHashing
}

// detect is guard for a server that is not held: between cycles, a server
// backlogged (or starved) at two checks in a row is cut (or raised); with
// predict (Predict, and a scheduler that places by weight alone), one whose
// backlog is predicted at the next check (predicted) is cut as soon as it is.
func (e *Engine) detect(o *Observed, st *ServerState, d *Decision, tr *GuardTrace, med, sinkMed float64, building, inCycle, on, predict bool) {
	g, gs := e.p.Guard, &st.Guard
	ratio, excess := BacklogRatio(o.ActiveConns, o.Kernel, gs.expectedMedian(med))
	share := gs.expectedMedian(med) * float64(o.Kernel) // what the median says it holds
	over := on && ratio >= g.Trigger && excess >= float64(g.MinExcess) && gs.overLevel(o.ActiveConns, o.Kernel, share, g)
	under := on && g.Raise && Starved(ratio, excess, building, g)
	pr := gs.predicted(o, excess, share, g)
	// At every cycle, over or under as well: a server that is always
	// below its share is what the usual ratio is for. A server in slow
	// start, or expected to hold less than one connection, says nothing
	// about what it usually holds.
	if inCycle && st.RampStart.IsZero() && med*float64(o.Kernel) >= 1 {
		raw, _ := BacklogRatio(o.ActiveConns, o.Kernel, med)
		gs.Usual = UsualRatio(gs.Usual, raw)
	}
	if inCycle && st.RampStart.IsZero() {
		gs.Level.Fold(float64(o.ActiveConns) / float64(o.Kernel)) // Kernel > 0: in rotation
	}
	if on && predict && !inCycle && pr.bar > 0 && excess >= pr.bar/2 {
		tr.Prediction = &GuardPrediction{Excess: excess, Backlog: pr.backlog, Bar: pr.bar, Grows: pr.grows,
			Rated: gs.Rated, FinishingLess: gs.Rated && FinishingLess(gs.Arrivals, gs.Served, gs.RateChecks), Over: pr.over}
	}
	early := on && predict && !inCycle && pr.over
	cut := !inCycle && (early || gs.Over && over && Backlogged(ratio, excess, o.ActiveConns, gs.PrevActive, g))
	// A server in slow start is below its share on purpose.
	raise := !inCycle && gs.Under && under && st.RampStart.IsZero()
	sink := on && !inCycle && gs.Checked && Sinking(o.ActiveConns, o.InactiveConns, gs.PrevInactive, sinkMed, g.MinExcess)
	ended := o.InactiveConns - gs.PrevInactive
	gs.Over, gs.Under, gs.PrevActive = over, under, o.ActiveConns
	gs.PrevInactive, gs.Checked = o.InactiveConns, true
	gs.Excess, gs.ExcessSet, gs.Grows = excess, true, pr.grows
	// A run of growth is no scatter: folded in, a backlog building a few
	// connections a check raised its own bar (PredictBar) as fast as it
	// grew, and the prediction never came before the level test. A queue
	// that scatters falls by a connection at least every other check, and
	// its scatter is learnt from those checks and the ones between.
	if !inCycle && pr.grows < spreadRun {
		gs.Spread.Fold(excess)
	}
	switch {
	case sink:
		tr.Event, tr.Active, tr.Ended = GuardSink, o.ActiveConns, ended
	case cut:
		to, why := GuardCut(o.Kernel, ratio, e.p.Weight.Min), ""
		if early {
			ratio = pr.ratio
			arrivals, served := 0.0, 0.0
			if gs.Rated {
				arrivals, served = gs.Arrivals, gs.Served
			}
			to = PredictCut(o.Kernel, ratio, arrivals, served, e.p.Weight.Min)
			why = fmt.Sprintf("backlog predicted: %.0f connections over its share at the next check (%d active, share %.1f, growing %.1f a check; sent %.1f, finished %.1f a check)",
				pr.backlog, o.ActiveConns, share, pr.growth, arrivals, served)
		}
		if to >= o.Kernel {
			return
		}
		kept := gs.kept()
		kept.PrevActive, kept.From, kept.Weight, kept.Restore = o.ActiveConns, o.Kernel, to, o.Kernel
		*gs = kept
		tr.Event, tr.Ratio, tr.Active = GuardCutNow, ratio, o.ActiveConns
		if why == "" {
			why = fmt.Sprintf("backlog: %d active connections%s, %.1f× its weight's usual share (service median %.2f per unit of weight, it usually holds %.2f×)", o.ActiveConns, gs.levelText(o.Kernel), ratio, med, gs.usual())
		}
		propose(d, to, why, 1)
	case raise:
		to := GuardRaise(o.Kernel, ratio)
		if to <= o.Kernel {
			return
		}
		kept := gs.kept()
		kept.PrevActive, kept.Raised, kept.From, kept.Weight, kept.Restore = o.ActiveConns, true, o.Kernel, to, o.Kernel
		*gs = kept
		tr.Event, tr.Ratio, tr.Active = GuardRaiseNow, ratio, o.ActiveConns
		propose(d, to, fmt.Sprintf("starved: %d active connections, %.2f× its weight's usual share while the service's backlog grows (median %.2f per unit of weight, it usually holds %.2f×)", o.ActiveConns, ratio, med, gs.usual()), 1)
	}
}

// prediction is a server's predicted backlog at a check.
type prediction struct {
	growth  float64 // its excess's growth since the previous check
	grows   int     // checks in a row, up to this one, the excess grew
	backlog float64 // PredictBacklog: beyond its share at the next check
	ratio   float64 // (share + backlog) ÷ share, +Inf for a share of 0
	over    bool    // cut: see predicted
	bar     float64 // PredictBar (0: no prediction)
}

// predicted is the server's predicted backlog at a check (its previous
// check's state in gs): its excess now, the connections it is sent per
// check (its arrival rate, from the kernel's counter) less those it
// finished at this check (arrivals less the growth of its active
// connections) and less the growth of its share. Only once its spread is
// known; growth at predictGrows checks in a row — a queue that only wanders
// grows at every other one — the excess already predictNow of the bar (a
// backlog that is there, not noise extrapolated), and the kernel's counter
// agreeing: over its latest span the server finished fewer connections
// than it was sent (CheckRates).
func (gs *GuardState) predicted(o *Observed, excess, share float64, g GuardParams) prediction {
	var p prediction
	if !gs.ExcessSet || !gs.Spread.Known() {
		return p
	}
	arrivals := 0.0
	if gs.Rated {
		arrivals = gs.Arrivals
	}
	served := arrivals - float64(o.ActiveConns-gs.PrevActive)
	prevShare := float64(gs.PrevActive) - gs.Excess
	p.growth = excess - gs.Excess
	switch {
	case p.growth > 0:
		p.grows = gs.Grows + 1
	case p.growth > -predictTolerance:
		p.grows = gs.Grows
	}
	p.backlog = PredictBacklog(excess, arrivals, served, share-prevShare)
	p.ratio = math.Inf(1)
	if share > 0 {
		p.ratio = (share + p.backlog) / share
	}
	p.bar = PredictBar(share, gs.Spread.Sigma(), g)
	bar := p.bar
	p.over = p.grows >= predictGrows && p.backlog >= bar && excess >= predictNow*bar &&
		gs.Rated && FinishingLess(gs.Arrivals, gs.Served, gs.RateChecks) &&
		gs.overLevel(int(math.Round(share+p.backlog)), o.Kernel, share, g)
	return p
}

// holdOrRelease is guard for a held server; on is false when the guard is
// off (for its service), which ends every hold; predict as for detect.
func (e *Engine) holdOrRelease(o *Observed, gs *GuardState, d *Decision, tr *GuardTrace, med float64, inCycle, on, predict bool) {
	g := e.p.Guard
	if inCycle && d.Write {
		gs.Restore = d.To // the controller's latest weight
	}
	ratio, excess := BacklogRatio(o.ActiveConns, gs.From, gs.expectedMedian(med))
	changed := o.Kernel != gs.Weight // by someone else
	// Back to its share. Not on the excess: a server that stays slow holds
	// a few connections more than its share even at its cut weight, and
	// released on that it would pile up again at once. A raised server is
	// also back when its shortfall is under half of min_excess: an
	// overload that ended takes the median, and every shortfall, to 0.
	back := ratio <= g.Release
	if predict && !gs.Raised {
		// And no connection over its share: a cut on a prediction comes
		// while the backlog is still small, within release× of a share
		// of a few connections, or of hundreds of idle keep-alive ones.
		back = back && excess <= 0
	}
	if gs.Raised {
		back = ratio >= 1/g.Release || -excess < float64(g.MinExcess)/2
	}
	// The hold ends at a cycle, whose measurements then set the weight:
	// released between cycles, a server that lost capacity would get its
	// old weight back before the controller could lower it.
	if !on || inCycle && back || changed {
		tr.Event, tr.Ratio, tr.Active, tr.Restore = GuardReleased, ratio, o.ActiveConns, gs.Restore
		if !changed && !d.Write && gs.Restore != o.Kernel {
			what := "backlog gone"
			if gs.Raised {
				what = "share back"
			}
			propose(d, gs.Restore, fmt.Sprintf("%s (%d active connections, %.2f× its share): back to weight %d", what, o.ActiveConns, ratio, gs.Restore), 1)
		}
		kept := gs.kept()
		kept.PrevActive, kept.PrevInactive, kept.Checked = o.ActiveConns, o.InactiveConns, true
		*gs = kept
		return
	}
	gs.PrevActive = o.ActiveConns
	if !inCycle || !d.Write {
		return
	}
	if gs.Raised && d.To < gs.Weight || !gs.Raised && d.To > gs.Weight {
		tr.Event, tr.Controller = GuardKept, d.To
		d.Write, d.To, d.Record, d.RecordChanged, d.Reason, d.OnWrite = false, d.Before, o.Record, false, "", Commit{}
		return
	}
	gs.Weight = d.To
}

// GuardTable is the [backlog_guard] table.
func GuardTable() Table[GuardParams] {
	return Table[GuardParams]{Name: "backlog_guard", Params: []Param[GuardParams]{
		{Key: "check", Default: time.Second, Values: "duration ≥ 0", Reload: "next interval",
			Doc: "How often, between cycles, the monitor reads its IPVS table (only the table: no agent " +
				"poll, no probe) for a server whose active connections pile up — a server that suddenly " +
				"lost capacity builds a backlog under wrr before the next cycle can measure it — and for " +
				"one that looks dead (none established while its connections end: probed at once, and down " +
				"when refused). `\"0s\"` disables the guard. Services under a hashing scheduler (sh, dh, mh), " +
				"where a weight change remaps clients, are left alone. See " +
				"[design.md](developer/design.md#the-backlog-guard).",
			Check: func(p GuardParams) string {
				return refuse(p.Check < 0, "must not be negative (0 disables the guard), got %v", p.Check)
			},
		},
		{Key: "trigger", Default: 2.0, Values: "number > 1", Reload: "next check",
			Doc: "A server is backlogged when its active connections per unit of weight reach this multiple " +
				"of its service's median at two checks in a row, growing: its weight is cut to weight ÷ " +
				"that multiple (at least `weight.min`) and held — cycles may lower it, not raise it. With " +
				"`raise`, a server at most 1/trigger of the median at two checks in a row while the median " +
				"grows and stands at least `trigger` × its usual level at cycles (the service is building a " +
				"backlog) is starved: its weight is raised to weight ÷ that fraction, at most doubled, and " +
				"held up the same way. A server in slow start is never raised. Both compare with what the " +
				"server usually holds: the median times its usual ratio; where the median's share for a " +
				"server is under one connection (most of the service idle), a backlog must also reach this " +
				"multiple of the server's own usual level (its active connections per unit of weight at " +
				"past cycles) with `min_excess` more (design.md).",
			Check: func(p GuardParams) string {
				return refuse(!(p.Trigger > 1), "must be above 1 (a multiple of the median active connections per unit of weight), got %v", p.Trigger)
			},
		},
		{Key: "release", Default: 1.5, Values: "1…<`trigger`", Reload: "next check",
			Doc: "A hold ends at the first cycle at which the server's active connections per unit of its " +
				"weight before the move are back within this multiple of the median (at most `release`× " +
				"after a cut; at least 1/`release`, or less than half of `min_excess` under its share, " +
				"after a raise); the weight then goes back to what it was before the move, or to the " +
				"controller's latest decision since.",
			Near: "trigger",
			Check: func(p GuardParams) string {
				return refuse(!(p.Release >= 1 && p.Release < p.Trigger), "must be from 1 to below trigger (%v), got %v", p.Trigger, p.Release)
			},
		},
		{Key: "min_excess", Default: 16, Values: "integer ≥ 0", Reload: "next check",
			Doc: "…and only when it holds at least this many active connections more (backlogged) or fewer " +
				"(starved) than its weight's share of the median: a handful of connections is never a " +
				"backlog, whatever the ratio. A server with none established is probed as a dead one when " +
				"at least this many of its connections ended (inactive ones grew) since the last check.",
			Check: func(p GuardParams) string {
				return refuse(p.MinExcess < 0, "must not be negative, got %d", p.MinExcess)
			},
		},
		{Key: "raise", Default: true, Values: "boolean", Reload: "next check",
			Doc: "Raise starved servers too; `false`: the guard only cuts.",
		},
		{Key: "predict", Default: true, Values: "boolean", Reload: "next check",
			Doc: "Cut on the **predicted** backlog (seed 000's Q′ = Q + L − T·μ): a server's connections " +
				"over its share now, plus those it is sent until the next check (the rate the kernel's " +
				"connection counter showed) less those it finishes (sent less the growth of its active " +
				"connections at this check), less the growth of its share. It is cut when that prediction " +
				"reaches the larger of `min_excess` and 6 × how far its excess usually scatters from check " +
				"to check (at least √share), its excess is already ¾ of that and has grown at three checks " +
				"in a row, and the counter shows it finishing fewer than it is sent by more than one " +
				"Poisson standard deviation of what it was sent: before the backlog reaches `trigger` × its " +
				"share. The cut is the lower of weight ÷ the predicted ratio and weight × finished ÷ sent; " +
				"the hold then ends at a cycle only once the server holds no connection over its share. The " +
				"`trigger` rule above applies too. Only under a scheduler that places by weight alone (rr, " +
				"wrr, fo): lc, wlc, sed, nq, lblc, lblcr, ovf and twos already send a server whose active " +
				"connections grow fewer new ones, and there the guard cuts as with `false`. `false`: the " +
				"guard as before 2026-12, on the backlog it holds, at two checks in a row (see " +
				"[design.md](developer/design.md#the-backlog-guard)).",
		},
	}}
}
