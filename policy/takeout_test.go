package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"lvs-feedback/ipvs"
)

// TestSuspect: the cheap counters that make a server worth reading in the
// connection table, by hand.
func TestSuspect(t *testing.T) {
	for _, tt := range []struct {
		name                                   string
		active, prevActive, inactive, prevInac int
		checked, want, pilingUp                bool
	}{
		{"refusing: none active, inactive moves", 0, 0, 1190, 1200, true, true, false},
		{"idle: none active, nothing moves", 0, 0, 1200, 1200, true, false, false},
		{"first reading: nothing to compare", 0, 0, 1190, 0, false, false, false},
		{"unanswered: 3 active, growing", 3, 1, 50, 50, true, true, true},
		{"unanswered at a first reading", 3, 0, 50, 0, false, true, true},
		{"2 active, growing: too few", 2, 0, 50, 50, true, false, false},
		{"40 active, not growing", 40, 40, 50, 60, true, false, false},
		{"40 active, fewer than before", 40, 45, 50, 60, true, false, false},
	} {
		if got := Suspect(tt.active, tt.prevActive, tt.inactive, tt.prevInac, tt.checked); got != tt.want {
			t.Errorf("%s: Suspect(%d, %d, %d, %d, %v) = %v, want %v", tt.name, tt.active, tt.prevActive, tt.inactive, tt.prevInac, tt.checked, got, tt.want)
		}
		if got := PilingUp(tt.active, tt.prevActive); got != tt.pilingUp {
			t.Errorf("%s: PilingUp(%d, %d) = %v, want %v", tt.name, tt.active, tt.prevActive, got, tt.pilingUp)
		}
	}
}

// TestRefusingUnanswered: the connection table's rules, by hand. A crash:
// new connections reset, none active or established. A server that
// answers nobody (or only the director): handshakes pile up, nothing
// progresses. A slow server: many established, its handshakes complete —
// never unanswered, however many it holds.
func TestRefusingUnanswered(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		c                    ipvs.ConnCounts
		refusing, unanswered bool
	}{
		{"crash: 10 reset, nothing else", ipvs.ConnCounts{Resets: 10}, true, false},
		{"crash: 2 reset: probed", ipvs.ConnCounts{Resets: 2}, true, false},
		{"1 reset: a client's doing", ipvs.ConnCounts{Resets: 1, Progressed: 5, Established: 5}, false, false},
		{"crash moments after: 5 reset, 4 closed normally a moment before", ipvs.ConnCounts{Resets: 5, Progressed: 4}, true, false},
		{"hung: 10 handshakes, nothing else", ipvs.ConnCounts{Handshakes: 10}, false, true},
		{"hung with 2 old established, silent", ipvs.ConnCounts{Handshakes: 5, Established: 2}, false, true},
		{"3 handshakes: at the threshold", ipvs.ConnCounts{Handshakes: 3}, false, true},
		{"2 handshakes: caught in flight", ipvs.ConnCounts{Handshakes: 2}, false, false},
		{"hung 0.3 s ago: the second's closes before it", ipvs.ConnCounts{Handshakes: 3, Progressed: 7}, false, false},
		{"hung 1 s ago: one closed connection's retransmission", ipvs.ConnCounts{Handshakes: 10, Progressed: 1, Established: 1}, false, true},
		{"hung 14 s ago: a few retransmissions keep entries fresh", ipvs.ConnCounts{Handshakes: 24, Progressed: 3}, false, true},
		{"healthy, clients far away: handshakes for a round trip", ipvs.ConnCounts{Handshakes: 30, Established: 10, Progressed: 100}, false, false},
		{"slow: 50 established, silent, 3 handshakes", ipvs.ConnCounts{Handshakes: 3, Established: 50}, false, false},
		{"slow: 50 established, 2 fresh, 8 handshakes", ipvs.ConnCounts{Handshakes: 8, Established: 50, Progressed: 2}, false, false},
		{"overloaded: as many handshakes as established, none fresh", ipvs.ConnCounts{Handshakes: 20, Established: 20}, false, false},
		{"both: handshakes stuck and resets", ipvs.ConnCounts{Handshakes: 4, Resets: 4}, true, true},
	} {
		if got := Refusing(tt.c); got != tt.refusing {
			t.Errorf("%s: Refusing(%+v) = %v, want %v", tt.name, tt.c, got, tt.refusing)
		}
		if got := Unanswered(tt.c); got != tt.unanswered {
			t.Errorf("%s: Unanswered(%+v) = %v, want %v", tt.name, tt.c, got, tt.unanswered)
		}
	}
}

// takeoutRig is a service of four servers at weight 10 under the backlog
// guard's defaults, read twice (the first reading compares with nothing).
type takeoutRig struct {
	t      *testing.T
	e      *Engine
	st     *ServiceState
	states []*ServerState
}

func newTakeoutRig(t *testing.T) *takeoutRig {
	e, err := NewEngine(Params{Coefficients: Coefficients{CPU: 1}, Weight: WeightParams{Controller: ControllerCapacity, Min: 1, Anchor: 0.15},
		Availability: Availability{FreezeShare: 0.5, Fall: 2, Rise: 1},
		Guard:        GuardParams{Check: time.Second, Trigger: 2, Release: 1.5, MinExcess: 16, Raise: true}})
	if err != nil {
		t.Fatal(err)
	}
	return &takeoutRig{t: t, e: e, st: &ServiceState{}, states: []*ServerState{{}, {}, {}, {}}}
}

// check runs one backlog check with these (active, inactive) per server,
// then the table's evidence conns (nil: not read) and, for the servers the
// evidence says to probe, the probe errors probe (nil: answered), then
// TakeDownSinks. It returns the servers.
func (r *takeoutRig) check(active, inactive [4]int, conns []ipvs.ConnCounts, probe []error) []Server {
	servers := make([]Server, 4)
	for i := range servers {
		o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: active[i], InactiveConns: inactive[i]}
		servers[i] = Server{Obs: o, State: r.states[i], Out: &Decision{}}
	}
	r.e.Check(Service{}, r.st, servers)
	if conns == nil {
		return servers
	}
	ok := make([]bool, 4)
	for i := range ok {
		ok[i] = true
	}
	r.e.TableEvidence(servers, conns, ok)
	for i, sv := range servers {
		if g := sv.Out.Trace.Guard; g != nil && (g.Event == GuardReset || g.Event == GuardSink) {
			sv.Obs.Probed, sv.Obs.ProbeErr = true, probe[i]
			sv.Obs.ProbeTimedOut = errors.Is(probe[i], context.DeadlineExceeded)
		}
	}
	r.e.TakeDownSinks(servers)
	return servers
}

func down(sv Server) bool { return sv.Out.Write && sv.Out.To == 0 && sv.Out.Record.State == Down }

// TestTakeOutCrashUnderWRR: under wrr a crashed server's resets replace
// its closed connections one for one: its inactive count barely moves
// (1200 → 1195), none active, so Sinking cannot see it; the table shows 10
// reset and the probe is refused: down at this check, its peers untouched.
func TestTakeOutCrashUnderWRR(t *testing.T) {
	r := newTakeoutRig(t)
	r.check([4]int{1, 0, 2, 1}, [4]int{1200, 1200, 1200, 1200}, nil, nil)
	refused := errors.New("connect: connection refused")
	conns := []ipvs.ConnCounts{{Established: 1, Progressed: 8}, {Resets: 10}, {Established: 2, Progressed: 9}, {Established: 1, Progressed: 9}}
	sv := r.check([4]int{2, 0, 1, 1}, [4]int{1203, 1195, 1201, 1199}, conns, []error{nil, refused, nil, nil})
	if g := sv[1].Out.Trace.Guard; g == nil || g.Event != GuardReset || g.Conns.Resets != 10 {
		t.Fatalf("crashed B: trace %+v, want GuardReset with 10 resets", g)
	}
	if !down(sv[1]) || !strings.Contains(sv[1].Out.Reason, "10 of its connections were reset") || sv[1].Out.Record.RestoreWeight != 10 {
		t.Fatalf("crashed B: %+v, want down for its 10 resets, restore weight 10", sv[1].Out)
	}
	for _, i := range []int{0, 2, 3} {
		if sv[i].Out.Write {
			t.Errorf("server %d written: %+v", i, sv[i].Out)
		}
	}
	// A client's resets of a healthy server: the probe answers, nothing is
	// written.
	r = newTakeoutRig(t)
	r.check([4]int{1, 0, 2, 1}, [4]int{1200, 1200, 1200, 1200}, nil, nil)
	sv = r.check([4]int{2, 0, 1, 1}, [4]int{1203, 1195, 1201, 1199}, conns, []error{nil, nil, nil, nil})
	if sv[1].Out.Write {
		t.Fatalf("B reset 10 connections but answered the probe: %+v", sv[1].Out)
	}
}

// TestTakeOutUnanswered: a server that answers nobody, or only the
// director (NAT: its answers to the clients never come back through the
// director), holds its new connections in their handshake: down at once,
// no probe (none can tell); its trace says what the table showed.
func TestTakeOutUnanswered(t *testing.T) {
	r := newTakeoutRig(t)
	r.check([4]int{1, 1, 0, 1}, [4]int{1200, 1200, 1200, 1200}, nil, nil)
	conns := []ipvs.ConnCounts{{Established: 1, Progressed: 8}, {Handshakes: 9, Established: 1}, {Progressed: 9}, {Established: 1, Progressed: 9}}
	sv := r.check([4]int{1, 10, 0, 1}, [4]int{1201, 1190, 1202, 1199}, conns, make([]error, 4))
	if g := sv[1].Out.Trace.Guard; g == nil || g.Event != GuardUnanswered || g.Conns.Handshakes != 9 {
		t.Fatalf("B: trace %+v, want GuardUnanswered with 9 handshakes", g)
	}
	if sv[1].Obs.Probed {
		t.Fatal("B probed: a probe cannot tell")
	}
	if !down(sv[1]) || !strings.Contains(sv[1].Out.Reason, "its connections never complete: 9 unanswered handshakes, 1 established, 0 with a packet") {
		t.Fatalf("B: %+v, want down", sv[1].Out)
	}
	for _, i := range []int{0, 2, 3} {
		if sv[i].Out.Write {
			t.Errorf("server %d written: %+v", i, sv[i].Out)
		}
	}
}

// TestTakeOutSlowNever: a slow server piles up established connections
// (active 12 → 30): suspect, read, and never taken down — its handshakes
// complete and it holds far more established than waiting.
func TestTakeOutSlowNever(t *testing.T) {
	r := newTakeoutRig(t)
	r.check([4]int{1, 12, 1, 1}, [4]int{1200, 1200, 1200, 1200}, nil, nil)
	for k, c := range []ipvs.ConnCounts{
		{Handshakes: 1, Established: 30, Progressed: 3},
		{Handshakes: 4, Established: 48},  // silent for a second: its requests take seconds
		{Handshakes: 20, Established: 66}, // its accept queue full
	} {
		active := 30 + 18*k
		sv := r.check([4]int{1, active, 1, 1}, [4]int{1201, 1190, 1202, 1199}, []ipvs.ConnCounts{{Progressed: 9}, c, {Progressed: 9}, {Progressed: 9}}, make([]error, 4))
		if !sv[1].State.Guard.Suspect {
			t.Fatalf("%d: slow B with active growing to %d not suspect", k, active)
		}
		if down(sv[1]) {
			t.Fatalf("%d: slow B (%+v) taken down: %s", k, c, sv[1].Out.Reason)
		}
		if g := sv[1].Out.Trace.Guard; g != nil && (g.Event == GuardUnanswered || g.Event == GuardReset) {
			t.Fatalf("%d: slow B (%+v): trace %+v", k, c, g)
		}
	}
}

// TestTakeOutFreezes: three of four servers' connections never complete
// at once — the director is more likely cut off: nothing is written (fail
// static); two of four, at the share, go down.
func TestTakeOutFreezes(t *testing.T) {
	stuck := ipvs.ConnCounts{Handshakes: 9}
	for _, tt := range []struct {
		conns []ipvs.ConnCounts
		want  int
	}{
		{[]ipvs.ConnCounts{stuck, stuck, stuck, {Progressed: 9}}, 0},
		{[]ipvs.ConnCounts{stuck, stuck, {Progressed: 9}, {Progressed: 9}}, 2},
	} {
		r := newTakeoutRig(t)
		r.check([4]int{1, 1, 1, 1}, [4]int{1200, 1200, 1200, 1200}, nil, nil)
		sv := r.check([4]int{10, 10, 10, 10}, [4]int{1190, 1190, 1190, 1190}, tt.conns, make([]error, 4))
		n := 0
		for _, s := range sv {
			if down(s) {
				n++
			}
		}
		if n != tt.want {
			t.Errorf("%+v: %d down, want %d", tt.conns, n, tt.want)
		}
	}
}

// TestTableEvidenceOnlySuspects: the table's counts of a server whose
// counters did not point at it (not suspect), or that was not read, are
// not acted on; nor is a server already found sinking given a second probe.
func TestTableEvidenceOnlySuspects(t *testing.T) {
	r := newTakeoutRig(t)
	r.check([4]int{1, 1, 1, 1}, [4]int{1200, 1200, 1200, 1200}, nil, nil)
	// B: 5 active, not growing since... first growing; C: not suspect (2 active).
	servers := make([]Server, 4)
	act := [4]int{1, 5, 2, 1}
	for i := range servers {
		o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10, ActiveConns: act[i], InactiveConns: 1200}
		servers[i] = Server{Obs: o, State: r.states[i], Out: &Decision{}}
	}
	r.e.Check(Service{}, r.st, servers)
	stuck := ipvs.ConnCounts{Handshakes: 9}
	r.e.TableEvidence(servers, []ipvs.ConnCounts{stuck, stuck, stuck, stuck}, []bool{true, false, true, true})
	for i, sv := range servers {
		if g := sv.Out.Trace.Guard; g != nil && g.Event == GuardUnanswered {
			t.Errorf("server %d (suspect %v) marked unanswered", i, sv.State.Guard.Suspect)
		}
	}
	if !servers[1].State.Guard.Suspect || servers[2].State.Guard.Suspect {
		t.Fatalf("suspects %v %v, want B only", servers[1].State.Guard.Suspect, servers[2].State.Guard.Suspect)
	}
}

// TestTakeOutCountsServersAlreadyDown: fail static counts the servers
// already down with the ones found at this check, as a cycle does (it
// probes them too). Of four at freeze_share 0.5: one down and two new is 3
// of 4 — nothing is done; one down and one new is 2 of 4 — the new one
// goes. So servers found one check after another cannot take the whole
// service to 0.
func TestTakeOutCountsServersAlreadyDown(t *testing.T) {
	for _, tt := range []struct{ newly, want int }{{2, 0}, {1, 1}} {
		r := newTakeoutRig(t)
		servers := make([]Server, 4)
		for i := range servers {
			o := &Observed{Record: DestRecord{State: Managed}, Configured: 10, Kernel: 10}
			d := &Decision{}
			switch {
			case i == 0:
				o.Record.State, o.Kernel = Down, 0
			case i <= tt.newly:
				d.Trace.Guard = &GuardTrace{Event: GuardUnanswered}
			}
			servers[i] = Server{Obs: o, State: r.states[i], Out: d}
		}
		if n := r.e.TakeDownSinks(servers); n != tt.want {
			t.Errorf("one down, %d found unanswered: %d marked down, want %d", tt.newly, n, tt.want)
		}
	}
}
