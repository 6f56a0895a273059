//go:build linux

package ipvs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// destMsg builds one message of a destination dump as the kernel sends
// it: the generic netlink header, then IPVS_CMD_ATTR_DEST holding attrs
// (in the kernel's order; a nil value leaves the attribute out).
func destMsg(attrs map[int][]byte) []byte {
	d := nl.NewRtAttr(ipvsCmdAttrDest, nil)
	for typ := 1; typ <= 15; typ++ {
		v, ok := attrs[typ]
		if !ok || v == nil {
			continue
		}
		if typ == ipvsDestAttrStats {
			st := d.AddRtAttr(typ, nil)
			st.AddRtAttr(ipvsStatsAttrConns, v)
			st.AddRtAttr(2, nl.Uint32Attr(123)) // IPVS_STATS_ATTR_INPKTS, not read
			continue
		}
		d.AddRtAttr(typ, v)
	}
	hdr := &nl.Genlmsg{Command: ipvsCmdGetDest, Version: ipvsGenlVersion}
	return append(hdr.Serialize(), d.Serialize()...)
}

// dumped is what Linux 6.1 sends for an IPv4 destination 10.1.0.7:8080,
// masquerade, weight 12, thresholds 1000/100, 3 active, 4 inactive, 42
// templates, 4,000,000,000 connections scheduled, tunnel settings at zero.
func dumped() map[int][]byte {
	return map[int][]byte{
		ipvsDestAttrAddr:         append([]byte{10, 1, 0, 7}, make([]byte, 12)...),
		ipvsDestAttrPort:         nl.BEUint16Attr(8080),
		ipvsDestAttrFwdMethod:    nl.Uint32Attr(0),
		ipvsDestAttrWeight:       nl.Uint32Attr(12),
		ipvsDestAttrUThresh:      nl.Uint32Attr(1000),
		ipvsDestAttrLThresh:      nl.Uint32Attr(100),
		ipvsDestAttrActiveConns:  nl.Uint32Attr(3),
		ipvsDestAttrInactConns:   nl.Uint32Attr(4),
		ipvsDestAttrPersistConns: nl.Uint32Attr(42),
		ipvsDestAttrStats:        nl.Uint32Attr(4_000_000_000),
		ipvsDestAttrAddrFamily:   nl.Uint16Attr(uint16(IPv4)),
		ipvsDestAttrTunType:      {0},
		ipvsDestAttrTunPort:      nl.BEUint16Attr(0),
		ipvsDestAttrTunFlags:     nl.Uint16Attr(0),
	}
}

// with returns dumped() with the attributes in set replaced (nil: left
// out).
func with(set map[int][]byte) map[int][]byte {
	m := dumped()
	for k, v := range set {
		m[k] = v
	}
	return m
}

// TestParseKernelDest reads destinations out of dump messages built by
// hand: every field, both families, the family taken from the service when
// the kernel does not send the destination's, tunnel settings, and every
// message missing a setting or count refused rather than read as zero.
func TestParseKernelDest(t *testing.T) {
	v6 := netip.MustParseAddr("2001:db8:1::9").AsSlice()
	full := kernelDest{
		Destination: Destination{Addr: netip.MustParseAddrPort("10.1.0.7:8080"), Weight: 12,
			ActiveConns: 3, InactiveConns: 4, Connections: 4_000_000_000},
		family: uint16(IPv4), sentFamily: true, fwd: 0, upper: 1000, lower: 100,
		haveTun: true, persistTemplates: 42,
	}
	gue := full
	gue.fwd, gue.tunType, gue.tunPort, gue.tunFlags = 2, 1, 6080, 3
	v6dest := full
	v6dest.Addr, v6dest.family = netip.MustParseAddrPort("[2001:db8:1::9]:8080"), uint16(IPv6)
	old := full // a kernel before 4.4 and 5.3: no family, no tunnel
	old.sentFamily, old.haveTun = false, false
	noCount := full
	noCount.persistTemplates = -1
	cases := []struct {
		name   string
		attrs  map[int][]byte
		svcFam Family
		want   kernelDest
		err    string
	}{
		{"ipv4, every attribute", dumped(), IPv4, full, ""},
		{"tunnel, GUE to port 6080", with(map[int][]byte{3: nl.Uint32Attr(2), 13: {1}, 14: nl.BEUint16Attr(6080), 15: nl.Uint16Attr(3)}), IPv4, gue, ""},
		{"ipv6", with(map[int][]byte{1: v6, 11: nl.Uint16Attr(uint16(IPv6))}), IPv6, v6dest, ""},
		{"ipv4 destination of an ipv6 fwmark service", dumped(), IPv6, full, ""},
		{"old kernel: family from the service, no tunnel", with(map[int][]byte{11: nil, 13: nil, 14: nil, 15: nil}), IPv4, old, ""},
		{"no template count", with(map[int][]byte{9: nil}), IPv4, noCount, ""},
		{"short template count", with(map[int][]byte{9: nl.Uint16Attr(1)}), IPv4, noCount, ""},
		{"no weight", with(map[int][]byte{4: nil}), IPv4, kernelDest{}, "without some of its settings"},
		{"short weight", with(map[int][]byte{4: nl.Uint16Attr(12)}), IPv4, kernelDest{}, "without some of its settings"},
		{"weight beyond the kernel's int", with(map[int][]byte{4: nl.Uint32Attr(0x80000000)}), IPv4, kernelDest{}, "weight -2147483648"},
		{"no forwarding method", with(map[int][]byte{3: nil}), IPv4, kernelDest{}, "without some of its settings"},
		{"no thresholds", with(map[int][]byte{5: nil, 6: nil}), IPv4, kernelDest{}, "without some of its settings"},
		{"no active count", with(map[int][]byte{7: nil}), IPv4, kernelDest{}, "without some of its settings"},
		{"no statistics", with(map[int][]byte{10: nil}), IPv4, kernelDest{}, "without some of its settings"},
		{"no port", with(map[int][]byte{2: nil}), IPv4, kernelDest{}, "without some of its settings"},
		{"two tunnel settings of three", with(map[int][]byte{15: nil}), IPv4, kernelDest{}, "2 of its 3 tunnel settings"},
		{"no address", with(map[int][]byte{1: nil}), IPv4, kernelDest{}, "address of 0 bytes"},
		{"short ipv6 address", with(map[int][]byte{1: {10, 1, 0, 7}, 11: nl.Uint16Attr(uint16(IPv6))}), IPv6, kernelDest{}, "address of 4 bytes"},
	}
	for _, c := range cases {
		got, err := parseKernelDest(destMsg(c.attrs), c.svcFam)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %+v, %v; want an error about %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s:\n got  %+v, %v\n want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := parseKernelDest([]byte{1, 2}, IPv4); err == nil {
		t.Error("a 2-byte message was read")
	}
	hdr := (&nl.Genlmsg{Command: ipvsCmdGetDest, Version: ipvsGenlVersion}).Serialize()
	if _, err := parseKernelDest(hdr, IPv4); err == nil {
		t.Error("a message without IPVS_CMD_ATTR_DEST was read")
	}
	// An attribute whose length runs past the message.
	bad := append(bytes.Clone(hdr), 40, 0, ipvsCmdAttrDest, 0, 1, 2, 3, 4)
	if _, err := parseKernelDest(bad, IPv4); err == nil || !strings.Contains(err.Error(), "length 40 in 8 bytes") {
		t.Errorf("an overlong attribute: %v", err)
	}
}

// TestAppendSetDest builds two weight writes into one buffer and reads
// them back with the standard library's netlink parser and the netlink
// package's attribute parser: each message's header, the service attribute
// as given, and every destination setting with only the weight as asked,
// the tunnel settings and the family only when the kernel dumped them.
func TestAppendSetDest(t *testing.T) {
	svc := serviceAttr(mustKey(t, "192.0.2.10:80/tcp")).Serialize()
	plain := kernelDest{Destination: Destination{Addr: netip.MustParseAddrPort("10.1.0.7:8080"), Weight: 7},
		fwd: 3, upper: 1000, lower: 100, family: uint16(IPv4)}
	tun := kernelDest{Destination: Destination{Addr: netip.MustParseAddrPort("[2001:db8::5]:80"), Weight: 65535},
		fwd: 2, family: uint16(IPv6), sentFamily: true, haveTun: true, tunType: 1, tunPort: 6080, tunFlags: 3}
	buf := appendSetDest(nil, 0x23, 900, false, svc, plain)
	buf = appendSetDest(buf, 0x23, 901, true, svc, tun)
	msgs, err := syscall.ParseNetlinkMessage(buf)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("parse: %d messages, %v", len(msgs), err)
	}
	ne := binary.NativeEndian
	u32 := func(v uint32) []byte { return ne.AppendUint32(nil, v) }
	want := []struct {
		seq   uint32
		flags uint16
		attrs map[uint16][]byte
	}{
		{900, unix.NLM_F_REQUEST, map[uint16][]byte{
			1: {10, 1, 0, 7}, 2: {0x1f, 0x90}, 3: u32(3), 4: u32(7), 5: u32(1000), 6: u32(100)}},
		{901, unix.NLM_F_REQUEST | unix.NLM_F_ACK, map[uint16][]byte{
			1: netip.MustParseAddr("2001:db8::5").AsSlice(), 2: {0, 80}, 11: ne.AppendUint16(nil, 10),
			3: u32(2), 4: u32(65535), 5: u32(0), 6: u32(0), 13: {1}, 14: {0x17, 0xc0}, 15: ne.AppendUint16(nil, 3)}},
	}
	for i, m := range msgs {
		w := want[i]
		if m.Header.Type != 0x23 || m.Header.Flags != w.flags || m.Header.Seq != w.seq || m.Header.Pid != 0 {
			t.Errorf("message %d header %+v; want type 0x23, flags %#x, seq %d", i, m.Header, w.flags, w.seq)
		}
		if m.Data[0] != ipvsCmdSetDest || m.Data[1] != ipvsGenlVersion {
			t.Errorf("message %d: command %d version %d", i, m.Data[0], m.Data[1])
		}
		top, err := nl.ParseRouteAttr(m.Data[nl.SizeofGenlmsg:])
		if err != nil || len(top) != 2 {
			t.Fatalf("message %d: %d top attributes, %v", i, len(top), err)
		}
		if top[0].Attr.Type != ipvsCmdAttrService || !bytes.Equal(top[0].Value, svc[unix.SizeofNlAttr:]) {
			t.Errorf("message %d: service attribute %v", i, top[0])
		}
		if top[1].Attr.Type != ipvsCmdAttrDest {
			t.Fatalf("message %d: second attribute of type %d", i, top[1].Attr.Type)
		}
		attrs, err := nl.ParseRouteAttr(top[1].Value)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got := map[uint16][]byte{}
		for _, a := range attrs {
			got[a.Attr.Type] = a.Value
		}
		if len(got) != len(w.attrs) {
			t.Errorf("message %d: attributes %v; want %v", i, got, w.attrs)
		}
		for typ, v := range w.attrs {
			if !bytes.Equal(got[typ], v) {
				t.Errorf("message %d: attribute %d = %v; want %v", i, typ, got[typ], v)
			}
		}
	}
}

// TestAckErrno reads the kernel's error replies: 0 is an acknowledgement,
// -2 is ENOENT, and a payload too short for the code is an error.
func TestAckErrno(t *testing.T) {
	for _, c := range []struct {
		code int32
		want syscall.Errno
	}{{0, 0}, {-2, unix.ENOENT}, {-3, unix.ESRCH}} {
		got, err := ackErrno(binary.NativeEndian.AppendUint32(nil, uint32(c.code)))
		if err != nil || got != c.want {
			t.Errorf("code %d: %v, %v; want %v", c.code, got, err, c.want)
		}
	}
	if _, err := ackErrno([]byte{1}); err == nil {
		t.Error("a 1-byte error message was read")
	}
}

// TestDestDumpReadsToTheEnd feeds a dump's messages to destDump by hand:
// a message it cannot read, or one marked interrupted, makes the dump an
// error, but every message up to DONE is still taken (a half-read dump
// would make the kernel refuse the socket's next one); the kernel's
// errors in DONE and in an error message end the dump with that errno.
func TestDestDumpReadsToTheEnd(t *testing.T) {
	const fam = 0x23
	good := destMsg(dumped())
	bad := destMsg(with(map[int][]byte{4: nil}))
	done := binary.NativeEndian.AppendUint32(nil, 0)
	msg := func(typ, flags uint16) *unix.NlMsghdr { return &unix.NlMsghdr{Type: typ, Flags: flags} }
	type step struct {
		h    *unix.NlMsghdr
		data []byte
	}
	cases := []struct {
		name    string
		steps   []step
		wantN   int    // destinations read
		wantErr string // dr.err or the error that ends the dump
		doneAt  int    // the step that ends the dump
	}{
		{"two destinations", []step{{msg(fam, unix.NLM_F_MULTI), good}, {msg(fam, unix.NLM_F_MULTI), good}, {msg(unix.NLMSG_DONE, unix.NLM_F_MULTI), done}}, 2, "", 2},
		{"empty", []step{{msg(unix.NLMSG_DONE, unix.NLM_F_MULTI), done}}, 0, "", 0},
		{"an unreadable message, read to the end", []step{{msg(fam, 0), good}, {msg(fam, 0), bad}, {msg(fam, 0), good}, {msg(unix.NLMSG_DONE, 0), done}}, 1, "without some of its settings", 3},
		{"interrupted", []step{{msg(fam, 0), good}, {msg(fam, unix.NLM_F_DUMP_INTR), good}, {msg(unix.NLMSG_DONE, 0), done}}, 1, "interrupted", 2},
		{"interrupted at DONE", []step{{msg(fam, 0), good}, {msg(unix.NLMSG_DONE, unix.NLM_F_DUMP_INTR), done}}, 1, "interrupted", 1},
		{"another type skipped", []step{{msg(fam+1, 0), bad}, {msg(fam, 0), good}, {msg(unix.NLMSG_DONE, 0), done}}, 1, "", 2},
		{"error in DONE", []step{{msg(fam, 0), good}, {msg(unix.NLMSG_DONE, 0), binary.NativeEndian.AppendUint32(nil, uint32(0xffffffff-unix.EINVAL+1))}}, 1, "invalid argument", 1},
		{"refused", []step{{msg(unix.NLMSG_ERROR, 0), binary.NativeEndian.AppendUint32(nil, uint32(0xffffffff-unix.EPERM+1))}}, 0, "operation not permitted", 0},
	}
	for _, c := range cases {
		dr := destDump{family: fam, svcFam: IPv4}
		doneAt, doneErr := -1, error(nil)
		for i, s := range c.steps {
			done, err := dr.next(s.h, s.data)
			if done {
				doneAt, doneErr = i, err
				break
			}
			if err != nil {
				t.Fatalf("%s: step %d: error %v without the end", c.name, i, err)
			}
		}
		if doneAt != c.doneAt {
			t.Errorf("%s: done at step %d, want %d", c.name, doneAt, c.doneAt)
		}
		err := doneErr
		if err == nil {
			err = dr.err
		}
		switch {
		case c.wantErr == "" && err != nil, c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		}
		if len(dr.out) != c.wantN {
			t.Errorf("%s: %d destinations read, want %d", c.name, len(dr.out), c.wantN)
		}
	}
}

// TestWaitGivesUp runs wait on the read end of a non-blocking pipe, with
// the timeout shortened: empty, or ready but with an op that keeps
// answering EAGAIN, it gives up with ETIMEDOUT rather than waiting
// forever; with something to read it returns the read.
func TestWaitGivesUp(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	saved := genlTimeout
	genlTimeout = 50 * time.Millisecond
	defer func() { genlTimeout = saved }()
	k := &Kernel{}
	buf := make([]byte, 8)
	calls := 0
	read := func() error {
		calls++
		_, err := unix.Read(p[0], buf)
		return err
	}
	if err := k.wait(p[0], unix.POLLIN, read); !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("wait on an empty pipe: %v, want ETIMEDOUT", err)
	}
	if calls < 1 {
		t.Fatalf("op called %d times", calls)
	}
	if _, err := unix.Write(p[1], []byte("x")); err != nil {
		t.Fatal(err)
	}
	// The fd polls ready at once, and op still answers EAGAIN: the bound
	// is on the whole wait, not on each poll.
	spins := 0
	if err := k.wait(p[0], unix.POLLIN, func() error { spins++; return unix.EAGAIN }); !errors.Is(err, unix.ETIMEDOUT) || spins < 2 {
		t.Fatalf("wait on an op that never succeeds: %v after %d calls, want ETIMEDOUT", err, spins)
	}
	if err := k.wait(p[0], unix.POLLIN, read); err != nil || buf[0] != 'x' {
		t.Fatalf("wait with a byte to read: %v, read %q", err, buf[:1])
	}
}
