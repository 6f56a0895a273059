package nodeexp

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"lvs-feedback/agent"
)

// FuzzParse: no exposition panics Parse or Derive; what Parse accepts has
// finite values ≥ 0, and what Derive makes of it is a report lvs-agent's
// own decoder would accept (loads finite, within [0, agent.MaxLoad]).
// The committed seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	real, err := os.ReadFile("testdata/recommended-1.5.prom")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	f.Add([]byte(minimal))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		check := func(what string, v float64) {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("accepted %s = %v", what, v)
			}
		}
		for _, modes := range s.CPU {
			for m, v := range modes {
				check("cpu "+m, v)
			}
		}
		check("memory total", s.MemTotal)
		check("memory available", s.MemAvailable)
		check("procs running", s.ProcsRunning)
		for d, v := range s.DiskIOTime {
			check("disk "+d, v)
		}
		s.Target, s.At = "t", time.Unix(0, 0)
		cur := s
		cur.At = s.At.Add(5 * time.Second)
		cur.CPU = map[string]map[string]float64{}
		for c, modes := range s.CPU {
			cur.CPU[c] = map[string]float64{}
			for m, v := range modes {
				cur.CPU[c][m] = v + 1
			}
		}
		r, err := Derive(s, cur, time.Minute)
		if err != nil {
			return
		}
		for _, v := range []float64{r.CPU, r.Memory, r.Disk, r.Processes} {
			if math.IsNaN(v) || v < 0 || v > agent.MaxLoad {
				t.Fatalf("derived a load of %v: %+v", v, r)
			}
		}
	})
}
