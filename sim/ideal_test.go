package sim

import (
	"math"
	"slices"
	"testing"
)

// TestIdealIntegerWeights checks the ideal weights on hand-computed cases:
// the smallest integers whose shares are within 0.1 % of the capacity
// shares.
func TestIdealIntegerWeights(t *testing.T) {
	for _, tt := range []struct {
		name string
		caps []float64
		want []int
	}{
		// The case the old 0–100 grid got wrong (6, 13, 25, 50, 100:
		// gcd 1, shares off by up to 4 %).
		{"powers of two", []float64{1, 2, 4, 8, 16}, []int{1, 2, 4, 8, 16}},
		{"unequal 2/2/4/8 cores", []float64{2, 2, 4, 8}, []int{1, 1, 2, 4}},
		{"equal", []float64{4, 4, 4, 4}, []int{1, 1, 1, 1}},
		// background: 60 % of one of four 4-core servers → 1.6 = 2/5 of 4.
		{"a background job", []float64{4, 4, 4, 1.6}, []int{5, 5, 5, 2}},
		// degrade: a 4-core server at half speed next to 2, 2, 4 cores.
		{"half speed", []float64{2, 2, 4, 2}, []int{1, 1, 2, 1}},
		{"down and drained get 0", []float64{4, 0, 4, 0}, []int{1, 0, 1, 0}},
		{"nothing up", []float64{0, 0}, []int{0, 0}},
		// 1:√2. m = 17 gives 12:17 (share 12/29 = 0.41379 against
		// 0.41421, 0.10 % off: just outside), m = 24 gives 17:24 (0.101 %
		// off), m = 41 gives 29:41 (29/70 = 0.414286, 0.017 % off).
		{"irrational ratio", []float64{1, math.Sqrt2}, []int{29, 41}},
		// 1:1.001 — shares 0.49975 against 0.5, 0.05 % off: 1:1 is exact
		// enough.
		{"within the tolerance", []float64{1, 1.001}, []int{1, 1}},
		// 1e-9:3 cannot be written: the largest weight and a floor of 1.
		{"beyond the kernel's range", []float64{3, 1e-9}, []int{MaxKernelWeight, 1}},
	} {
		if got := idealIntegerWeights(tt.caps); !slices.Equal(got, tt.want) {
			t.Errorf("%s: idealIntegerWeights(%v) = %v, want %v", tt.name, tt.caps, got, tt.want)
		}
	}
}

// TestIdealMatchesCapacityWeights: on capacities 1, 2, 4, 8, 16 the old
// 0–100 grid wrote 6, 13, 25, 50, 100 and the "ideal" lost to static
// capacity weights under wrr; the exact ideal writes the proportions of
// the configured weights (10, 20, 40, 80, 160), which wrr interleaves
// identically, so with nothing happening both runs serve the same
// requests the same way.
func TestIdealMatchesCapacityWeights(t *testing.T) {
	sc, err := ParseScenario("powers", []byte(`
duration = "120s"
warmup = "20s"
[workload]
utilisation = 0.7
mean_demand = "20ms"
[[server]]
name = "a"
speed = 1
cores = 1
[[server]]
name = "b"
speed = 1
cores = 2
[[server]]
name = "c"
speed = 1
cores = 4
[[server]]
name = "d"
speed = 1
cores = 8
[[server]]
name = "e"
speed = 1
cores = 16
`))
	if err != nil {
		t.Fatal(err)
	}
	nominal, err := RunOne(sc, 1, "wrr", PolicySpec{Name: PolNominal})
	if err != nil {
		t.Fatal(err)
	}
	ideal, err := RunOne(sc, 1, "wrr", PolicySpec{Name: PolIdeal})
	if err != nil {
		t.Fatal(err)
	}
	if ideal.P99 != nominal.P99 || ideal.Mean != nominal.Mean {
		t.Errorf("ideal p99 %.4fs mean %.4fs, static capacity weights p99 %.4fs mean %.4fs: want equal",
			ideal.P99, ideal.Mean, nominal.P99, nominal.Mean)
	}
}
