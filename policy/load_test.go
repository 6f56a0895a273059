package policy

import (
	"math"
	"testing"
	"time"
)

// webExample is the LVS document's web-cluster coefficient set.
var webExample = Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.3, Process: 0.1}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestAggregateLoad(t *testing.T) {
	tests := []struct {
		name string
		in   Inputs
		c    Coefficients
		want float64
	}{
		{"idle", Inputs{}, webExample, 0},
		// 0.1·1.2 + 0.3·0.5 + 0.1·0.4 + 0.1·0.2 + 0.3·0.8 + 0.1·0.3
		// = 0.12 + 0.15 + 0.04 + 0.02 + 0.24 + 0.03 = 0.60
		{"web example", Inputs{1.2, 0.5, 0.4, 0.2, 0.8, 0.3}, webExample, 0.60},
		// 0.1 + 0.27 + 0.05 + 0.02 + 0.45 + 0.06 = 0.95: exactly the target
		{"at target", Inputs{1, 0.9, 0.5, 0.2, 1.5, 0.6}, webExample, 0.95},
		{"cpu only", Inputs{CPU: 0.7, Memory: 0.9}, Coefficients{CPU: 1}, 0.7},
		// overloaded inputs above 1 count fully: 0.5·2 + 0.5·3 = 2.5
		{"overloaded", Inputs{CPU: 2, Response: 3}, Coefficients{CPU: 0.5, Response: 0.5}, 2.5},
	}
	for _, tt := range tests {
		if got := AggregateLoad(tt.in, tt.c); !near(got, tt.want) {
			t.Errorf("%s: AggregateLoad = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNextWeight(t *testing.T) {
	p := WeightParams{Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1}
	tests := []struct {
		name string
		w    float64
		load float64
		def  int
		want float64
	}{
		{"at target unchanged", 10, 0.95, 10, 10},
		// ∛(0.95 − 0.825) = ∛0.125 = 0.5; 10 + 5·0.5 = 12.5
		{"below target rises", 10, 0.825, 10, 12.5},
		// ∛(0.95 − 0.958) = ∛(−0.008) = −0.2; 10 − 5·0.2 = 9
		{"above target falls", 10, 0.958, 10, 9},
		// ∛(0.95 − 1.95) = −1; 10 − 5 = 5
		{"overloaded falls by gain", 10, 1.95, 10, 5},
		// ∛0.95 = 0.983048...; 10 + 4.915244 = 14.915244
		{"idle", 10, 0, 10, 10 + 5*math.Cbrt(0.95)},
		// 98 + 4.9 > 100 = scale·default
		{"capped at scale times default", 98, 0, 10, 100},
		// 2 − 5 < 1 = min: the formula never produces 0
		{"floored at min", 2, 1.95, 10, 1},
		// scale·default above the kernel bound: 65535
		{"kernel bound", 65534, 0, 10000, 65535},
	}
	for _, tt := range tests {
		if got := NextWeight(tt.w, tt.load, tt.def, p); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("%s: NextWeight(%v, %v) = %v, want %v", tt.name, tt.w, tt.load, got, tt.want)
		}
	}
}

func TestInputLoads(t *testing.T) {
	tests := []struct {
		name string
		in   []int64
		want []float64
	}{
		// mean 20: 10/20, 20/20, 30/20
		{"uneven", []int64{10, 20, 30}, []float64{0.5, 1, 1.5}},
		{"no traffic is neutral, never NaN", []int64{0, 0, 0}, []float64{1, 1, 1}},
		// unknown first server left out of the mean (20)
		{"unknown counter", []int64{-1, 10, 30}, []float64{1, 0.5, 1.5}},
		// mean 4: 0, 0, 12/4
		{"one server takes all", []int64{0, 0, 12}, []float64{0, 0, 3}},
		{"all unknown", []int64{-1, -1}, []float64{1, 1}},
		{"single server", []int64{7}, []float64{1}},
		{"empty", []int64{}, []float64{}},
	}
	for _, tt := range tests {
		got := InputLoads(tt.in)
		if len(got) != len(tt.want) {
			t.Fatalf("%s: len %d, want %d", tt.name, len(got), len(tt.want))
		}
		for i := range got {
			if !near(got[i], tt.want[i]) {
				t.Errorf("%s: INPUT[%d] = %v, want %v", tt.name, i, got[i], tt.want[i])
			}
		}
	}
}

func TestResponseLoad(t *testing.T) {
	tests := []struct {
		rtt, ref time.Duration
		want     float64
	}{
		{50 * time.Millisecond, 100 * time.Millisecond, 0.5},
		{250 * time.Millisecond, 100 * time.Millisecond, 2.5},
		{0, 100 * time.Millisecond, 0},
		{time.Millisecond, 0, 0},
	}
	for _, tt := range tests {
		if got := ResponseLoad(tt.rtt, tt.ref); !near(got, tt.want) {
			t.Errorf("ResponseLoad(%v, %v) = %v, want %v", tt.rtt, tt.ref, got, tt.want)
		}
	}
}

func TestPassesThreshold(t *testing.T) {
	tests := []struct {
		cur, next, th int
		want          bool
	}{
		{10, 11, 1, false},
		{10, 12, 1, true},
		{10, 8, 1, true},
		{10, 9, 1, false},
		{10, 10, 0, false},
		{10, 11, 0, true},
	}
	for _, tt := range tests {
		if got := PassesThreshold(tt.cur, tt.next, tt.th); got != tt.want {
			t.Errorf("PassesThreshold(%d, %d, %d) = %v, want %v", tt.cur, tt.next, tt.th, got, tt.want)
		}
	}
}

func TestRoundWeight(t *testing.T) {
	for in, want := range map[float64]int{12.5: 13, 12.49: 12, 1: 1, 0.5: 1} {
		if got := RoundWeight(in); got != want {
			t.Errorf("RoundWeight(%v) = %d, want %d", in, got, want)
		}
	}
}
