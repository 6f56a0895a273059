package sim

import (
	"strings"
	"testing"
)

// pick runs n selections on dests; every chosen destination gains an
// active connection that never closes (so that the least-connection
// schedulers see their own choices). It returns the names, "-" for none.
func pick(t *testing.T, s Scheduler, d []Dest, n int) string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		k := s.Schedule(d)
		if k < 0 {
			out = append(out, "-")
			continue
		}
		d[k].Active++
		out = append(out, string(rune('A'+k)))
	}
	return strings.Join(out, "")
}

func weights(ws ...int) []Dest {
	d := make([]Dest, len(ws))
	for i, w := range ws {
		d[i].Weight = w
	}
	return d
}

func newSched(t *testing.T, name string, d []Dest) Scheduler {
	t.Helper()
	s, err := NewScheduler(name, d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The expected sequences below were worked out by hand from the kernel
// sources' loops (ip_vs_wrr.c, ip_vs_wlc.c, ip_vs_sed.c, ip_vs_lc.c,
// ip_vs_rr.c); the working is in the comments.

func TestWRRSequence(t *testing.T) {
	// gcd 1, mw 4, cw starts at 4: cw=4 → A; cw=3 → A B; cw=2 → A B C;
	// cw=1 → A B C; cw wraps to 4.
	d := weights(4, 3, 2)
	if got := pick(t, newSched(t, "wrr", d), d, 18); got != "AABABCABC"+"AABABCABC" {
		t.Errorf("wrr 4,3,2 = %s", got)
	}
}

func TestWRRGCD(t *testing.T) {
	// weights 4,6: gcd 2, mw = 6-(2-1) = 5. cw=5 → B; cw=3 → A B;
	// cw=1 → A B; cw=-1 wraps to 5 → B ...
	d := weights(4, 6)
	if got := pick(t, newSched(t, "wrr", d), d, 10); got != "BABAB"+"BABAB" {
		t.Errorf("wrr 4,6 = %s", got)
	}
}

func TestWRRSkipsZero(t *testing.T) {
	// weights 2,0,1: cw=2 → A; cw=1 → A C. B (weight 0) never.
	d := weights(2, 0, 1)
	if got := pick(t, newSched(t, "wrr", d), d, 9); got != "AACAACAAC" {
		t.Errorf("wrr 2,0,1 = %s", got)
	}
	d = weights(0, 0)
	if got := pick(t, newSched(t, "wrr", d), d, 2); got != "--" {
		t.Errorf("wrr all zero = %s", got)
	}
}

func TestWRRRestartsOnWeightChange(t *testing.T) {
	// 4,3,2: A A B leaves cw=3 with the cursor on B. Setting C to 5 runs
	// dest_changed: cursor back to the list head, gcd 1, mw 5, cw 3 kept
	// (≤ mw). So the next pick restarts at A, not after B:
	// cw=3 → A B C; cw=2 → A B C; cw=1 → A B C; wrap to 5 → C;
	// cw=4 → A C; cw=3 → A B C.
	d := weights(4, 3, 2)
	s := newSched(t, "wrr", d)
	if got := pick(t, s, d, 3); got != "AAB" {
		t.Fatalf("wrr before change = %s", got)
	}
	d[2].Weight = 5
	s.DestChanged(d)
	if got := pick(t, s, d, 15); got != "ABCABCABC"+"CAC"+"ABC" {
		t.Errorf("wrr after change = %s", got)
	}
}

func TestWRRChangeAboveMax(t *testing.T) {
	// 4,3,2 after A (cw=4, cursor A): lowering A to 2 makes mw 3 < cw, so
	// cw restarts at mw=3, cursor at the head: cw=3 → B; cw=2 → A B C;
	// cw=1 → A B C; wrap to 3 → B.
	d := weights(4, 3, 2)
	s := newSched(t, "wrr", d)
	pick(t, s, d, 1)
	d[0].Weight = 2
	s.DestChanged(d)
	if got := pick(t, s, d, 8); got != "BABCABCB" {
		t.Errorf("wrr after lowering the maximum = %s", got)
	}
}

func TestWLCSequence(t *testing.T) {
	// weights 1,2,3, connections never close; overhead = 256·active.
	// 1: all 0, tie → A (first).              A=1
	// 2: A 256; B 0: 256·2 > 0 → B; C 0: 0·3 > 0·2 no → B.   B=1
	// 3: A 256; B 256: 256·2 > 256·1 → B; C 0 → C.           C=1
	// 4: A 256; B: → B; C 256: 256·3 > 256·2 → C.            C=2
	// 5: A 256; B 256 → B; C 512: 256·3 > 512·2? no → B.     B=2
	// 6: A 256; B 512: 256·2 > 512·1? no; C 512: 256·3 > 512·1 → C. C=3
	// 7: A 256; B 512 no; C 768: 256·3 > 768·1? no → A.      A=2
	d := weights(1, 2, 3)
	if got := pick(t, newSched(t, "wlc", d), d, 7); got != "ABCCBCA" {
		t.Errorf("wlc 1,2,3 = %s", got)
	}
}

func TestWLCInactiveAndTies(t *testing.T) {
	s := newSched(t, "wlc", nil)
	// 300 inactive (overhead 300) loses to one active (256).
	d := []Dest{{Weight: 1, Inactive: 300}, {Weight: 1, Active: 1}}
	if k := s.Schedule(d); k != 1 {
		t.Errorf("wlc 300 inactive vs 1 active: picked %d, want 1", k)
	}
	// 256 inactive ties one active: the first listed wins.
	d = []Dest{{Weight: 1, Inactive: 256}, {Weight: 1, Active: 1}}
	if k := s.Schedule(d); k != 0 {
		t.Errorf("wlc tie: picked %d, want 0", k)
	}
	// Weight 0 is skipped even when idle and listed first.
	d = []Dest{{Weight: 0}, {Weight: 5, Active: 10}}
	if k := s.Schedule(d); k != 1 {
		t.Errorf("wlc weight 0 first: picked %d, want 1", k)
	}
	// Unequal weights, idle: the first listed wins whatever its weight
	// (the light-load tie-break).
	d = []Dest{{Weight: 1}, {Weight: 100}}
	if k := s.Schedule(d); k != 0 {
		t.Errorf("wlc idle tie: picked %d, want 0", k)
	}
	if k := s.Schedule([]Dest{{}, {}}); k != -1 {
		t.Errorf("wlc all weight 0: picked %d, want -1", k)
	}
}

func TestSEDSequence(t *testing.T) {
	// weights 1,2,3, overhead = active+1, never closing:
	// 1: A 1/1, B 1/2 → B, C 1/3 → C.                          C=1
	// 2: A 1; B 1: 1·2 > 1·1 → B; C 2: 1·3 > 2·2? no → B.     B=1
	// 3: A 1; B 2: 1·2 > 2·1? no; C 2: 1·3 > 2·1 → C.         C=2
	// 4: A 1; B 2 no; C 3: 1·3 > 3·1? no → A.                  A=1
	// 5: A 2; B 2: 2·2 > 2·1 → B; C 3: 2·3 > 3·2? no → B.     B=2
	// 6: A 2; B 3: 2·2 > 3·1 → B; C 3: 3·3 > 3·2 → C.         C=3
	d := weights(1, 2, 3)
	if got := pick(t, newSched(t, "sed", d), d, 6); got != "CBCABC" {
		t.Errorf("sed 1,2,3 = %s", got)
	}
	// sed ignores inactive connections.
	s := newSched(t, "sed", nil)
	if k := s.Schedule([]Dest{{Weight: 1, Inactive: 1000}, {Weight: 1}}); k != 0 {
		t.Errorf("sed with inactive: picked %d, want 0", k)
	}
}

func TestLCSequence(t *testing.T) {
	// least active·256+inactive, weights ignored except 0; ties → first.
	d := weights(1, 2, 3)
	if got := pick(t, newSched(t, "lc", d), d, 6); got != "ABCABC" {
		t.Errorf("lc = %s", got)
	}
	d = weights(0, 1, 1)
	if got := pick(t, newSched(t, "lc", d), d, 4); got != "BCBC" {
		t.Errorf("lc with weight 0 = %s", got)
	}
}

func TestRRSequence(t *testing.T) {
	d := weights(1, 0, 1, 1)
	s := newSched(t, "rr", d)
	if got := pick(t, s, d, 5); got != "ACDAC" {
		t.Errorf("rr = %s", got)
	}
	// rr has no upd_dest: a weight change does not move its cursor (on C).
	d[1].Weight = 1
	s.DestChanged(d)
	if got := pick(t, s, d, 5); got != "DABCD" {
		t.Errorf("rr after change = %s", got)
	}
}

// TestWRRRuns: wrr is not a smooth interleaving. With weights 399, 200,
// 100, 100 (gcd 1), cw counts down from 399 and only A qualifies until cw
// reaches 200: the first 200 connections of every round all go to A. With
// 40, 20, 10, 10: gcd 10, mw = 40-(10-1) = 31, cw = 31, 21, 11, 1 → A; A;
// A B; A B C D: runs of at most 3.
func TestWRRRuns(t *testing.T) {
	d := weights(399, 200, 100, 100)
	got := pick(t, newSched(t, "wrr", d), d, 201)
	if got != strings.Repeat("A", 200)+"B" {
		t.Errorf("wrr 399,200,100,100 starts %q…", got[:20])
	}
	d = weights(40, 20, 10, 10)
	if got := pick(t, newSched(t, "wrr", d), d, 8); got != "AAABABCD" {
		t.Errorf("wrr 40,20,10,10 = %s", got)
	}
}
