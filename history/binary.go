package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// The binary format (docs/history.md): a file starts with fileMagic and
// the format version, then frames; a frame is frameMarker, its payload's
// length and CRC-32C (both uint32, little-endian), then the payload
// (never empty): records, each
// its length (uvarint) and its body. A body is a bit mask of the fields
// present (fixed width, little-endian), then their values in bit order.
// A field left out is the zero value (or nil); a bool is its bit alone.
// Integers are zig-zag varints (uvarints when unsigned), floats 8 bytes
// little-endian, strings a uvarint length and the bytes, times seconds
// (varint) and nanoseconds (uvarint).

// fileMagic opens every binary history file; FormatVersion follows it.
const fileMagic = "LVSHIST\x00"

// frameMarker starts every frame: after damage (a frame cut short by a
// crash, then more appended), a reader finds the next frame by it and its
// checksum.
const frameMarker = "\xa9LVF"

// FormatVersion is the version of the binary file format this package
// writes and the newest it reads. A field added to Record is a new
// version: an older reader says so and skips the file.
const FormatVersion = 1

const (
	headerLen      = len(fileMagic) + 4
	frameHeaderLen = 12
	// frameTarget is the payload size at which the writer starts a new
	// frame, bounding what a reader holds at once.
	frameTarget = 1 << 20
	// maxFrame bounds the payload a reader accepts (a crafted length
	// cannot make it allocate more, nor more than the file holds).
	maxFrame = 16 << 20
	// maxString bounds a text of a record.
	maxString = 64 << 10
	// maxDisks bounds the entries of Agent.Raw.DiskSpaceUsed.
	maxDisks = 4096
)

// Bits of Record's mask, in the order the values follow.
const (
	rTime = iota
	rService
	rServer
	rState
	rConfigured
	rDefaultWeight
	rWeightBefore
	rWeightTo
	rWeightAfter
	rWrite
	rWrote
	rWriteError
	rReason
	rCounter
	rNewConns
	rActiveConns
	rInactiveConns
	rActiveDelta
	rProbeSeconds
	rProbeError
	rProbeTimedOut
	rFails
	rPasses
	rPolled
	rAgentError
	rAgentStale
	rAgentSeconds
	rAgent
	rInputs
	rLoad
	rDirectorOnly
	rRamp
	rFrozen
	rCtrlBefore
	rCtrlAfter
	rCapacity
	rFormula
	rCompare
	rGuard
	rBits
)

// encoder appends one record's body to b; err is its first failure.
type encoder struct {
	b   []byte
	err error
}

// mask reserves n bytes for a mask and returns where they are.
func (e *encoder) mask(n int) int {
	p := len(e.b)
	e.b = append(e.b, make([]byte, n)...)
	return p
}

func (e *encoder) putMask(p, n int, m uint64) {
	for i := range n {
		e.b[p+i] = byte(m >> (8 * i))
	}
}

func (e *encoder) int(m *uint64, bit int, v int) {
	if v != 0 {
		*m |= 1 << bit
		e.b = binary.AppendVarint(e.b, int64(v))
	}
}

func (e *encoder) uint(m *uint64, bit int, v uint64) {
	if v != 0 {
		*m |= 1 << bit
		e.b = binary.AppendUvarint(e.b, v)
	}
}

func (e *encoder) bool(m *uint64, bit int, v bool) {
	if v {
		*m |= 1 << bit
	}
}

func (e *encoder) float(v float64, name string) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		if e.err == nil {
			e.err = fmt.Errorf("%s is %v: not a number a record holds", name, v)
		}
	}
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
}

func (e *encoder) f(m *uint64, bit int, v float64, name string) {
	if v != 0 {
		*m |= 1 << bit
		e.float(v, name)
	}
}

func (e *encoder) pf(m *uint64, bit int, v *float64, name string) {
	if v != nil {
		*m |= 1 << bit
		e.float(*v, name)
	}
}

func (e *encoder) str(v string, name string) {
	if len(v) > maxString && e.err == nil {
		e.err = fmt.Errorf("%s of %d bytes: more than %d", name, len(v), maxString)
	}
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}

func (e *encoder) s(m *uint64, bit int, v string, name string) {
	if v != "" {
		*m |= 1 << bit
		e.str(v, name)
	}
}

func (e *encoder) time(m *uint64, bit int, t time.Time) {
	if !t.IsZero() {
		*m |= 1 << bit
		e.b = binary.AppendVarint(e.b, t.Unix())
		e.b = binary.AppendUvarint(e.b, uint64(t.Nanosecond()))
	}
}

// appendRecord appends r's body to b. A record with a figure that is not
// finite, or a text longer than maxString, is an error (b is then to be
// discarded).
func appendRecord(b []byte, r *Record) ([]byte, error) {
	e := encoder{b: b}
	var m uint64
	p := e.mask(5)
	e.time(&m, rTime, r.Time)
	e.s(&m, rService, r.Service, "service")
	e.s(&m, rServer, r.Server, "server")
	e.s(&m, rState, r.State, "state")
	e.int(&m, rConfigured, r.Configured)
	e.int(&m, rDefaultWeight, r.DefaultWeight)
	e.int(&m, rWeightBefore, r.WeightBefore)
	e.int(&m, rWeightTo, r.WeightTo)
	e.int(&m, rWeightAfter, r.WeightAfter)
	e.bool(&m, rWrite, r.Write)
	e.bool(&m, rWrote, r.Wrote)
	e.s(&m, rWriteError, r.WriteError, "write_error")
	e.s(&m, rReason, r.Reason, "reason")
	e.uint(&m, rCounter, uint64(r.Counter))
	if r.NewConns != nil {
		m |= 1 << rNewConns
		e.b = binary.AppendVarint(e.b, *r.NewConns)
	}
	e.int(&m, rActiveConns, r.ActiveConns)
	e.int(&m, rInactiveConns, r.InactiveConns)
	e.int(&m, rActiveDelta, r.ActiveDelta)
	e.pf(&m, rProbeSeconds, r.ProbeSeconds, "probe_seconds")
	e.s(&m, rProbeError, r.ProbeError, "probe_error")
	e.bool(&m, rProbeTimedOut, r.ProbeTimedOut)
	e.int(&m, rFails, r.Fails)
	e.int(&m, rPasses, r.Passes)
	e.bool(&m, rPolled, r.Polled)
	e.s(&m, rAgentError, r.AgentError, "agent_error")
	e.bool(&m, rAgentStale, r.AgentStale)
	e.f(&m, rAgentSeconds, r.AgentSeconds, "agent_seconds")
	if a := r.Agent; a != nil {
		m |= 1 << rAgent
		e.agent(a)
	}
	if in := r.Inputs; in != nil {
		m |= 1 << rInputs
		var im uint64
		q := e.mask(1)
		e.f(&im, 0, in.Input, "inputs.input")
		e.f(&im, 1, in.CPU, "inputs.cpu")
		e.f(&im, 2, in.Memory, "inputs.memory")
		e.f(&im, 3, in.Disk, "inputs.disk")
		e.f(&im, 4, in.Response, "inputs.response")
		e.f(&im, 5, in.Process, "inputs.process")
		e.putMask(q, 1, im)
	}
	e.pf(&m, rLoad, r.Load, "load")
	e.bool(&m, rDirectorOnly, r.DirectorOnly)
	e.f(&m, rRamp, r.Ramp, "ramp")
	e.bool(&m, rFrozen, r.Frozen)
	e.pf(&m, rCtrlBefore, r.CtrlBefore, "ctrl_before")
	e.pf(&m, rCtrlAfter, r.CtrlAfter, "ctrl_after")
	if c := r.Capacity; c != nil {
		m |= 1 << rCapacity
		var cm uint64
		q := e.mask(2)
		e.int(&cm, 0, c.Weight)
		e.pf(&cm, 1, c.Factor, "capacity.factor")
		e.bool(&cm, 2, c.SaturatedAlone)
		e.bool(&cm, 3, c.BacklogCut)
		e.f(&cm, 4, c.CPU, "capacity.cpu")
		e.f(&cm, 5, c.Busy, "capacity.busy")
		e.s(&cm, 6, c.Bottleneck, "capacity.bottleneck")
		e.f(&cm, 7, c.Reading, "capacity.reading")
		e.s(&cm, 8, c.Driver, "capacity.driver")
		e.f(&cm, 9, c.Estimate, "capacity.estimate")
		e.f(&cm, 10, c.Error, "capacity.error")
		e.s(&cm, 11, c.Rule, "capacity.rule")
		e.putMask(q, 2, cm)
	}
	if f := r.Formula; f != nil {
		m |= 1 << rFormula
		var fm uint64
		q := e.mask(2)
		e.f(&fm, 0, f.Before, "formula.before")
		e.pf(&fm, 1, f.Load, "formula.load")
		e.pf(&fm, 2, f.Step, "formula.step")
		e.pf(&fm, 3, f.Raw, "formula.raw")
		e.f(&fm, 4, f.Min, "formula.min")
		e.f(&fm, 5, f.Max, "formula.max")
		e.pf(&fm, 6, f.After, "formula.after")
		e.f(&fm, 7, f.Ramp, "formula.ramp")
		e.int(&fm, 8, f.Next)
		e.putMask(q, 2, fm)
	}
	if c := r.Compare; c != nil {
		m |= 1 << rCompare
		var cm uint64
		q := e.mask(1)
		e.int(&cm, 0, c.Next)
		e.s(&cm, 1, c.Rule, "compare.rule")
		e.bool(&cm, 2, c.Passes)
		e.s(&cm, 3, c.Overrule, "compare.overrule")
		e.putMask(q, 1, cm)
	}
	if g := r.Guard; g != nil {
		m |= 1 << rGuard
		var gm uint64
		q := e.mask(2)
		e.s(&gm, 0, g.Event, "guard.event")
		e.int(&gm, 1, g.Held)
		e.int(&gm, 2, g.From)
		e.bool(&gm, 3, g.Raised)
		e.pf(&gm, 4, g.Ratio, "guard.ratio")
		e.pf(&gm, 5, g.Median, "guard.median")
		e.int(&gm, 6, g.Active)
		e.int(&gm, 7, g.Restore)
		e.int(&gm, 8, g.Controller)
		e.putMask(q, 2, gm)
	}
	e.putMask(p, 5, m)
	return e.b, e.err
}

func (e *encoder) agent(a *Agent) {
	var m uint64
	p := e.mask(3)
	e.s(&m, 0, a.Source, "agent.source")
	e.time(&m, 1, a.Time)
	e.f(&m, 2, a.CPU, "agent.cpu")
	e.f(&m, 3, a.Memory, "agent.memory")
	e.f(&m, 4, a.Disk, "agent.disk")
	e.f(&m, 5, a.Processes, "agent.processes")
	e.f(&m, 6, a.CPUUsed, "agent.cpu_used")
	e.f(&m, 7, a.CPUSpan, "agent.cpu_span")
	raw := &a.Raw
	e.int(&m, 8, raw.PID)
	e.f(&m, 9, raw.WindowSeconds, "agent.raw.window_seconds")
	e.f(&m, 10, raw.CPUs, "agent.raw.cpus")
	e.f(&m, 11, raw.CPUBusy, "agent.raw.cpu_busy")
	e.uint(&m, 12, raw.MemTotalBytes)
	e.uint(&m, 13, raw.MemAvailableBytes)
	if len(raw.DiskSpaceUsed) > 0 {
		m |= 1 << 14
		if len(raw.DiskSpaceUsed) > maxDisks && e.err == nil {
			e.err = fmt.Errorf("agent.raw.disk_space_used: %d entries, more than %d", len(raw.DiskSpaceUsed), maxDisks)
		}
		e.b = binary.AppendUvarint(e.b, uint64(len(raw.DiskSpaceUsed)))
		for k, v := range raw.DiskSpaceUsed {
			e.str(k, "agent.raw.disk_space_used")
			e.float(v, "agent.raw.disk_space_used")
		}
	}
	e.f(&m, 15, raw.DiskIOBusy, "agent.raw.disk_io_busy")
	e.s(&m, 16, raw.DiskIODevice, "agent.raw.disk_io_device")
	e.int(&m, 17, raw.RunnableTasks)
	e.f(&m, 18, raw.Load1, "agent.raw.load1")
	e.f(&m, 19, raw.Load5, "agent.raw.load5")
	e.f(&m, 20, raw.Load15, "agent.raw.load15")
	e.pf(&m, 21, raw.PSICPUSome10, "agent.raw.psi_cpu_some10")
	e.pf(&m, 22, raw.PSIMemorySome10, "agent.raw.psi_memory_some10")
	e.pf(&m, 23, raw.PSIIOSome10, "agent.raw.psi_io_some10")
	e.putMask(p, 3, m)
}

// decoder reads one record's body; err is its first failure, after which
// every read returns zero.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("record cut short")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

// mask reads an n-byte mask and checks that it sets no bit from bits on.
func (d *decoder) mask(n, bits int, what string) uint64 {
	if len(d.b) < n {
		d.fail(errShort)
		return 0
	}
	var m uint64
	for i := range n {
		m |= uint64(d.b[i]) << (8 * i)
	}
	d.b = d.b[n:]
	if m>>bits != 0 {
		d.fail(fmt.Errorf("%s: unknown field (bit %d): written by a newer lvs-monitor", what, bits+lowestBit(m>>bits)))
		return 0
	}
	return m
}

func lowestBit(m uint64) int {
	n := 0
	for m&1 == 0 {
		m >>= 1
		n++
	}
	return n
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int(m uint64, bit int) int {
	if m&(1<<bit) == 0 {
		return 0
	}
	return int(d.varint())
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.fail(fmt.Errorf("a figure is %v", v))
		return 0
	}
	return v
}

func (d *decoder) f(m uint64, bit int) float64 {
	if m&(1<<bit) == 0 {
		return 0
	}
	return d.float()
}

func (d *decoder) pf(m uint64, bit int) *float64 {
	if m&(1<<bit) == 0 {
		return nil
	}
	v := d.float()
	return &v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) || n > maxString {
		d.fail(errShort)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) s(m uint64, bit int) string {
	if m&(1<<bit) == 0 {
		return ""
	}
	return d.str()
}

func (d *decoder) time(m uint64, bit int) time.Time {
	if m&(1<<bit) == 0 {
		return time.Time{}
	}
	sec := d.varint()
	ns := d.uvarint()
	if ns >= 1e9 {
		d.fail(fmt.Errorf("time with %d nanoseconds", ns))
		return time.Time{}
	}
	return time.Unix(sec, int64(ns)).UTC()
}

// decodeRecord decodes a record's body.
func decodeRecord(b []byte) (Record, error) {
	d := decoder{b: b}
	m := d.mask(5, rBits, "record")
	has := func(bit int) bool { return m&(1<<bit) != 0 }
	r := Record{V: SchemaVersion}
	r.Time = d.time(m, rTime)
	r.Service = d.s(m, rService)
	r.Server = d.s(m, rServer)
	r.State = d.s(m, rState)
	r.Configured = d.int(m, rConfigured)
	r.DefaultWeight = d.int(m, rDefaultWeight)
	r.WeightBefore = d.int(m, rWeightBefore)
	r.WeightTo = d.int(m, rWeightTo)
	r.WeightAfter = d.int(m, rWeightAfter)
	r.Write = has(rWrite)
	r.Wrote = has(rWrote)
	r.WriteError = d.s(m, rWriteError)
	r.Reason = d.s(m, rReason)
	if has(rCounter) {
		c := d.uvarint()
		if c > math.MaxUint32 {
			d.fail(fmt.Errorf("counter %d: more than 32 bits", c))
		}
		r.Counter = uint32(c)
	}
	if has(rNewConns) {
		r.NewConns = new(d.varint())
	}
	r.ActiveConns = d.int(m, rActiveConns)
	r.InactiveConns = d.int(m, rInactiveConns)
	r.ActiveDelta = d.int(m, rActiveDelta)
	r.ProbeSeconds = d.pf(m, rProbeSeconds)
	r.ProbeError = d.s(m, rProbeError)
	r.ProbeTimedOut = has(rProbeTimedOut)
	r.Fails = d.int(m, rFails)
	r.Passes = d.int(m, rPasses)
	r.Polled = has(rPolled)
	r.AgentError = d.s(m, rAgentError)
	r.AgentStale = has(rAgentStale)
	r.AgentSeconds = d.f(m, rAgentSeconds)
	if has(rAgent) {
		r.Agent = d.agent()
	}
	if has(rInputs) {
		im := d.mask(1, 6, "inputs")
		r.Inputs = &Inputs{Input: d.f(im, 0), CPU: d.f(im, 1), Memory: d.f(im, 2), Disk: d.f(im, 3), Response: d.f(im, 4), Process: d.f(im, 5)}
	}
	r.Load = d.pf(m, rLoad)
	r.DirectorOnly = has(rDirectorOnly)
	r.Ramp = d.f(m, rRamp)
	r.Frozen = has(rFrozen)
	r.CtrlBefore = d.pf(m, rCtrlBefore)
	r.CtrlAfter = d.pf(m, rCtrlAfter)
	if has(rCapacity) {
		cm := d.mask(2, 12, "capacity")
		c := &Capacity{Weight: d.int(cm, 0), Factor: d.pf(cm, 1), SaturatedAlone: cm&(1<<2) != 0, BacklogCut: cm&(1<<3) != 0}
		c.CPU = d.f(cm, 4)
		c.Busy = d.f(cm, 5)
		c.Bottleneck = d.s(cm, 6)
		c.Reading = d.f(cm, 7)
		c.Driver = d.s(cm, 8)
		c.Estimate = d.f(cm, 9)
		c.Error = d.f(cm, 10)
		c.Rule = d.s(cm, 11)
		r.Capacity = c
	}
	if has(rFormula) {
		fm := d.mask(2, 9, "formula")
		f := &Formula{Before: d.f(fm, 0)}
		f.Load = d.pf(fm, 1)
		f.Step = d.pf(fm, 2)
		f.Raw = d.pf(fm, 3)
		f.Min = d.f(fm, 4)
		f.Max = d.f(fm, 5)
		f.After = d.pf(fm, 6)
		f.Ramp = d.f(fm, 7)
		f.Next = d.int(fm, 8)
		r.Formula = f
	}
	if has(rCompare) {
		cm := d.mask(1, 4, "compare")
		c := &Compare{Next: d.int(cm, 0)}
		c.Rule = d.s(cm, 1)
		c.Passes = cm&(1<<2) != 0
		c.Overrule = d.s(cm, 3)
		r.Compare = c
	}
	if has(rGuard) {
		gm := d.mask(2, 9, "guard")
		g := &Guard{Event: d.s(gm, 0)}
		g.Held = d.int(gm, 1)
		g.From = d.int(gm, 2)
		g.Raised = gm&(1<<3) != 0
		g.Ratio = d.pf(gm, 4)
		g.Median = d.pf(gm, 5)
		g.Active = d.int(gm, 6)
		g.Restore = d.int(gm, 7)
		g.Controller = d.int(gm, 8)
		r.Guard = g
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Errorf("%d bytes after the record's last field", len(d.b)))
	}
	if d.err != nil {
		return Record{}, d.err
	}
	return r, nil
}

func (d *decoder) agent() *Agent {
	m := d.mask(3, 24, "agent")
	a := &Agent{Source: d.s(m, 0)}
	a.Time = d.time(m, 1)
	a.CPU = d.f(m, 2)
	a.Memory = d.f(m, 3)
	a.Disk = d.f(m, 4)
	a.Processes = d.f(m, 5)
	a.CPUUsed = d.f(m, 6)
	a.CPUSpan = d.f(m, 7)
	raw := &a.Raw
	raw.PID = d.int(m, 8)
	raw.WindowSeconds = d.f(m, 9)
	raw.CPUs = d.f(m, 10)
	raw.CPUBusy = d.f(m, 11)
	if m&(1<<12) != 0 {
		raw.MemTotalBytes = d.uvarint()
	}
	if m&(1<<13) != 0 {
		raw.MemAvailableBytes = d.uvarint()
	}
	if m&(1<<14) != 0 {
		n := d.uvarint()
		// Each entry takes at least 9 bytes: a crafted count cannot
		// make the map larger than the record.
		if n == 0 || n > maxDisks || n > uint64(len(d.b)/9) {
			d.fail(fmt.Errorf("agent.raw.disk_space_used: %d entries in %d bytes", n, len(d.b)))
		} else {
			raw.DiskSpaceUsed = make(map[string]float64, n)
			for range n {
				k := d.str()
				raw.DiskSpaceUsed[k] = d.float()
			}
		}
	}
	raw.DiskIOBusy = d.f(m, 15)
	raw.DiskIODevice = d.s(m, 16)
	raw.RunnableTasks = d.int(m, 17)
	raw.Load1 = d.f(m, 18)
	raw.Load5 = d.f(m, 19)
	raw.Load15 = d.f(m, 20)
	raw.PSICPUSome10 = d.pf(m, 21)
	raw.PSIMemorySome10 = d.pf(m, 22)
	raw.PSIIOSome10 = d.pf(m, 23)
	return a
}
