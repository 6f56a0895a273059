package policy

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
// name. A coefficient's size does not scale its resource: a disk 95 % busy
// is the bottleneck of a server whose CPU is 30 % busy whatever the two
// coefficients are, and the weight of a coefficient in the displayed load
// does not say how close its resource is to saturation (docs/design.md,
// "Capacity against the bottleneck"). On a tie the earlier of cpu, disk,
// memory is named. With none of the three above 0 (NoResource) the CPU is
// measured, as the controller did before it read the coefficients:
// lvs-monitor -check warns about such a set.
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
