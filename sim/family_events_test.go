package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

// twoServers is a small cluster (two 2-core servers at 30 % load) with the
// given events, checked.
func twoServers(t *testing.T, dur time.Duration, events ...EventSpec) *Scenario {
	t.Helper()
	sc := &Scenario{
		Name:     "events",
		Duration: dur,
		Warmup:   10 * time.Second,
		Workload: Workload{Utilisation: 0.3, MeanDemand: 10 * time.Millisecond, Demand: "exp"},
		Servers:  []ServerSpec{{Name: "a", Speed: 1, Cores: 2}, {Name: "b", Speed: 1, Cores: 2}},
		Events:   events,
	}
	if err := sc.Check(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestDrift: a drift from ×1 to ×0.5 over 100 s starting at 100 s has
// moved half-way at 150 s (capacity 2 → 1.5) and all the way from 200 s
// on; the ideal weights settling is judged against are the drift's end.
func TestDrift(t *testing.T) {
	drift := EventSpec{At: 100 * time.Second, Server: "a", Kind: EvDrift, Factor: 0.5, Over: 100 * time.Second}
	for _, c := range []struct {
		end  time.Duration
		want float64 // server a's capacity when the run stops
	}{
		{101 * time.Second, 1.99}, // one step
		{125 * time.Second, 1.75},
		{150 * time.Second, 1.5},
		{199 * time.Second, 1.01},
		{300 * time.Second, 1},
	} {
		sc := twoServers(t, c.end, drift)
		r := runInternal(t, sc, 1, "wlc", PolicySpec{Name: PolEqual})
		if got := r.srv[0].capacity; math.Abs(got-c.want) > 1e-9 {
			t.Errorf("run ending at %v: capacity %v, want %v", c.end, got, c.want)
		}
		if got := r.srv[1].capacity; got != 2 {
			t.Errorf("run ending at %v: the other server's capacity %v, want 2", c.end, got)
		}
	}

	sc := twoServers(t, 300*time.Second, drift)
	r := runInternal(t, sc, 1, "wlc", PolicySpec{Name: PolIdeal})
	if got, want := r.idealW[0], r.idealWeights(); !equalInts(got, want) {
		t.Errorf("drift's ideal weights %v, want those at its end %v", got, want)
	}
	// The ideal policy follows every step: a's weight share is strictly
	// falling during the drift.
	w := []int{r.initW[0], r.initW[1]}
	var shares []float64
	for j, h := range r.history {
		w[h.k] = h.w
		last := j+1 == len(r.history) || r.history[j+1].t != h.t
		if last && h.t > 100 && h.t <= 200 {
			shares = append(shares, float64(w[0])/float64(w[0]+w[1]))
		}
	}
	if len(shares) < 90 {
		t.Fatalf("ideal policy changed the weights %d times during the drift, want about one per step (100)", len(shares))
	}
	for i := 1; i < len(shares); i++ {
		if shares[i] >= shares[i-1] {
			t.Fatalf("a's ideal share not falling during the drift: %v", shares)
		}
	}
	if got := shares[len(shares)-1]; math.Abs(got-1.0/3) > 0.001 {
		t.Errorf("a's ideal share at the drift's end %v, want 1/3", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDriftStoppedBySpeed: a speed step on the server stops a drift in
// progress, and a second drift takes over from where the first got to.
func TestDriftStoppedBySpeed(t *testing.T) {
	sc := twoServers(t, 300*time.Second,
		EventSpec{At: 100 * time.Second, Server: "a", Kind: EvDrift, Factor: 0.5, Over: 100 * time.Second},
		EventSpec{At: 120 * time.Second, Server: "a", Kind: EvSpeed, Factor: 0.8})
	r := runInternal(t, sc, 1, "wlc", PolicySpec{Name: PolEqual})
	if got := r.srv[0].capacity; math.Abs(got-1.6) > 1e-9 {
		t.Errorf("capacity %v after the speed step, want 1.6 (the drift stopped)", got)
	}

	// A second drift at 150.5 s, from ×0.75 (the first's step at 150 s)
	// back to ×1 over 50 s: half-way, ×0.875, at 175.5 s.
	sc = twoServers(t, 175500*time.Millisecond,
		EventSpec{At: 100 * time.Second, Server: "a", Kind: EvDrift, Factor: 0.5, Over: 100 * time.Second},
		EventSpec{At: 150500 * time.Millisecond, Server: "a", Kind: EvDrift, Factor: 1, Over: 50 * time.Second})
	r = runInternal(t, sc, 1, "wlc", PolicySpec{Name: PolEqual})
	if got := r.srv[0].capacity; math.Abs(got-2*0.875) > 1e-9 {
		t.Errorf("capacity %v, want %v", got, 2*0.875)
	}
}

// TestFlashCrowd: a flash crowd ×2 from 100 s for 50 s doubles the
// arrivals in its window and leaves the rest of the stream alone.
func TestFlashCrowd(t *testing.T) {
	sc := twoServers(t, 300*time.Second)
	w := sc.Workload
	w.Flash = []FlashCrowd{{At: 100 * time.Second, Length: 50 * time.Second, Factor: 2}}
	for _, c := range []struct{ t, want float64 }{{99.9, 1}, {100, 2}, {149.9, 2}, {150, 1}} {
		if got := rateFactor(w, c.t); got != c.want {
			t.Errorf("rate factor at %vs = %v, want %v", c.t, got, c.want)
		}
	}
	sc.Workload = w
	st := NewStream(sc, 2)
	count := func(from, to float64) float64 {
		n := 0
		for _, a := range st.Arrive {
			if a >= from && a < to {
				n++
			}
		}
		return float64(n)
	}
	before, during, after := count(50, 100), count(100, 150), count(150, 200)
	expect := sc.BaseRate() * 50
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"before", before, expect}, {"during", during, 2 * expect}, {"after", after, expect}} {
		if math.Abs(c.got/c.want-1) > 0.05 {
			t.Errorf("%s: %v arrivals in 50 s, want about %v", c.name, c.got, c.want)
		}
	}
}

// TestNewEventChecks: bad drifts and flash crowds are errors naming them.
func TestNewEventChecks(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{`[[event]]
at = "10s"
server = "a"
kind = "drift"
factor = 0.5`, "drift needs a positive factor and a positive over"},
		{`[[event]]
at = "10s"
server = "a"
kind = "drift"
over = "10s"`, "drift needs a positive factor and a positive over"},
		{`[[workload.flash]]
at = "10s"
factor = 2`, "workload.flash 0"},
	} {
		doc := "duration = \"100s\"\n[workload]\nutilisation = 0.5\nmean_demand = \"10ms\"\n[[server]]\nname = \"a\"\nspeed = 1\n"
		// Tables after [[server]]: a flash crowd belongs to the workload.
		_, err := ParseScenario("bad", []byte(doc+c.toml+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.toml, err, c.want)
		}
	}
}
