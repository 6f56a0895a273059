package monitor

import (
	"strings"
	"testing"
	"time"
)

// TestFleetPlausibility: the bound, by hand. Interval 2 s: the floor is
// 10/s × 2 s = 20 connections, the bound 10 × the larger of it and the
// reference (the largest, over the last 3 cycles, of the leader's own
// figure and the lower median of the others').
func TestFleetPlausibility(t *testing.T) {
	type other struct {
		dir         string
		new, active int
	}
	for _, c := range []struct {
		name          string
		ownNew        int64
		ownActive     int
		others        []other
		prevRefs      [refWindow]int64 // new connections, the cycles before
		wantNew       int64            // the sum the controller sees
		wantActive    int
		wantRefused   []string
		wantBound     int64
		wantReference int64
	}{
		// own 100, others 120 and 90 (median 90): reference 100, bound 1,000.
		{"all plausible", 100, 5, []other{{"d2", 120, 6}, {"d3", 90, 4}}, [refWindow]int64{}, 310, 15, nil, 0, 0},
		// the forger's 1,000,000 against median min(120, 1e6) = 120: bound 1,200.
		{"one forger of three", 100, 5, []other{{"d2", 120, 6}, {"d3", 1_000_000, 4}}, [refWindow]int64{}, 220, 11, []string{"d3"}, 1200, 120},
		// 1,001 is just over 10 × 100.
		{"just over", 100, 5, []other{{"d2", 1001, 6}, {"d3", 100, 5}}, [refWindow]int64{}, 200, 10, []string{"d2"}, 1000, 100},
		// the leader out of ECMP (own 0), one other director idle (lower
		// median 0), little traffic: the floor (bound 200) lets 150 through
		// and refuses 201.
		{"floor", 0, 0, []other{{"d2", 150, 1}, {"d3", 0, 0}}, [refWindow]int64{}, 150, 1, nil, 0, 0},
		{"over the floor", 0, 0, []other{{"d2", 201, 1}, {"d3", 0, 0}}, [refWindow]int64{}, 0, 0, []string{"d2"}, 200, 0},
		// a burst the leader saw a cycle earlier (its reference then: 300).
		{"window", 0, 0, []other{{"d2", 2500, 1}, {"d3", 0, 0}}, [refWindow]int64{300, 0, 0}, 2500, 1, nil, 0, 0},
		// active connections are bounded too: 5,000 against 10 × max(5, 20).
		{"active", 100, 5, []other{{"d2", 100, 5_000}, {"d3", 100, 5}}, [refWindow]int64{}, 200, 10, []string{"d2"}, 1000, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := DestKey{Service: svcKey, Dest: rsA}
			m := &Monitor{cfg: Config{Interval: 2 * time.Second}, shared: &sharedFigures{local: map[DestKey]localFigures{}, refs: map[DestKey][2][refWindow]int64{}}}
			m.shared.refs[k] = [2][refWindow]int64{c.prevRefs}
			var figs []OtherFigures
			for _, o := range c.others {
				figs = append(figs, OtherFigures{Director: o.dir, New: int64(o.new), Active: o.active})
			}
			m.shared.others = map[DestKey][]OtherFigures{k: figs}
			st := &DestStatus{Key: k}
			st.NewConns, st.ActiveConns = c.ownNew, c.ownActive
			m.addOthers([]destRow{{st: st}})
			if st.NewConns != c.wantNew || st.ActiveConns != c.wantActive {
				t.Errorf("sums: new %d, active %d; want %d, %d", st.NewConns, st.ActiveConns, c.wantNew, c.wantActive)
			}
			var refused []string
			for _, r := range m.shared.refused {
				refused = append(refused, r.Director)
				if r.Bound != c.wantBound || r.Reference != c.wantReference {
					t.Errorf("%s refused with bound %d, reference %d; want %d, %d", r.Director, r.Bound, r.Reference, c.wantBound, c.wantReference)
				}
			}
			if strings.Join(refused, ",") != strings.Join(c.wantRefused, ",") {
				t.Errorf("refused %v, want %v", refused, c.wantRefused)
			}
		})
	}
}
