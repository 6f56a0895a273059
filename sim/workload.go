package sim

import (
	"math"
	"math/rand/v2"
)

// Stream is the request stream of one seed: every policy run of that seed
// replays the same arrivals, demands and keep-alive times.
type Stream struct {
	Arrive []float64 // arrival time, seconds, ascending
	Demand []float64 // work, seconds at speed 1
	Idle   []float32 // keep-alive idle time after the response, seconds (0: closes at once)
	IO     []float64 // I/O work, seconds at disk speed 1, done before the CPU's; nil without I/O (disk.go)
}

// Len is the number of requests.
func (s *Stream) Len() int { return len(s.Arrive) }

// RNG stream identifiers: each purpose draws from its own PCG stream of the
// seed, so adding draws for one purpose never shifts another.
const (
	streamWorkload = 1
	streamPhase    = 2
	streamTick     = 3
	streamAgent    = 1000 // + server index
	streamProbe    = 2000 // + server index
)

func newRand(seed uint64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^stream))
}

// DemandSampler draws service demands.
type DemandSampler struct {
	kind   string
	mean   float64
	alpha  float64
	lo, hi float64
	ratA   float64 // (lo/hi)^α
}

// NewDemandSampler returns a sampler of the workload's demand distribution
// with the configured mean.
func NewDemandSampler(w Workload) DemandSampler {
	d := DemandSampler{kind: w.Demand, mean: w.MeanDemand.Seconds(), alpha: w.Alpha}
	if d.kind == "pareto" {
		r := w.MaxRatio
		a := w.Alpha
		// Mean of the bounded Pareto on [1, r].
		m1 := a / (a - 1) * (1 - math.Pow(r, 1-a)) / (1 - math.Pow(r, -a))
		d.lo = d.mean / m1
		d.hi = d.lo * r
		d.ratA = math.Pow(d.lo/d.hi, a)
	}
	return d
}

// Sample draws one demand.
func (d DemandSampler) Sample(r *rand.Rand) float64 {
	switch d.kind {
	case "exp":
		return r.ExpFloat64() * d.mean
	case "fixed":
		return d.mean
	}
	// Inverse CDF of the bounded Pareto(α, lo, hi).
	u := r.Float64()
	return d.lo / math.Pow(1-u*(1-d.ratA), 1/d.alpha)
}

// Bounds returns the pareto bounds (0, 0 for other kinds).
func (d DemandSampler) Bounds() (lo, hi float64) { return d.lo, d.hi }

// rateFactor is the arrival-rate multiplier at time t (wave × burst ×
// flash crowds).
func rateFactor(w Workload, t float64) float64 {
	f := 1.0
	if w.Wave.Amplitude > 0 {
		f *= 1 + w.Wave.Amplitude*math.Sin(2*math.Pi*t/w.Wave.Period.Seconds())
	}
	if w.Bursts.Factor > 0 && t >= w.Bursts.Start.Seconds() {
		ph := math.Mod(t-w.Bursts.Start.Seconds(), w.Bursts.Every.Seconds())
		if ph < w.Bursts.Length.Seconds() {
			f *= w.Bursts.Factor
		}
	}
	for _, fl := range w.Flash {
		if t >= fl.At.Seconds() && t < (fl.At+fl.Length).Seconds() {
			f *= fl.Factor
		}
	}
	return f
}

func maxRateFactor(w Workload) float64 {
	f := 1 + w.Wave.Amplitude
	if w.Bursts.Factor > 1 {
		f *= w.Bursts.Factor
	}
	for _, fl := range w.Flash {
		f *= math.Max(1, fl.Factor) // a bound even where flash crowds overlap
	}
	return f
}

// NewStream generates the request stream of a scenario for one seed:
// a (possibly non-homogeneous, by thinning) Poisson process of arrivals,
// each with an independent demand and keep-alive time.
func NewStream(sc *Scenario, seed uint64) *Stream {
	r := newRand(seed, streamWorkload)
	w := sc.Workload
	base := sc.BaseRate()
	lmax := base * maxRateFactor(w)
	ds := NewDemandSampler(w)
	dur := sc.Duration.Seconds()
	n := int(base*dur*1.05) + 16
	st := &Stream{Arrive: make([]float64, 0, n), Demand: make([]float64, 0, n), Idle: make([]float32, 0, n)}
	ka := w.Keepalive
	t := 0.0
	for {
		t += r.ExpFloat64() / lmax
		if t >= dur {
			break
		}
		// Draw every variate of a candidate whether or not it is kept, so
		// that the stream is a fixed function of the seed.
		u := r.Float64()
		dem := ds.Sample(r)
		idle := 0.0
		if ka.Fraction > 0 {
			v := r.Float64()
			e := r.ExpFloat64()
			if v < ka.Fraction {
				idle = e * ka.IdleMean.Seconds()
			}
		}
		if u*lmax > base*rateFactor(w, t) {
			continue
		}
		st.Arrive = append(st.Arrive, t)
		st.Demand = append(st.Demand, dem)
		st.Idle = append(st.Idle, float32(idle))
	}
	st.IO = ioDemands(sc, seed, st.Len())
	return st
}
