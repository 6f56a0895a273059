package sim

import (
	"errors"
	"fmt"
	"lvs-feedback/agent"
	"math"
)

// Resources besides the CPU.
//
// A request may have an I/O demand besides its CPU demand. It does its I/O
// first, on its server's disk — one processor-sharing queue of the
// server's disk speed (disk work per second; 1 = reference disk), every
// request present sharing it equally, the way a device splits its
// bandwidth among concurrent readers — and then its CPU, on the server's
// cores as before: read the data, then compute on it. Its response time is
// the sum of both stays. A disk is a server (server.go) with one core, so
// the disk reuses the exact PS clock; its busy integral is the fraction of
// time the disk queue is non-empty, which is what /proc/diskstats io_ticks
// counts and what lvs-agent reports as DISK.
//
// Two events act on these resources:
//   - disk_degrade: the disk runs at factor of its nominal speed (a noisy
//     neighbour's I/O, a failing or throttled device); 1 restores it.
//   - memory: a memory squeeze. The server thrashes: a request on the CPU
//     makes progress only factor of the time, the rest stalled on page
//     faults — time that is not CPU busy (it shows as iowait, which the
//     agent counts idle) — and the disk, shared with the paging traffic,
//     runs at factor of its speed. The agent reports the memory used
//     fraction of the event (default DefaultSqueezeMemory). factor 1 ends
//     the squeeze.
//
// With no I/O demand in the workload there are no disks and every run is
// what it was before disks existed.

// Event kinds of the resources besides the CPU.
const (
	EvDiskDegrade = "disk_degrade"
	EvMemory      = "memory"
)

// DefaultSqueezeMemory is the memory used fraction the agent reports
// during a memory squeeze whose event sets no fraction: near full, as on a
// server that swaps.
const DefaultSqueezeMemory = 0.97

// streamIO is the PCG stream of the I/O demands: apart from the workload's,
// so adding I/O to a scenario leaves its arrivals and CPU demands as they
// were.
const streamIO = 3000

// hasIO reports whether the workload does I/O.
func (w Workload) hasIO() bool { return w.IOMeanDemand > 0 }

// checkResources fills the defaults of the I/O workload and the servers'
// disks and validates them.
func (sc *Scenario) checkResources() []error {
	var errs []error
	w := &sc.Workload
	if w.IOMeanDemand < 0 {
		errs = append(errs, errors.New("workload.io_mean_demand must not be negative"))
	}
	if w.IODemand == "" {
		w.IODemand = "exp"
	}
	switch w.IODemand {
	case "pareto", "exp", "fixed":
	default:
		errs = append(errs, fmt.Errorf("workload.io_demand %q: want pareto, exp or fixed", w.IODemand))
	}
	for i := range sc.Servers {
		s := &sc.Servers[i]
		switch {
		case s.Disk < 0 || math.IsNaN(s.Disk):
			errs = append(errs, fmt.Errorf("server %q: disk speed must be positive", s.Name))
		case s.Disk > 0 && !w.hasIO():
			errs = append(errs, fmt.Errorf("server %q: a disk speed needs workload.io_mean_demand (no request would use the disk)", s.Name))
		case s.Disk == 0 && w.hasIO():
			s.Disk = 1
		}
	}
	return errs
}

// checkResourceEvent validates a disk_degrade or memory event and fills
// the memory event's default fraction.
func (sc *Scenario) checkResourceEvent(e *EventSpec) error {
	switch e.Kind {
	case EvDiskDegrade:
		if !sc.Workload.hasIO() {
			return errors.New("disk_degrade needs workload.io_mean_demand (no request uses the disk)")
		}
		if !(e.Factor > 0) {
			return errors.New("disk_degrade factor must be positive")
		}
	case EvMemory:
		if !(e.Factor > 0 && e.Factor <= 1) {
			return errors.New("memory factor (the share of time a request makes progress) must be in (0, 1]")
		}
		if e.Fraction < 0 || e.Fraction > 1 {
			return errors.New("memory fraction (memory used, as the agent reports it) must be in [0, 1]")
		}
		if e.Fraction == 0 && e.Factor < 1 {
			e.Fraction = DefaultSqueezeMemory
		}
	}
	return nil
}

// ioDemands draws n I/O demands (disk work, seconds at disk speed 1) of a
// seed's stream, or nil when the workload does no I/O.
func ioDemands(sc *Scenario, seed uint64, n int) []float64 {
	w := sc.Workload
	if !w.hasIO() {
		return nil
	}
	ds := NewDemandSampler(Workload{Demand: w.IODemand, MeanDemand: w.IOMeanDemand, Alpha: w.Alpha, MaxRatio: w.MaxRatio})
	r := newRand(seed, streamIO)
	out := make([]float64, n)
	for i := range out {
		out[i] = ds.Sample(r)
	}
	return out
}

// newDisk returns the disk of a server, or nil when the workload does no
// I/O.
func newDisk(sc *Scenario, spec ServerSpec) *server {
	if !sc.Workload.hasIO() {
		return nil
	}
	return newServer(ServerSpec{Name: spec.Name + "/disk", Speed: spec.Disk, Cores: 1})
}

// trueCapacity is server k's true current capacity for requests in CPU
// work per second, what the ideal weights are proportional to: its CPU
// capacity, or, when its disk is the bottleneck, the CPU work its disk lets
// through — the largest request rate either resource sustains,
// min(cpu/E[cpu demand], disk/E[io demand]), times E[cpu demand].
func (r *run) trueCapacity(k int) float64 {
	s := r.srv[k]
	if s.disk == nil {
		return s.capacity
	}
	w := r.sc.Workload
	return math.Min(s.capacity, s.disk.capacity*w.MeanDemand.Seconds()/w.IOMeanDemand.Seconds())
}

// startIO sends request i, just admitted on server k, to k's disk if it
// has I/O to do; it reports false when the request goes straight to the
// CPU.
func (r *run) startIO(k, i int) bool {
	d := r.srv[k].disk
	if d == nil || r.st.IO[i] <= 0 {
		return false
	}
	d.advance(r.now)
	d.push(r.st.IO[i], i)
	r.rescheduleDisk(k)
	return true
}

// rescheduleDisk plans server k's next disk completion.
func (r *run) rescheduleDisk(k int) {
	d := r.srv[k].disk
	d.ver++
	if t := d.nextDeparture(); !math.IsInf(t, 1) {
		r.schedule(t, evDiskDepart, k, d.ver)
	}
}

// diskDepart moves every request whose I/O on server k's disk is done to
// k's CPU.
func (r *run) diskDepart(k int) {
	s := r.srv[k]
	d := s.disk
	d.advance(r.now)
	s.advance(r.now)
	for d.done() {
		req := d.pop()
		s.push(r.st.Demand[req], int(req))
	}
	r.reschedule(k)
	r.rescheduleDisk(k)
}

// applyResourceEvent records a disk_degrade or memory event on server s;
// the rates change in s.recompute and syncDisk.
func applyResourceEvent(s *server, e *EventSpec) {
	switch e.Kind {
	case EvDiskDegrade:
		s.diskFactor = e.Factor
	case EvMemory:
		s.thrash = e.Factor
		s.memoryUsed = e.Fraction
	}
}

// failDisk loses the requests on server k's disk when k fails, as the
// CPU's are lost.
func (r *run) failDisk(k int) {
	d := r.srv[k].disk
	if d == nil {
		return
	}
	d.advance(r.now)
	for _, j := range d.jobs {
		r.lose(k, j.val)
	}
	d.jobs = d.jobs[:0]
}

// syncDisk brings server k's disk in line with the server after an event:
// down with it, at its degrade factor times the thrash factor (the paging
// traffic shares the disk).
func (r *run) syncDisk(k int) {
	s := r.srv[k]
	d := s.disk
	if d == nil {
		return
	}
	d.advance(r.now)
	d.down = s.down
	d.speedFactor = s.diskFactor * s.thrash
	d.recompute()
	r.rescheduleDisk(k)
}

// simMemTotal is the memory size the simulated agents report (MemTotal):
// only the fraction matters.
const simMemTotal = 16 << 30

// resourceLoads returns what server k's agent reports for the window since
// a's last sample, before noise: the memory used fraction (the scenario's
// model, or the squeeze's when higher), the disk load (the disk's busy
// fraction over the window or the scenario's agent.disk — the space used
// — whichever is higher, as lvs-agent takes the largest of io busy and
// space used) and the disk's busy fraction alone.
func (r *run) resourceLoads(k int, a *agentState, conns float64) (memory, disk, ioBusy float64) {
	s := r.srv[k]
	memory = r.sc.Agent.MemoryBase + r.sc.Agent.MemoryPerConn*conns
	if s.memoryUsed > memory {
		memory = s.memoryUsed
	}
	disk = r.sc.Agent.Disk
	if s.disk != nil && r.now > a.lastT {
		ioBusy = (r.diskBusyInt(k) - a.lastDiskBusy) / (r.now - a.lastT)
		disk = math.Max(disk, ioBusy)
	}
	return memory, disk, ioBusy
}

// fillResourceRaw fills the raw figures lvs-agent reports beside the loads:
// MemTotal and MemAvailable behind MEMORY, the busiest device's io busy,
// and the pressure-stall shares: memory, the time stalled on page faults
// (1 − thrash factor); io, the time some request waits for the disk (its
// busy fraction). Over the agent's window, where the kernel's are 10 s
// averages.
func fillResourceRaw(raw *agent.Raw, s *server, memory, ioBusy float64) {
	raw.MemTotalBytes = simMemTotal
	raw.MemAvailableBytes = uint64((1 - math.Min(1, math.Max(0, memory))) * simMemTotal)
	raw.DiskIOBusy = ioBusy
	if s.disk != nil {
		raw.DiskIODevice = "sda"
	}
	psiMem, psiIO := 100*(1-s.thrash), 100*ioBusy
	raw.PSIMemorySome10, raw.PSIIOSome10 = &psiMem, &psiIO
}

// diskBusyInt brings server k's disk up to now and returns its busy
// integral (0 without a disk).
func (r *run) diskBusyInt(k int) float64 {
	d := r.srv[k].disk
	if d == nil {
		return 0
	}
	d.advance(r.now)
	return d.busyInt
}

// resourceLabel is the argument of a disk_degrade or memory event in
// tables and plots.
func resourceLabel(e EventSpec) string {
	if e.Kind == EvMemory && e.Factor < 1 {
		return fmt.Sprintf(" ×%g mem %.0f%%", e.Factor, e.Fraction*100)
	}
	return fmt.Sprintf(" ×%g", e.Factor)
}
