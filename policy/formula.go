package policy

import (
	"fmt"
	"math"

	"lvs-feedback/ipvs"
)

// NextWeight applies the LVS dynamic-feedback formula to the controller's
// current weight w:
//
//	w' = w + Gain·∛(Target − load)
//
// bounded to [Min, Scale·defaultWeight] (and to the kernel's maximum). At
// load = Target the weight is unchanged; above it the weight falls, below it
// the weight rises. The result is fractional: the controller keeps it between
// intervals so that small steps accumulate; RoundWeight turns it into the
// integer written to the kernel.
func NextWeight(w, load float64, defaultWeight int, p WeightParams) float64 {
	next := w + p.Gain*math.Cbrt(p.Target-load)
	return clamp(next, float64(p.Min), MaxWeightFor(defaultWeight, p))
}

// MaxWeightFor returns SCALE·default, bounded by the kernel's maximum.
func MaxWeightFor(defaultWeight int, p WeightParams) float64 {
	return math.Min(p.Scale*float64(defaultWeight), ipvs.MaxWeight)
}

func clamp(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return lo
	}
	return math.Max(lo, math.Min(hi, v))
}

// RoundWeight rounds a controller weight to the integer written to the
// kernel (half away from zero).
func RoundWeight(w float64) int { return int(math.Round(w)) }

// PassesThreshold reports whether a change from the kernel's current weight
// to next is large enough to write: |next − current| > threshold.
func PassesThreshold(current, next, threshold int) bool {
	d := next - current
	if d < 0 {
		d = -d
	}
	return d > threshold
}

// FormulaStep is one step of the LVS formula, for the record.
type FormulaStep struct {
	Before float64 // the controller weight before the step
	Load   float64
	Step   float64 // Gain·∛(Target − load)
	Raw    float64 // Before + Step
	Min    float64
	Max    float64 // MaxWeightFor(default)
	After  float64 // Raw bounded to [Min, Max]: the controller weight kept
	Ramp   float64 // slow-start factor, 1 when not ramping
	Next   int     // max(Min, round(After × Ramp)): the candidate weight
}

// lvsFormula is the LVS dynamic-feedback controller (shared/reference/algorithm.md, section 1).
type lvsFormula struct{}

func (lvsFormula) Name() string { return ControllerLVS }

func (lvsFormula) Measure(WeightParams, []Server, bool) {}

// Step runs the formula on the server's load; the result is written when
// it passes the threshold, when the kernel weight lies outside [Min,
// Scale·default] (a lowered default weight takes effect at once), or at
// every step of a slow-start ramp.
func (lvsFormula) Step(p WeightParams, o *Observed, st *ServerState, ramp float64, d *Decision) {
	def := o.Record.DefaultWeight(o.Configured)
	load := d.Trace.Load
	f := FormulaStep{Before: st.Ctrl, Load: load, Step: p.Gain * math.Cbrt(p.Target-load), Min: float64(p.Min), Max: MaxWeightFor(def, p), Ramp: ramp}
	f.Raw = f.Before + f.Step
	st.Ctrl = NextWeight(st.Ctrl, load, def, p)
	f.After = st.Ctrl
	f.Next = rampWeight(st.Ctrl, ramp, p.Min)
	d.Trace.Formula = &f
	d.Trace.Compare = &Comparison{Kernel: o.Kernel, Next: f.Next, Rule: fmt.Sprintf("threshold %d", p.Threshold),
		Passes: PassesThreshold(o.Kernel, f.Next, p.Threshold)}
	cmp := d.Trace.Compare
	outOfBounds := o.Kernel < p.Min || float64(o.Kernel) > f.Max
	ramping := ramp < 1 && f.Next != o.Kernel
	switch {
	case cmp.Passes:
	case outOfBounds:
		cmp.Overrule = fmt.Sprintf("the kernel weight %d is outside [min %d, max %g]", o.Kernel, p.Min, f.Max)
	case ramping:
		cmp.Overrule = "a slow-start step"
	default:
		return
	}
	propose(d, f.Next, fmt.Sprintf("load %.3f", load), ramp)
}

// lvsKeys are the [weight] keys only the LVS formula reads.
func lvsKeys() []Param[WeightParams] {
	return []Param[WeightParams]{
		{Key: "gain", Default: 5.0, Values: "number > 0", Reload: "next cycle",
			Doc: "`\"lvs\"` controller: A in `w ← w + A·∛(target − load)`: how fast weights move.",
			Check: func(p WeightParams) string {
				return refuse(!(p.Gain > 0) || math.IsInf(p.Gain, 0), "must be a positive number, got %v", p.Gain)
			},
		},
		{Key: "target", Default: 0.95, Values: "number > 0", Reload: "next cycle",
			Doc: "`\"lvs\"` controller: the load the formula steers every server to.",
			Check: func(p WeightParams) string {
				return refuse(!(p.Target > 0) || p.Target > 10, "must be a load above 0 (0.95 is the documented target), got %v", p.Target)
			},
		},
		{Key: "threshold", Default: 1, Values: "0…65535", Reload: "next cycle",
			Doc: "`\"lvs\"` controller: a weight is written only when `|new − current| > threshold` (each " +
				"write restarts the wrr round in the kernel).",
			Check: func(p WeightParams) string {
				return refuse(p.Threshold < 0 || p.Threshold > ipvs.MaxWeight, "must be from 0 to %d, got %d", ipvs.MaxWeight, p.Threshold)
			},
		},
	}
}
