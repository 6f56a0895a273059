package policy

import (
	"fmt"
	"math"
)

// The server resources the capacity controller measures capacity against,
// as CapacityStep.Bottleneck names them.
const (
	ResourceCPU    = "cpu"
	ResourceDisk   = "disk"
	ResourceMemory = "memory"
)

// ResourceFigures are a server's utilisations over an interval, each on
// the scale 0 = idle, 1 = saturated. A figure the server's agent does not
// report is 0: in a maximum an unreported resource counts as an idle one.
type ResourceFigures struct {
	// CPU is the CPU busy fraction.
	CPU float64
	// IOBusy is the busiest block device's busy fraction (the share of
	// time it had I/O in flight, /proc/diskstats io_ticks) — not the disk
	// space used, which is no throughput.
	IOBusy float64
	// MemoryPressure is the share of time some task stalled on memory
	// (PSI memory "some", avg10 ÷ 100); 0 where the kernel has no PSI.
	// Memory in use is not a utilisation (a full page cache costs
	// nothing) and does not count.
	MemoryPressure float64
}

// Figures returns o's resource figures.
func (o *Observed) Figures() ResourceFigures {
	return ResourceFigures{CPU: o.CPU, IOBusy: o.IOBusy, MemoryPressure: o.MemoryPressure}
}

// Busy returns how busy a server is for the capacity controller: the
// utilisation of its bottleneck, the busiest of the resources whose
// coefficient is above 0 (c.CPU: the CPU busy fraction, c.Disk: the disk
// I/O busy fraction, c.Memory: the memory pressure), and that resource's
// name. Which resource is the bottleneck is the resources' own figures'
// business: a disk 95 % busy is the bottleneck of a server whose CPU is
// 30 % busy whatever the two coefficients are. A coefficient's size sets
// how strongly a server's departure from its service on that resource
// counts (Reading, ResourceSensitivity), not which resource is the
// bottleneck (docs/developer/design.md, "Capacity against the bottleneck"). On a tie
// the earlier of cpu, disk, memory is named. With none of the three above
// 0 (NoResource) the CPU is measured, as the controller did before it read
// the coefficients: lvs-monitor -check warns about such a set.
func Busy(f ResourceFigures, c Coefficients) (busy float64, bottleneck string) {
	if NoResource(c) {
		return f.CPU, ResourceCPU
	}
	for _, r := range []struct {
		name string
		coef float64
		u    float64
	}{
		{ResourceCPU, c.CPU, f.CPU},
		{ResourceDisk, c.Disk, f.IOBusy},
		{ResourceMemory, c.Memory, f.MemoryPressure},
	} {
		if r.coef > 0 && (bottleneck == "" || r.u > busy) {
			busy, bottleneck = r.u, r.name
		}
	}
	return busy, bottleneck
}

// NoResource reports whether c enables none of the resources the capacity
// controller measures against (cpu, disk and memory all 0): a set fitted
// to the director's own figures (input, response) can be, and the
// controller then falls back to the CPU (Busy) rather than refusing it.
func NoResource(c Coefficients) bool {
	return !(c.CPU > 0 || c.Disk > 0 || c.Memory > 0)
}

// DefaultCoefficients are the shipped coefficients (seed 004's example for
// a web cluster). For the capacity controller they are the reference each
// coefficient's sensitivity is measured from (ResourceSensitivity,
// DirectorSensitivity).
func DefaultCoefficients() Coefficients {
	return Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.3, Process: 0.1}
}

// ResourceSensitivity is how strongly the capacity controller counts a
// server's departure from its service on a resource (cpu, disk, memory)
// whose coefficient is c, shipped value def: c ÷ def. At the shipped
// value 1 (the reading as measured), raised above 1 (a busier-than-usual
// resource reads busier still), below it less; 0 takes the resource out
// (Busy does not consider it).
func ResourceSensitivity(c, def float64) float64 {
	if !(c > 0) || !(def > 0) {
		return 0
	}
	return c / def
}

// DirectorSensitivity is the exponent of a director-side or queue input's
// correction (input, response, process; Correction) whose coefficient is
// c, shipped value def: (c − def) ÷ def above def, else 0. Up to their
// shipped values these inputs do not move the capacity controller: one
// probe, one sample of a run queue or one interval's share of connections
// is noise that, counted, becomes weight writes (docs/developer/design.md, "Capacity
// against the bottleneck"); each step of def above it counts the input
// once more.
func DirectorSensitivity(c, def float64) float64 {
	if !(def > 0) || !(c > def) {
		return 0
	}
	return (c - def) / def
}

// DirectorCorrected reports whether c counts any of input, response and
// process (DirectorSensitivity above 0): only then do a server's Pressures
// move its Reading.
func DirectorCorrected(c Coefficients) bool {
	def := DefaultCoefficients()
	return DirectorSensitivity(c.Input, def.Input) > 0 || DirectorSensitivity(c.Response, def.Response) > 0 ||
		DirectorSensitivity(c.Process, def.Process) > 0
}

// Sensitised is a resource reading u (0 … 1) of a server whose service's
// median reading is m, counted with sensitivity k (ResourceSensitivity):
// above the reference r = max(m, light), r·(u/r)^k — the
// server's excess over its service raised to k, the ratio bounded to
// maxCorrectionRatio — and u itself at or below it. k = 1 is u itself; a
// reading above the reference reads busier as k grows, less busy as k
// falls towards 0 (the reference). Only an excess counts: amplified, a
// reading below its service's would make a server cut for a slow device,
// which its small share leaves nearly idle, read as several times as
// capable as its peers and go back to full weight. The reference is at
// least light (TH1, weight.light: below it a server is not measured) so
// that a server lightly busy among idle peers is not read as hot. The result may exceed 1: it is a divisor of the
// capacity observation, not a utilisation (saturation and the measuring
// floor read u).
func Sensitised(u, m, light, k float64) float64 {
	r := math.Max(m, light)
	if k == 1 || !(u > r) || !(k >= 0) {
		return u
	}
	return r * math.Pow(math.Min(u/r, maxCorrectionRatio), k)
}

// maxCorrectionRatio bounds a server's ratio to its service's median in
// Sensitised and Correction: one probe or one sample of a run queue
// swings, and a server twice as busy or as slow as its service is as clear
// a signal as ten times.
const maxCorrectionRatio = 2.0

// Correction is the factor an input x of a server (its service's median
// ref) multiplies its resource reading by, with exponent s
// (DirectorSensitivity): (x/ref)^s for an input above its service's
// median, the ratio bounded to 2 (maxCorrectionRatio). Only an excess
// counts, as in Sensitised: a server answering faster than its service, or
// sent less than its weight's share, is not read as more capable for it.
// s = 0, no reference, an input at or below the median or a figure that is
// not a number is 1.
func Correction(x, ref, s float64) float64 {
	if !(s > 0) || !(ref > 0) || !(x > ref) || math.IsInf(x, 0) {
		return 1
	}
	return math.Pow(math.Min(x/ref, maxCorrectionRatio), s)
}

// resourceSensitivity is ResourceSensitivity of the resource named r under
// c; the CPU measured for want of any resource (NoResource) counts as
// measured (1).
func resourceSensitivity(r string, c Coefficients) float64 {
	def := DefaultCoefficients()
	switch {
	case NoResource(c):
		return 1
	case r == ResourceDisk:
		return ResourceSensitivity(c.Disk, def.Disk)
	case r == ResourceMemory:
		return ResourceSensitivity(c.Memory, def.Memory)
	}
	return ResourceSensitivity(c.CPU, def.CPU)
}

// The inputs besides the resources that can move the capacity
// controller's reading, as CapacityStep.Driver names them.
const (
	InputShare    = "input"
	InputResponse = "response"
	InputProcess  = "process"
)

// Pressures are a server's inputs besides its resources, each against its
// service's median (Correction): its share of new
// connections per unit of its weight's share (INPUT ÷ weight share), its
// probe time ÷ probe.reference (RESPONSE) and its runnable tasks per CPU
// (PROCESS). A figure that is not known is NaN: no correction.
type Pressures struct {
	Input, Response, Process float64
}

// Reading is the figure the capacity controller divides a server's
// connections served by: its bottleneck's busy fraction busy (Busy; the
// resource named bottleneck) counted with that resource's sensitivity
// against its service's median busy fraction medianBusy (Sensitised),
// times the correction of each of input, response and process against
// its service's median ref (Correction, DirectorSensitivity). At the
// shipped coefficients it is busy itself. light is TH1's threshold, the
// least reference of Sensitised. driver names the input whose
// factor moved the reading most (the bottleneck, "input", "response",
// "process"); "" when the reading is busy.
func Reading(busy, medianBusy, light float64, bottleneck string, x, ref Pressures, c Coefficients) (reading float64, driver string) {
	def := DefaultCoefficients()
	reading = Sensitised(busy, medianBusy, light, resourceSensitivity(bottleneck, c))
	most := 0.0
	if reading != busy && busy > 0 {
		most, driver = math.Abs(math.Log(reading/busy)), bottleneck
	}
	for _, in := range []struct {
		name       string
		x, ref, cf float64
		def        float64
	}{
		{InputShare, x.Input, ref.Input, c.Input, def.Input},
		{InputResponse, x.Response, ref.Response, c.Response, def.Response},
		{InputProcess, x.Process, ref.Process, c.Process, def.Process},
	} {
		f := Correction(in.x, in.ref, DirectorSensitivity(in.cf, in.def))
		if f == 1 {
			continue
		}
		reading *= f
		if d := math.Abs(math.Log(f)); d > most {
			most, driver = d, in.name
		}
	}
	return reading, driver
}

// CoefficientsTable is the [coefficients] table; its defaults are
// DefaultCoefficients.
func CoefficientsTable() Table[Coefficients] {
	def := DefaultCoefficients()
	between01 := func(v float64) string {
		return refuse(v < 0 || v > 1 || math.IsNaN(v), "must be between 0 and 1, got %v", v)
	}
	return Table[Coefficients]{Name: "coefficients", Params: []Param[Coefficients]{
		{Key: "input", Default: def.Input, Values: "0…1", Reload: "next cycle",
			Doc: "Weight of INPUT, the server's share of new connections relative to the service mean, in " +
				"the aggregate load (shown; the `\"lvs\"` formula's input). Capacity controller: at or below " +
				"0.1 it does not move the weights (the connections served are what the controller divides); " +
				"above, a server sent more than its weight's share of new connections reads busier, with " +
				"exponent (input − 0.1) ÷ 0.1 on its ratio to the service's median, at most 2 " +
				"([design.md](developer/design.md#capacity-against-the-bottleneck)). A value between 0 and 0.1 acts " +
				"as 0 there (a warning). Under `wlc`/`sed` it damps the servers that finish sooner.",
			Check: func(p Coefficients) string {
				return between01(p.Input)
			},
		},
		{Key: "cpu", Default: def.CPU, Values: "0…1", Reload: "next cycle",
			Doc: "Weight of CPU, the busy fraction reported by the agent, in the aggregate load. Capacity " +
				"controller: above 0, the CPU busy fraction is one of the resources capacity is measured " +
				"against — the busiest of them counts, and the coefficient ÷ its default 0.3 is the " +
				"sensitivity with which a CPU busier than the service's median counts (0.6: its excess " +
				"squared; [design.md](developer/design.md#capacity-against-the-bottleneck)); 0 takes the CPU out. " +
				"With `cpu`, `disk` and `memory` all 0 the CPU is measured anyway (a warning).",
			Check: func(p Coefficients) string {
				return between01(p.CPU)
			},
		},
		{Key: "memory", Default: def.Memory, Values: "0…1", Reload: "next cycle",
			Doc: "Weight of MEMORY, `1 − MemAvailable/MemTotal`, in the aggregate load. Capacity controller: " +
				"above 0, memory *pressure* — the share of time some task stalled on memory, PSI `memory " +
				"some avg10` — is one of the resources capacity is measured against; memory in use is not " +
				"(a full page cache costs nothing), and a kernel without PSI gives no figure. The " +
				"coefficient ÷ 0.1 is its sensitivity, as for `cpu`.",
			Check: func(p Coefficients) string {
				return between01(p.Memory)
			},
		},
		{Key: "disk", Default: def.Disk, Values: "0…1", Reload: "next cycle",
			Doc: "Weight of DISK, the larger of disk space used and I/O busy fraction, in the aggregate " +
				"load. Capacity controller: above 0, the busiest block device's I/O busy fraction (not the " +
				"space used) is one of the resources capacity is measured against: a server whose disk is " +
				"saturated while its CPU idles loses weight; the coefficient ÷ 0.1 is the sensitivity with " +
				"which a disk busier than the service's median counts (0.3: its excess cubed, " +
				"[tuning.md](tuning.md#raising-disk-on-a-disk-bound-service-capacity-controller)). Set 0 " +
				"for servers on SSD/NVMe devices with many queues, which read 100 % busy well before they " +
				"are saturated.",
			Check: func(p Coefficients) string {
				return between01(p.Disk)
			},
		},
		{Key: "response", Default: def.Response, Values: "0…1", Reload: "next cycle",
			Doc: "Weight of RESPONSE, probe time / `probe.reference`, in the aggregate load. Capacity " +
				"controller: at or below 0.3 it does not move the weights (probes decide availability: " +
				"`probe_timeout`, `availability.fall`); above, a server whose probe is slower than the " +
				"service's median reads busier, with exponent (response − 0.3) ÷ 0.3 on the ratio, at most " +
				"2. A value between 0 and 0.3 acts as 0 there (a warning).",
			Check: func(p Coefficients) string {
				return between01(p.Response)
			},
		},
		{Key: "process", Default: def.Process, Values: "0…1", Reload: "next cycle",
			Doc: "Weight of PROCESS, runnable tasks per CPU, in the aggregate load. Capacity controller: at " +
				"or below 0.1 it does not move the weights (a run queue beyond the CPUs shows as CPU busy); " +
				"above, a server with more runnable tasks per CPU than the service's median reads busier, " +
				"with exponent (process − 0.1) ÷ 0.1 on the ratio, at most 2. A value between 0 and 0.1 " +
				"acts as 0 there (a warning).",
			Check: func(p Coefficients) string {
				return between01(p.Process)
			},
		},
	},
		Check: func(c Coefficients) string {
			if s := c.Sum(); math.Abs(s-1) > 0.001 {
				return fmt.Sprintf("must sum to 1 (±0.001), they sum to %.4f (input %v + cpu %v + memory %v + disk %v + response %v + process %v)",
					s, c.Input, c.CPU, c.Memory, c.Disk, c.Response, c.Process)
			}
			return ""
		},
	}
}
