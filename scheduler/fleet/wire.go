package fleet

import (
	"errors"
	"fmt"
	"lvs-feedback/replica"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// formatVersion is written into every stored value; a reader refuses
// other versions rather than guess.
const formatVersion = 1

// maxValueBytes bounds what a reader decodes (etcd's default request
// limit is 1.5 MiB; a document for 10,000 destinations is well under it).
const maxValueBytes = 4 << 20

// DestCounters is one destination's connection figures as one director's
// table shows them.
type DestCounters struct {
	Key replica.DestKey
	// NewTotal is the new connections this director's table scheduled to
	// the destination since the director started (sum of its counter
	// deltas): a reader takes differences, so that reading a publication
	// twice or missing one counts every connection once.
	NewTotal uint64
	// New is the last cycle's new connections (-1: not known yet), for a
	// reader without an earlier reading of this director.
	New int64
	// Active and Inactive are the table's connection counts at the last
	// cycle.
	Active, Inactive int
}

// Counters is what one director publishes every cycle under its lease.
type Counters struct {
	Director string
	// Start identifies the director's run (its edit epoch): a restarted
	// director's totals start again from zero.
	Start uint64
	Cycle uint64
	Dests []DestCounters
	// Edits are the operator changes made on this director (lvsctl drain,
	// ipvsadm) that the leader has not acknowledged yet.
	Edits []replica.Edit
}

// Document is the leader's desired state for the whole fleet.
type Document struct {
	Leader string
	// Term is the leader's election key creation revision: a document
	// from a later leader has a higher term.
	Term  int64
	Cycle uint64 // the leader's cycle count in its term
	// Snapshot is every destination's weight, ownership and controller
	// state.
	Snapshot replica.Snapshot
	// Acks say up to which edit of each director the leader applied.
	Acks []replica.Ack
	// Revision is etcd's modification revision of the document as read
	// (not stored in the value).
	Revision int64
}

// Counters are stored as lines (they are written by every director every
// cycle and read by the leader every cycle: a line format costs a fraction
// of JSON's CPU at 1,000 destinations):
//
//	lvs-feedback-counters 1 DIRECTOR START CYCLE
//	s SERVICE
//	d DEST NEWTOTAL NEW ACTIVE INACTIVE      (a destination of the last s line)
//	e DEST EPOCH ID WEIGHT                   (an edit, of the last s line)
const countersMagic = "lvs-feedback-counters"

// EncodeCounters returns c's stored form.
func EncodeCounters(c Counters) ([]byte, error) {
	if !replica.ValidSender(c.Director) {
		return nil, fmt.Errorf("counters: invalid director id %q", c.Director)
	}
	b := make([]byte, 0, 64+48*len(c.Dests))
	b = fmt.Appendf(b, "%s %d %s %d %d\n", countersMagic, formatVersion, c.Director, c.Start, c.Cycle)
	var svc ipvs.ServiceKey
	have := false
	setSvc := func(k ipvs.ServiceKey) {
		if !have || k != svc {
			b = append(b, "s "...)
			b = append(b, k.String()...)
			b = append(b, '\n')
			svc, have = k, true
		}
	}
	for _, d := range c.Dests {
		setSvc(d.Key.Service)
		b = append(b, "d "...)
		b = d.Key.Dest.AppendTo(b)
		b = append(b, ' ')
		b = strconv.AppendUint(b, d.NewTotal, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, d.New, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(d.Active), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(d.Inactive), 10)
		b = append(b, '\n')
	}
	for _, e := range c.Edits {
		setSvc(e.Key.Service)
		b = append(b, "e "...)
		b = e.Key.Dest.AppendTo(b)
		b = fmt.Appendf(b, " %d %d %d", e.Pos.Epoch, e.Pos.ID, e.Weight)
		if e.Op != "" {
			b = append(b, ' ')
			b = append(b, e.Op...)
		}
		b = append(b, '\n')
	}
	return b, nil
}

// DecodeCounters reads a stored Counters and checks it.
func DecodeCounters(b []byte) (Counters, error) {
	if len(b) > maxValueBytes {
		return Counters{}, fmt.Errorf("counters: %d bytes, over the %d-byte limit", len(b), maxValueBytes)
	}
	text := string(b)
	head, rest, _ := strings.Cut(text, "\n")
	f := strings.Fields(head)
	if len(f) != 5 || f[0] != countersMagic {
		return Counters{}, errors.New("counters: no header line")
	}
	if f[1] != strconv.Itoa(formatVersion) {
		return Counters{}, fmt.Errorf("counters: format version %s, want %d", f[1], formatVersion)
	}
	if !replica.ValidSender(f[2]) {
		return Counters{}, fmt.Errorf("counters: invalid director id %q", f[2])
	}
	c := Counters{Director: f[2], Dests: make([]DestCounters, 0, strings.Count(rest, "\nd ")+1)}
	var err error
	if c.Start, err = strconv.ParseUint(f[3], 10, 64); err != nil {
		return Counters{}, fmt.Errorf("counters: start: %w", err)
	}
	if c.Cycle, err = strconv.ParseUint(f[4], 10, 64); err != nil {
		return Counters{}, fmt.Errorf("counters: cycle: %w", err)
	}
	var svc ipvs.ServiceKey
	haveSvc := false
	var fields [6]string
	for n := 2; rest != ""; n++ {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		k := splitFields(line, fields[:])
		bad := func(what string, err error) (Counters, error) {
			if err != nil {
				return Counters{}, fmt.Errorf("counters of %s, line %d: %s: %w", c.Director, n, what, err)
			}
			return Counters{}, fmt.Errorf("counters of %s, line %d: %s", c.Director, n, what)
		}
		switch {
		case k == 2 && fields[0] == "s":
			if svc, err = ipvs.ParseServiceKey(fields[1]); err != nil {
				return bad("service", err)
			}
			haveSvc = true
		case k == 6 && fields[0] == "d" && haveSvc:
			dst, err := netip.ParseAddrPort(fields[1])
			if err != nil {
				return bad("destination", err)
			}
			nt, err1 := strconv.ParseUint(fields[2], 10, 64)
			nw, err2 := strconv.ParseInt(fields[3], 10, 64)
			act, err3 := strconv.Atoi(fields[4])
			ina, err4 := strconv.Atoi(fields[5])
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				return bad("counts", err)
			}
			if nw < -1 || act < 0 || ina < 0 {
				return bad("negative connection count", nil)
			}
			c.Dests = append(c.Dests, DestCounters{Key: replica.DestKey{Service: svc, Dest: dst}, NewTotal: nt, New: nw, Active: act, Inactive: ina})
		case (k == 5 || k == 6) && fields[0] == "e" && haveSvc:
			dst, err := netip.ParseAddrPort(fields[1])
			if err != nil {
				return bad("edit destination", err)
			}
			ep, err1 := strconv.ParseUint(fields[2], 10, 64)
			id, err2 := strconv.ParseUint(fields[3], 10, 64)
			w, err3 := strconv.Atoi(fields[4])
			if err := errors.Join(err1, err2, err3); err != nil {
				return bad("edit", err)
			}
			e := replica.Edit{Pos: replica.EditPos{Epoch: ep, ID: id}, Key: replica.DestKey{Service: svc, Dest: dst}, Weight: w}
			if k == 6 {
				e.Op = fields[5] // an lvsctl request; Validate refuses an unknown one
			}
			if err := e.Validate(); err != nil {
				return bad("edit", err)
			}
			c.Edits = append(c.Edits, e)
		case line == "" && rest == "":
		default:
			return bad(fmt.Sprintf("unreadable line %q", line), nil)
		}
	}
	return c, nil
}

// splitFields splits line at single spaces into out and returns how many
// fields it has (len(out)+1 when there are more than fit).
func splitFields(line string, out []string) int {
	n := 0
	for {
		f, rest, more := strings.Cut(line, " ")
		if n == len(out) {
			return n + 1
		}
		out[n] = f
		n++
		if !more {
			return n
		}
		line = rest
	}
}

// ErrMalformed marks a stored value that does not decode or fails its
// checks; nothing of it is used.
var ErrMalformed = errors.New("malformed value in etcd")

// The document is stored as lines too (written by the leader and read by
// every director every cycle):
//
//	lvs-feedback-state 1 LEADER TERM CYCLE
//	s SERVICE
//	d DEST STATE WEIGHT DEFAULT OVERRIDE OVERRIDDEN RESTORE SETBY CTRL CTRLSET RAMPING RAMP_NS
//	a DIRECTOR EPOCH ID                      (an acknowledgement)
//
// SETBY is "-" when unknown; CTRLSET and RAMPING are 0 or 1.
const documentMagic = "lvs-feedback-state"

// EncodeDocument returns d's stored form.
func EncodeDocument(d Document) ([]byte, error) {
	if !replica.ValidSender(d.Leader) {
		return nil, fmt.Errorf("document: invalid leader id %q", d.Leader)
	}
	b := make([]byte, 0, 64+64*len(d.Snapshot.Dests))
	b = fmt.Appendf(b, "%s %d %s %d %d\n", documentMagic, formatVersion, d.Leader, d.Term, d.Cycle)
	var svc ipvs.ServiceKey
	have := false
	num := func(v int64) {
		b = append(b, ' ')
		b = strconv.AppendInt(b, v, 10)
	}
	flag := func(v bool) {
		if v {
			b = append(b, " 1"...)
		} else {
			b = append(b, " 0"...)
		}
	}
	for _, x := range d.Snapshot.Dests {
		if !have || x.Key.Service != svc {
			b = append(b, "s "...)
			b = append(b, x.Key.Service.String()...)
			b = append(b, '\n')
			svc, have = x.Key.Service, true
		}
		if strings.ContainsAny(x.State, " \n") || strings.ContainsAny(string(x.SetBy), " \n") {
			return nil, fmt.Errorf("document: %s: state or origin with a space", x.Key)
		}
		b = append(b, "d "...)
		b = x.Key.Dest.AppendTo(b)
		b = append(b, ' ')
		b = append(b, x.State...)
		for _, v := range []int{x.Weight, x.DefaultWeight, x.DefaultOverride, x.OverriddenConfig, x.RestoreWeight} {
			num(int64(v))
		}
		b = append(b, ' ')
		if x.SetBy == "" {
			b = append(b, '-')
		} else {
			b = append(b, x.SetBy...)
		}
		b = append(b, ' ')
		b = strconv.AppendFloat(b, x.Ctrl, 'g', -1, 64)
		flag(x.CtrlSet)
		flag(x.Ramping)
		num(int64(x.RampElapsed))
		flag(x.Held)
		b = append(b, '\n')
	}
	for _, a := range d.Acks {
		b = fmt.Appendf(b, "a %s %d %d\n", a.Peer, a.Pos.Epoch, a.Pos.ID)
	}
	return b, nil
}

// consistent checks what a leader's own records always satisfy: a default
// weight of at least 1 (the configuration refuses 0; an operator's
// override is their weight, never 0) and weight 0 for a server out of
// rotation (drained or down).
func consistent(x replica.DestState) error {
	if x.DefaultWeight < 1 {
		return fmt.Errorf("%s: default weight %d (a default weight is at least 1)", x.Key, x.DefaultWeight)
	}
	if (x.State == string(policy.DrainedByOperator) || x.State == string(policy.Down)) && x.Weight != 0 {
		return fmt.Errorf("%s: %s with weight %d (a server out of rotation has weight 0)", x.Key, x.State, x.Weight)
	}
	if x.Held && x.State != string(policy.DrainedByOperator) {
		return fmt.Errorf("%s: held while %s (only an lvsctl drain is held)", x.Key, x.State)
	}
	return nil
}

// DecodeDocument reads a stored Document and checks every field a
// director would apply.
func DecodeDocument(b []byte) (Document, error) {
	if len(b) > maxValueBytes {
		return Document{}, fmt.Errorf("document: %d bytes, over the %d-byte limit", len(b), maxValueBytes)
	}
	head, rest, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(head)
	if len(f) != 5 || f[0] != documentMagic {
		return Document{}, errors.New("document: no header line")
	}
	if f[1] != strconv.Itoa(formatVersion) {
		return Document{}, fmt.Errorf("document: format version %s, want %d", f[1], formatVersion)
	}
	d := Document{Leader: f[2]}
	term, err1 := strconv.ParseInt(f[3], 10, 64)
	cycle, err2 := strconv.ParseUint(f[4], 10, 64)
	if !replica.ValidSender(d.Leader) || err1 != nil || err2 != nil || term <= 0 {
		return Document{}, fmt.Errorf("document: invalid leader %q, term %q or cycle %q", f[2], f[3], f[4])
	}
	d.Term, d.Cycle = term, cycle
	d.Snapshot.Dests = make([]replica.DestState, 0, strings.Count(rest, "\nd ")+1)
	seen := make(map[replica.DestKey]bool, cap(d.Snapshot.Dests))
	var svc ipvs.ServiceKey
	haveSvc := false
	var fields [14]string
	for n := 2; rest != ""; n++ {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		k := splitFields(line, fields[:])
		bad := func(what string, err error) (Document, error) {
			if err != nil {
				return Document{}, fmt.Errorf("document, line %d: %s: %w", n, what, err)
			}
			return Document{}, fmt.Errorf("document, line %d: %s", n, what)
		}
		var err error
		switch {
		case k == 2 && fields[0] == "s":
			if svc, err = ipvs.ParseServiceKey(fields[1]); err != nil {
				return bad("service", err)
			}
			haveSvc = true
		case (k == 13 || k == 14) && fields[0] == "d" && haveSvc:
			dst, err := netip.ParseAddrPort(fields[1])
			if err != nil {
				return bad("destination", err)
			}
			key := replica.DestKey{Service: svc, Dest: dst}
			if seen[key] {
				return bad(key.String()+" listed twice", nil)
			}
			seen[key] = true
			x := replica.DestState{Key: key, State: fields[2]}
			for i, p := range []*int{&x.Weight, &x.DefaultWeight, &x.DefaultOverride, &x.OverriddenConfig, &x.RestoreWeight} {
				v, err := strconv.Atoi(fields[3+i])
				if err != nil {
					return bad(fmt.Sprintf("%s: weight %q", key, fields[3+i]), err)
				}
				*p = v
			}
			if fields[8] != "-" {
				x.SetBy = policy.Origin(fields[8])
			}
			ctrl, err1 := strconv.ParseFloat(fields[9], 64)
			ramp, err2 := strconv.ParseInt(fields[12], 10, 64)
			if err1 != nil || err2 != nil || (fields[10] != "0" && fields[10] != "1") || (fields[11] != "0" && fields[11] != "1") {
				return bad(key.String()+": unreadable controller state", nil)
			}
			x.Carried = policy.Carried{Ctrl: ctrl, CtrlSet: fields[10] == "1", Ramping: fields[11] == "1", RampElapsed: time.Duration(ramp)}
			if k == 14 { // held: an lvsctl drain; a leader that does not write it holds none
				if fields[13] != "0" && fields[13] != "1" {
					return bad(key.String()+": unreadable held flag", nil)
				}
				x.Held = fields[13] == "1"
			}
			if err := x.Validate(); err != nil {
				return bad("destination", err)
			}
			if err := consistent(x); err != nil {
				return bad("destination", err)
			}
			d.Snapshot.Dests = append(d.Snapshot.Dests, x)
		case k == 4 && fields[0] == "a":
			ep, err1 := strconv.ParseUint(fields[2], 10, 64)
			id, err2 := strconv.ParseUint(fields[3], 10, 64)
			if !replica.ValidSender(fields[1]) || err1 != nil || err2 != nil {
				return bad(fmt.Sprintf("unreadable acknowledgement %q", line), nil)
			}
			d.Acks = append(d.Acks, replica.Ack{Peer: fields[1], Pos: replica.EditPos{Epoch: ep, ID: id}})
		case line == "" && rest == "":
		default:
			return bad(fmt.Sprintf("unreadable line %q", line), nil)
		}
	}
	return d, nil
}
