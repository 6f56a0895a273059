package sim

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFamilyDeterministic: a generated scenario is a pure function of
// (family, index); the families draw different clusters and never share a
// simulation seed with each other or with the shipped scenarios (1..5).
func TestFamilyDeterministic(t *testing.T) {
	a, err := GenerateScenario(FamilyTest, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateScenario(FamilyTest, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same (family, index) generated two different scenarios")
	}
	if a.Name != "test-03" {
		t.Errorf("name %q, want test-03", a.Name)
	}
	train, err := GenerateScenario(FamilyTrain, 3)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Servers, train.Servers) && reflect.DeepEqual(a.Events, train.Events) {
		t.Error("train-03 and test-03 are the same cluster")
	}

	seen := map[uint64]string{}
	for _, fam := range FamilyNames {
		scs, err := GenerateFamily(fam, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range scs {
			if len(sc.Seeds) != FamilySeedsPerScenario {
				t.Errorf("%s: %d seeds, want %d", sc.Name, len(sc.Seeds), FamilySeedsPerScenario)
			}
			for _, s := range sc.Seeds {
				if s < 1<<32 || (s%2 == 1) != (fam == FamilyTest) {
					t.Errorf("%s: seed %d: want ≥ 2³², odd for test, even for train", sc.Name, s)
				}
				if other, dup := seen[s]; dup {
					t.Errorf("seed %d used by %s and %s", s, other, sc.Name)
				}
				seen[s] = sc.Name
			}
		}
	}

	for _, c := range []struct {
		family string
		index  int
		want   string
	}{{"tuning", 0, `family "tuning"`}, {FamilyTest, -1, "negative index"}} {
		if _, err := GenerateScenario(c.family, c.index); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("GenerateScenario(%q, %d): error %v, want one containing %q", c.family, c.index, err, c.want)
		}
	}
}

// TestFamilyCoverage: across a family's first 200 scenarios every range
// the issue asks for is drawn, and every kind of event happens.
func TestFamilyCoverage(t *testing.T) {
	scs, err := GenerateFamily(FamilyTrain, 200)
	if err != nil {
		t.Fatal(err)
	}
	minN, maxN := 1000, 0
	minU, maxU := 1.0, 0.0
	var oneCore, bigCores, keepalive, flash, flapping, together, flashEvents int
	kinds := map[string]int{}
	for _, sc := range scs {
		n := len(sc.Servers)
		minN, maxN = min(minN, n), max(maxN, n)
		u := sc.Workload.Utilisation
		minU, maxU = min(minU, u), max(maxU, u)
		if u < 0.3 || u > 0.95 {
			t.Errorf("%s: load %v outside 0.3–0.95", sc.Name, u)
		}
		singles := 0
		for _, s := range sc.Servers {
			if s.Cores < 1 || s.Cores > 32 {
				t.Errorf("%s: %s has %v cores", sc.Name, s.Name, s.Cores)
			}
			if s.Cores == 1 {
				singles++
			}
			if s.Cores >= 16 {
				bigCores++
			}
		}
		if singles*3 >= n {
			oneCore++
		}
		if sc.Workload.Keepalive.Fraction > 0 {
			keepalive++
		}
		if len(sc.Workload.Flash) > 0 {
			flash++
			flashEvents += len(sc.Workload.Flash)
		}
		fails := map[string]int{}
		for i, e := range sc.Events {
			kinds[e.Kind]++
			if e.Kind == EvCrash || e.Kind == EvHang {
				fails[e.Server]++
			}
			if i > 0 && e.At == sc.Events[i-1].At && e.Server != sc.Events[i-1].Server && changesCapacity(e.Kind) {
				together++
			}
		}
		for _, c := range fails {
			if c >= 3 {
				flapping++
			}
		}
		if BaseRate := sc.BaseRate(); BaseRate > FamilyMaxRate*1.01 {
			t.Errorf("%s: arrival rate %.0f/s above the cap %d", sc.Name, BaseRate, FamilyMaxRate)
		}
	}
	if minN != 3 || maxN != 40 {
		t.Errorf("cluster sizes %d–%d, want 3–40", minN, maxN)
	}
	if minU > 0.35 || maxU < 0.9 {
		t.Errorf("loads %v–%v, want to span 0.3–0.95", minU, maxU)
	}
	for _, k := range []string{EvBackground, EvSpeed, EvDrift, EvCrash, EvHang, EvRecover, EvDrain, EvUndrain, EvAgentDown, EvAgentUp} {
		if kinds[k] < 10 {
			t.Errorf("event kind %s happens %d times in 200 scenarios, want at least 10", k, kinds[k])
		}
	}
	for _, c := range []struct {
		what string
		got  int
	}{
		{"a third or more 1-core servers", oneCore},
		{"servers of 16 cores or more", bigCores},
		{"keep-alive", keepalive},
		{"flash crowds", flash},
		{"flapping (3+ failures of one server)", flapping},
		{"capacity events on several servers at one instant", together},
	} {
		if c.got < 10 {
			t.Errorf("%s: %d in 200 scenarios, want at least 10", c.what, c.got)
		}
	}
	t.Logf("sizes %d–%d, loads %.2f–%.2f, event kinds %v, 1-core-heavy %d, keep-alive %d, flash %d (%d), flapping %d, together %d",
		minN, maxN, minU, maxU, kinds, oneCore, keepalive, flash, flashEvents, flapping, together)
}

// TestFamilyLoadBound: at no second does a generated scenario's offered
// load (wave peak and flash crowds included) exceed familyMaxLoad of the
// capacity its incidents leave (failed, drained, degraded, busy).
func TestFamilyLoadBound(t *testing.T) {
	scs, err := GenerateFamily(FamilyTest, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scs {
		// Replay the events on the servers' nominal capacities, taking each
		// drift at its target at once (the worse end).
		capNow := make([]float64, len(sc.Servers))
		speed := make([]float64, len(sc.Servers))
		bg := make([]float64, len(sc.Servers))
		off := make([]bool, len(sc.Servers))
		for k := range speed {
			speed[k] = 1
		}
		idx := map[string]int{}
		for k, s := range sc.Servers {
			idx[s.Name] = k
		}
		next := 0
		for sec := 0; sec < int(sc.Duration.Seconds()); sec++ {
			now := time.Duration(sec) * time.Second
			for next < len(sc.Events) && sc.Events[next].At <= now {
				e := sc.Events[next]
				k := idx[e.Server]
				switch e.Kind {
				case EvBackground:
					bg[k] = e.Fraction
				case EvSpeed, EvDrift:
					speed[k] = e.Factor
				case EvCrash, EvHang, EvDrain:
					off[k] = true
				case EvRecover, EvUndrain:
					off[k] = false
				}
				next++
			}
			avail := 0.0
			for k, s := range sc.Servers {
				capNow[k] = 0
				if !off[k] {
					capNow[k] = s.Capacity() * speed[k] * (1 - bg[k])
				}
				avail += capNow[k]
			}
			offered := sc.Workload.Utilisation * sc.NominalCapacity() * (1 + sc.Workload.Wave.Amplitude)
			for _, f := range sc.Workload.Flash {
				if now >= f.At && now < f.At+f.Length {
					offered *= f.Factor
				}
			}
			if offered > familyMaxLoad*avail*(1+1e-9) {
				t.Errorf("%s at %v: offered %.1f over available %.1f", sc.Name, now, offered, avail)
				break
			}
		}
	}
}

// TestFamilyEncodeRoundTrip: a generated scenario written as TOML reads
// back to the same scenario.
func TestFamilyEncodeRoundTrip(t *testing.T) {
	for i := 0; i < 30; i++ {
		sc, err := GenerateScenario(FamilyTest, i)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := EncodeScenario(&buf, sc); err != nil {
			t.Fatal(err)
		}
		back, err := ParseScenario(sc.Name+".toml", buf.Bytes())
		if err != nil {
			t.Fatalf("%s: %v\n%s", sc.Name, err, buf.String())
		}
		if !reflect.DeepEqual(sc, back) {
			t.Fatalf("%s: read back differs:\nwant %+v\ngot  %+v\n%s", sc.Name, sc, back, buf.String())
		}
	}
}

// TestFamilyScenarioRuns: a generated scenario runs under a monitor policy
// and the ideal, and the ideal does not lose to static equal weights.
func TestFamilyScenarioRuns(t *testing.T) {
	sc, err := GenerateScenario(FamilyTest, 1)
	if err != nil {
		t.Fatal(err)
	}
	sc = shorten(sc, 200*time.Second, 30*time.Second)
	seed := sc.Seeds[0]
	res := map[string]Result{}
	for _, p := range []string{PolEqual, PolIdeal, PolDefault} {
		spec, err := BuiltinPolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := RunOne(sc, seed, "wlc", spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.Requests == 0 {
			t.Fatalf("%s: no requests", p)
		}
		res[p] = r
	}
	if res[PolIdeal].P99 > res[PolEqual].P99 {
		t.Errorf("ideal p99 %v above equal's %v on unequal servers", res[PolIdeal].P99, res[PolEqual].P99)
	}
}

// TestSummariseFamily: geometric mean (finite values; ∞ counted apart),
// median, worst, the share within 10 % and the recovery times, over the
// family's scenarios only, per scheduler and policy.
func TestSummariseFamily(t *testing.T) {
	fam := []*Scenario{{Name: "f-00"}, {Name: "f-01"}, {Name: "f-02"}, {Name: "f-03"}, {Name: "f-04"}}
	inf := math.Inf(1)
	row := func(sc, pol string, ratio, failed float64, rec ...float64) Row {
		return Row{Scenario: sc, Scheduler: "wlc", Policy: pol, Ratio: Stat{Mean: ratio}, Failed: Stat{Mean: failed},
			Writes: Stat{Mean: 2}, SteadyWrites: Stat{Mean: 1}, Recoveries: rec}
	}
	rows := []Row{
		row("shipped", "default", 100, 0, 1000), // not in the family
		row("f-00", "default", 1, 0, 0, 10), row("f-01", "default", 4, 0.02, 20),
		row("f-02", "default", 1.05, 0, math.NaN()), row("f-03", "default", 2, 0.02, inf),
		row("f-04", "default", inf, 0.06, 5),
		row("f-00", "ideal", 1, 0, 0),
	}
	// Drifts followed at 10 % and 30 % lost, and one never followed.
	rows[2].DriftLosses, rows[4].DriftLosses = []float64{0.1, 0.3}, []float64{inf}
	got := SummariseFamily(rows, fam, []PolicySpec{{Name: "ideal"}, {Name: "default"}})
	if len(got) != 2 || got[0].Policy != "ideal" || got[1].Policy != "default" {
		t.Fatalf("summaries %+v, want ideal then default", got)
	}
	d := got[1]
	want := FamilySummary{Scheduler: "wlc", Policy: "default", Scenarios: 5,
		GeoMean: math.Pow(1*4*1.05*2, 0.25), Infinite: 1, Median: 2, Worst: inf, WorstScenario: "f-04",
		Within10: 0.4, Failed: 0.02, Writes: 2, SteadyWrites: 1,
		RecoveryMedian: 10, Recovery15: 0.6, // recoveries 0, 10, 20, ∞, 5
		DriftMedian: 0.3, Drift15: 1.0 / 3} // drifts 0.1, 0.3, ∞
	if math.Abs(d.GeoMean-want.GeoMean) > 1e-12 || math.Abs(d.Failed-want.Failed) > 1e-12 {
		t.Errorf("geo-mean %v fail %v, want %v %v", d.GeoMean, d.Failed, want.GeoMean, want.Failed)
	}
	d.GeoMean, d.Failed = want.GeoMean, want.Failed
	if d != want {
		t.Errorf("summary\n %+v, want\n %+v", d, want)
	}
	var buf bytes.Buffer
	if err := WriteFamilySummary(&buf, "Family f", got); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"### Family f", "| wlc   | default | 5 ", "| ∞ ", "| f-04 "} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, buf.String())
		}
	}
}
