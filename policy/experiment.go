package policy

import (
	"math"
	"os"
)

// experimentBusy: a measurement switch, not kept (LVS_BUSY_FORM).
func experimentBusy(o *Observed, c Coefficients) (float64, string) {
	proc := math.Min(1, o.Process)
	switch os.Getenv("LVS_BUSY_FORM") {
	case "cpu":
		return o.CPU, "cpu"
	case "gateproc":
		b, n := Busy(o.Figures(), c)
		if c.Process > 0 && proc > b {
			return proc, "process"
		}
		return b, n
	case "scaled":
		ref := c.CPU
		if ref <= 0 {
			ref = math.Max(c.Disk, math.Max(c.Memory, c.Process))
		}
		best, name := 0.0, ""
		for _, r := range []struct {
			n    string
			c, u float64
		}{{"cpu", c.CPU, o.CPU}, {"disk", c.Disk, o.IOBusy}, {"memory", c.Memory, o.MemoryPressure}, {"process", c.Process, proc}} {
			if v := r.c / ref * r.u; r.c > 0 && (name == "" || v > best) {
				best, name = v, r.n
			}
		}
		return best, name
	case "sum":
		s := c.CPU + c.Disk + c.Memory + c.Process
		return (c.CPU*o.CPU + c.Disk*o.IOBusy + c.Memory*o.MemoryPressure + c.Process*proc) / s, "sum"
	}
	return Busy(o.Figures(), c)
}
