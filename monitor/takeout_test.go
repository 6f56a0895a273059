package monitor

import (
	"net/netip"
	"testing"
	"time"

	"lvs-feedback/ipvs"
)

// TestBacklogGuardTakeOut: the backlog check reads the connection table
// only when a server's counters point at it, and takes out, between
// cycles, a server whose connections are reset (under wrr: its inactive
// count hardly moves, Sinking cannot see it; the probe is refused) and one
// whose connections never complete their handshake (no probe: it would
// answer, the server answering only the director). A slow server, read
// too, keeps its weight.
func TestBacklogGuardTakeOut(t *testing.T) {
	r, m := newCapacityRig(t, "")
	setAllCPU(r, 0.5)
	vip := svcKey.Addr
	conns := func(rs netip.AddrPort, c ipvs.ConnCounts) {
		r.table.SetConnCounts(ipvs.ConnKey{Protocol: ipvs.TCP, VAddr: vip, Dest: rs}, c)
	}
	setConns := func(a, ia, b, ib, c, ic int) {
		t.Helper()
		must(t, r.table.SetActive(svcKey, rsA, a, ia))
		must(t, r.table.SetActive(svcKey, rsB, b, ib))
		must(t, r.table.SetActive(svcKey, rsC, c, ic))
	}
	setConns(1, 1200, 1, 1200, 1, 1200)
	cycle(t, m)
	guard(t, m)
	guard(t, m)
	if n := r.table.ConnReads(); n != 0 {
		t.Fatalf("nothing suspect: the connection table read %d times", n)
	}

	// A slow B: active 1 → 12 → 30, its connections established.
	conns(rsB, ipvs.ConnCounts{Handshakes: 1, Established: 30, Progressed: 2})
	for _, act := range []int{12, 30} {
		setConns(1, 1200, act, 1200, 1, 1200)
		guard(t, m)
		if w := r.weight(rsB); w == 0 {
			t.Fatalf("slow B at %d active: weight 0", act)
		}
	}
	if n := r.table.ConnReads(); n != 2 {
		t.Fatalf("slow B, growing at two checks: %d reads, want 2", n)
	}

	// B answers nobody: its handshakes pile up (active 30 → 40).
	conns(rsB, ipvs.ConnCounts{Handshakes: 10, Established: 2})
	setConns(1, 1200, 40, 1200, 1, 1200)
	guard(t, m)
	if w := r.weight(rsB); w != 0 {
		t.Fatalf("B's handshakes unanswered: weight %d, want 0", w)
	}
	if w := r.weight(rsA); w != 10 {
		t.Errorf("A: weight %d, want 10", w)
	}

	// C crashes under wrr: none active, inactive 1200 → 1195 (its resets
	// replace its closed connections), 8 resets; the probe is refused. With
	// B already down that is 2 of 3 servers: fail static, as a cycle would
	// (freeze_share 0.5), so C keeps its weight here...
	crashC := func(r *rig, m *Monitor, bActive, bInactive int) {
		t.Helper()
		r.table.SetConnCounts(ipvs.ConnKey{Protocol: ipvs.TCP, VAddr: vip, Dest: rsC}, ipvs.ConnCounts{Resets: 8})
		r.prober.mu.Lock()
		r.prober.down[rsC] = true
		r.prober.mu.Unlock()
		must(t, r.table.SetActive(svcKey, rsA, 1, 1200))
		must(t, r.table.SetActive(svcKey, rsB, bActive, bInactive))
		must(t, r.table.SetActive(svcKey, rsC, 0, 1195))
		guard(t, m)
	}
	crashC(r, m, 0, 0)
	if w := r.weight(rsC); w != 10 {
		t.Fatalf("C resets and refuses with B down: weight %d, want 10 (2 of 3 down: frozen)", w)
	}
	// ... and, B up, goes to 0 at once.
	r2, m2 := newCapacityRig(t, "")
	setAllCPU(r2, 0.5)
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		must(t, r2.table.SetActive(svcKey, rs, 1, 1200))
	}
	cycle(t, m2)
	guard(t, m2)
	crashC(r2, m2, 1, 1200)
	if w := r2.weight(rsC); w != 0 {
		t.Fatalf("C resets and refuses: weight %d, want 0", w)
	}
}

// slowConns is a table whose connection-table reads take delay, as the
// kernel's do on a director with a huge table.
type slowConns struct {
	*ipvs.Mem
	delay time.Duration
	reads int
}

func (s *slowConns) ConnStates(want map[netip.AddrPort]struct{}) (map[ipvs.ConnKey]ipvs.ConnCounts, error) {
	s.reads++
	time.Sleep(s.delay)
	return s.Mem.ConnStates(want)
}

// TestBacklogGuardConnReadSpaced: a read for a server whose connections
// pile up that takes more than 1/20 of the check period spaces the next
// such read by 20 times its duration (a 100 ms read, a 1 s check: none for
// 2 s); a cheap one (5 ms: 100 ms < 1 s) is made at every check that has
// a suspect.
func TestBacklogGuardConnReadSpaced(t *testing.T) {
	for _, tt := range []struct {
		delay time.Duration
		want  int
	}{{100 * time.Millisecond, 1}, {5 * time.Millisecond, 3}} {
		r, _ := newCapacityRig(t, "")
		r.cfg.Guard.Check = time.Second
		setAllCPU(r, 0.5)
		table := &slowConns{Mem: r.table, delay: tt.delay}
		store, err := NewFileStore(r.dir)
		must(t, err)
		m, err := New(r.cfg, Deps{Table: table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock}, false)
		must(t, err)
		must(t, r.table.SetActive(svcKey, rsB, 1, 10))
		cycle(t, m)
		guard(t, m)
		table.reads = 0
		for _, act := range []int{4, 6, 8} { // B suspect at each: 3 or more active, growing
			must(t, r.table.SetActive(svcKey, rsB, act, 10))
			guard(t, m)
		}
		if table.reads != tt.want {
			t.Errorf("reads of %v: %d in three quick checks, want %d", tt.delay, table.reads, tt.want)
		}
	}
}

// TestConnBudgetKinds: each kind of read is spaced by its own reads only,
// when its factor × a read's duration exceeds the check period (1 s): 50
// for the others, 20 for a read while a server piles up.
func TestConnBudgetKinds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var b connBudget
	steps := []struct {
		at       float64
		pilingUp bool
		allowed  bool
		took     time.Duration // spent when allowed
	}{
		{0, false, true, 100 * time.Millisecond}, // the others: 50 × 100 ms, next at 5 s
		{1, false, false, 0},
		{1, true, true, 40 * time.Millisecond},  // piling up: 20 × 40 ms = 800 ms ≤ 1 s, not spaced
		{2, true, true, 100 * time.Millisecond}, // 20 × 100 ms = 2 s: next at 4 s
		{3, true, false, 0},
		{4, true, true, 10 * time.Millisecond},
		{4.5, false, false, 0},
		{5, false, true, 0},
	}
	for _, s := range steps {
		if got := b.allows(at(s.at), s.pilingUp); got != s.allowed {
			t.Fatalf("at %gs, piling up %v: allowed %v, want %v", s.at, s.pilingUp, got, s.allowed)
		}
		if s.allowed {
			b.spend(at(s.at), s.took, time.Second, s.pilingUp)
		}
	}
}

// TestBacklogGuardPilingUpNotSpacedByOthers: a healthy service's short
// connections make a server suspect at every check (none active, its
// inactive count moving), and an expensive read for it spaces the next
// such read; a server whose connections pile up at the next check is read
// all the same, and taken down on its unanswered handshakes.
func TestBacklogGuardPilingUpNotSpacedByOthers(t *testing.T) {
	r, _ := newCapacityRig(t, "")
	r.cfg.Guard.Check = time.Second
	setAllCPU(r, 0.5)
	table := &slowConns{Mem: r.table, delay: 100 * time.Millisecond} // spaces a kind by 5 s
	store, err := NewFileStore(r.dir)
	must(t, err)
	m, err := New(r.cfg, Deps{Table: table, Agents: r.agents, Prober: r.prober, Store: store, Now: r.clock}, false)
	must(t, err)
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		must(t, r.table.SetActive(svcKey, rs, 1, 100))
	}
	cycle(t, m)
	guard(t, m)
	// A: none active while its inactive count moves, at this check and the next.
	must(t, r.table.SetActive(svcKey, rsA, 0, 110))
	guard(t, m)
	if table.reads != 1 {
		t.Fatalf("A suspect: %d reads, want 1", table.reads)
	}
	// B answers nobody: its handshakes pile up (1 → 12 active).
	r.table.SetConnCounts(ipvs.ConnKey{Protocol: ipvs.TCP, VAddr: svcKey.Addr, Dest: rsB}, ipvs.ConnCounts{Handshakes: 11})
	must(t, r.table.SetActive(svcKey, rsA, 0, 120))
	must(t, r.table.SetActive(svcKey, rsB, 12, 100))
	guard(t, m)
	if table.reads != 2 {
		t.Fatalf("B piling up after A's expensive read: %d reads, want 2", table.reads)
	}
	if w := r.weight(rsB); w != 0 {
		t.Errorf("B's handshakes unanswered: weight %d, want 0", w)
	}
}
