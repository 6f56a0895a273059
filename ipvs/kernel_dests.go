//go:build linux

package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Kernel reads and writes destinations itself, on its own generic netlink
// socket, rather than through moby/ipvs, for three reasons:
//   - moby/ipvs's write sends only address, port, forwarding method,
//     weight and thresholds, and IPVS_CMD_SET_DEST resets what is not sent:
//     a tunnel destination's type, port and flags (Linux 5.3 on) went back
//     to IPIP, port 0, and a destination of another family than its
//     service's became unreachable. A write here sends back every setting
//     the dump showed, with only the weight changed.
//   - moby/ipvs allocates every attribute of every destination of a dump
//     (about 2.7 KB a destination); the cycle reads each service once and
//     writes each service's changes after a second, compare-and-set, dump.
//   - moby/ipvs waits for an acknowledgement after every write; here up to
//     setBatch writes go to the kernel in one sendmsg, and only the last asks
//     for an acknowledgement (the kernel answers a failed one regardless).
//
// It also reads IPVS_DEST_ATTR_PERSIST_CONNS, the persistence templates,
// which moby/ipvs reads past (Persistence). Numbers are from linux/ip_vs.h.
const (
	ipvsCmdSetDest  = 6 // IPVS_CMD_SET_DEST
	ipvsGenlVersion = 1 // IPVS_GENL_VERSION
	ipvsCmdGetDest  = 8 // IPVS_CMD_GET_DEST

	ipvsCmdAttrService = 1 // IPVS_CMD_ATTR_SERVICE, nested
	ipvsCmdAttrDest    = 2 // IPVS_CMD_ATTR_DEST, nested

	ipvsSvcAttrAF       = 1 // u16
	ipvsSvcAttrProtocol = 2 // u16
	ipvsSvcAttrAddr     = 3 // 4 or 16 bytes
	ipvsSvcAttrPort     = 4 // u16, network order
	ipvsSvcAttrFWMark   = 5 // u32

	ipvsDestAttrAddr         = 1  // 16 bytes (union nf_inet_addr)
	ipvsDestAttrPort         = 2  // u16, network order
	ipvsDestAttrFwdMethod    = 3  // u32
	ipvsDestAttrWeight       = 4  // u32 (the kernel's int)
	ipvsDestAttrUThresh      = 5  // u32
	ipvsDestAttrLThresh      = 6  // u32
	ipvsDestAttrActiveConns  = 7  // u32
	ipvsDestAttrInactConns   = 8  // u32
	ipvsDestAttrPersistConns = 9  // u32
	ipvsDestAttrStats        = 10 // nested IPVS_STATS_ATTR_*
	ipvsDestAttrAddrFamily   = 11 // u16; absent before Linux 4.4: the service's family
	ipvsDestAttrTunType      = 13 // u8, Linux 5.3 on
	ipvsDestAttrTunPort      = 14 // u16, network order
	ipvsDestAttrTunFlags     = 15 // u16

	ipvsStatsAttrConns = 1 // u32, connections scheduled (wraps)
)

// nlaTypeMask clears an attribute type's nested and byte-order flags.
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// genlTimeout bounds one send and one receive on Kernel's own socket, so
// that a lost reply is an error and not a wait forever.
var genlTimeout = 10 * time.Second

// setBatch is how many weight writes go to the kernel in one sendmsg. The
// kernel queues an error reply of about a kilobyte (the request echoed, the
// socket buffer's overhead) for each write that fails; 64 of them stay well
// inside the default 208 KiB receive buffer, so no failure can be dropped.
const setBatch = 64

// kernelDest is one destination as the kernel dumps it: what Destination
// shows, and the settings a weight write must send back unchanged.
type kernelDest struct {
	Destination
	// family is IPVS_DEST_ATTR_ADDR_FAMILY, or the service's when the
	// kernel does not send it (before Linux 4.4).
	family     uint16
	sentFamily bool
	fwd        uint32
	upper      uint32
	lower      uint32
	// The tunnel settings, sent back only when the kernel dumped them.
	tunType          uint8
	tunPort          uint16 // host order
	tunFlags         uint16
	haveTun          bool
	persistTemplates int // -1 when the kernel did not send the count
}

// eachAttr calls fn with each netlink attribute in b (its type without the
// nested and byte-order flags, and its value). An attribute whose length
// runs past b is an error.
// (nl.ParseRouteAttr does the same into a new slice per call: two per
// destination of every dump.)
func eachAttr(b []byte, fn func(typ uint16, val []byte)) error {
	ne := nl.NativeEndian()
	for len(b) >= unix.SizeofNlAttr {
		n := int(ne.Uint16(b[0:2]))
		if n < unix.SizeofNlAttr || n > len(b) {
			return fmt.Errorf("netlink attribute of length %d in %d bytes", n, len(b))
		}
		fn(ne.Uint16(b[2:4])&nlaTypeMask, b[unix.SizeofNlAttr:n])
		n = netlinkAlign(n)
		if n >= len(b) {
			return nil
		}
		b = b[n:]
	}
	return nil
}

// netlinkAlign rounds n up to netlink's 4-byte alignment (NLA_ALIGNTO and
// NLMSG_ALIGNTO alike).
func netlinkAlign(n int) int { return (n + 3) &^ 3 }

// parseKernelDest reads one message of a destination dump (its generic netlink
// header and attributes). svcFam is the service's family, for a kernel that
// does not send the destination's. Every attribute the kernel has always
// sent (address, port, forwarding method, weight, thresholds, connection
// counts, statistics) must be there: a missing one is an error, not a zero,
// so that no weight is compared or written from a partial reading.
func parseKernelDest(msg []byte, svcFam Family) (kernelDest, error) {
	d := kernelDest{persistTemplates: -1}
	if len(msg) < nl.SizeofGenlmsg {
		return d, fmt.Errorf("destination message of %d bytes", len(msg))
	}
	var dest []byte
	if err := eachAttr(msg[nl.SizeofGenlmsg:], func(typ uint16, val []byte) {
		if typ == ipvsCmdAttrDest {
			dest = val
		}
	}); err != nil {
		return d, fmt.Errorf("destination message: %w", err)
	}
	if dest == nil {
		return d, errors.New("destination message without IPVS_CMD_ATTR_DEST")
	}
	ne := nl.NativeEndian()
	const (
		haveAddr = 1 << iota
		havePort
		haveFwd
		haveWeight
		haveUpper
		haveLower
		haveActive
		haveInact
		haveConns
		haveAll = 1<<iota - 1
	)
	var addr []byte
	have := 0
	var tunSeen int
	u32 := func(val []byte, bit int) uint32 {
		if len(val) != 4 {
			return 0
		}
		have |= bit
		return ne.Uint32(val)
	}
	err := eachAttr(dest, func(typ uint16, val []byte) {
		switch typ {
		case ipvsDestAttrAddr:
			addr, have = val, have|haveAddr
		case ipvsDestAttrPort:
			if len(val) == 2 {
				d.Addr, have = netip.AddrPortFrom(netip.Addr{}, binary.BigEndian.Uint16(val)), have|havePort
			}
		case ipvsDestAttrAddrFamily:
			if len(val) == 2 {
				d.family, d.sentFamily = ne.Uint16(val), true
			}
		case ipvsDestAttrFwdMethod:
			d.fwd = u32(val, haveFwd)
		case ipvsDestAttrWeight:
			d.Weight = int(int32(u32(val, haveWeight)))
		case ipvsDestAttrUThresh:
			d.upper = u32(val, haveUpper)
		case ipvsDestAttrLThresh:
			d.lower = u32(val, haveLower)
		case ipvsDestAttrActiveConns:
			d.ActiveConns = int(u32(val, haveActive))
		case ipvsDestAttrInactConns:
			d.InactiveConns = int(u32(val, haveInact))
		case ipvsDestAttrPersistConns:
			if len(val) == 4 {
				d.persistTemplates = int(ne.Uint32(val))
			}
		case ipvsDestAttrStats:
			_ = eachAttr(val, func(st uint16, sv []byte) {
				if st == ipvsStatsAttrConns {
					d.Connections = u32(sv, haveConns)
				}
			})
		case ipvsDestAttrTunType:
			if len(val) >= 1 {
				d.tunType, tunSeen = val[0], tunSeen+1
			}
		case ipvsDestAttrTunPort:
			if len(val) == 2 {
				d.tunPort, tunSeen = binary.BigEndian.Uint16(val), tunSeen+1
			}
		case ipvsDestAttrTunFlags:
			if len(val) == 2 {
				d.tunFlags, tunSeen = ne.Uint16(val), tunSeen+1
			}
		}
	})
	if err != nil {
		return d, fmt.Errorf("destination attributes: %w", err)
	}
	if !d.sentFamily {
		d.family = uint16(svcFam)
	}
	var ip netip.Addr
	switch {
	case Family(d.family) == IPv4 && len(addr) >= 4:
		ip = netip.AddrFrom4([4]byte(addr[:4]))
	case Family(d.family) == IPv6 && len(addr) == 16:
		ip = netip.AddrFrom16([16]byte(addr))
	default:
		return d, fmt.Errorf("destination address of %d bytes in family %d", len(addr), d.family)
	}
	d.Addr = netip.AddrPortFrom(ip, d.Addr.Port())
	if have != haveAll {
		return d, fmt.Errorf("destination %s without some of its settings or counts (attributes seen: %09b of %09b)", ip, have, haveAll)
	}
	switch {
	case d.Weight < 0:
		return d, fmt.Errorf("destination %s with weight %d", ip, d.Weight)
	case tunSeen == 3:
		d.haveTun = true
	case tunSeen != 0:
		return d, fmt.Errorf("destination %s with %d of its 3 tunnel settings", ip, tunSeen)
	}
	return d, nil
}

// dumpDests reads key's destinations with a destination dump on Kernel's
// own socket, appending them to into[:0]. The caller holds k.mu. A missing
// service dumps as an empty list.
func (k *Kernel) dumpDests(key ServiceKey, into []kernelDest) ([]kernelDest, error) {
	out := into[:0]
	sock, err := k.genlSocket()
	if err != nil {
		return out, err
	}
	seq := atomic.AddUint32(&sock.Seq, 1)
	req := appendGenlMsg(k.setBuf[:0], k.family, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, ipvsCmdGetDest)
	req = append(req, serviceAttr(key).Serialize()...)
	endGenlMsg(req, 0)
	k.setBuf = req
	dr := destDump{family: k.family, svcFam: serviceFamily(key), out: out}
	if err := k.exchange(sock, req, seq, seq, dr.next); err != nil {
		return out[:0], err
	}
	if dr.err != nil {
		return out[:0], dr.err
	}
	return dr.out, nil
}

// destDump collects the messages of one destination dump. A message it
// cannot read, or a dump the kernel marks interrupted, is remembered, and
// the rest of the dump is still read to its end: a dump left half-read
// keeps the socket's dump running, and the kernel refuses the socket's next
// dump (EBUSY) until it is read out.
type destDump struct {
	family uint16 // IPVS's generic netlink id
	svcFam Family
	out    []kernelDest
	err    error // the first message not read
}

// next takes one message of the dump; it is done at the dump's end.
func (dr *destDump) next(h *unix.NlMsghdr, data []byte) (bool, error) {
	if h.Flags&unix.NLM_F_DUMP_INTR != 0 && dr.err == nil {
		dr.err = errors.New("destination dump interrupted by a change of the table")
	}
	switch {
	case h.Type == unix.NLMSG_DONE:
		// A dump that fails late ends with its error in DONE.
		if len(data) >= 4 {
			if errno, _ := ackErrno(data); errno != 0 {
				return true, errno
			}
		}
		return true, nil
	case h.Type == unix.NLMSG_ERROR:
		// A refused dump: the only message there is.
		errno, err := ackErrno(data)
		if err != nil {
			return true, err
		}
		if errno != 0 {
			return true, errno
		}
		return true, nil
	case h.Type != dr.family || dr.err != nil:
		return false, nil
	}
	d, err := parseKernelDest(data, dr.svcFam)
	if err != nil {
		dr.err = err
		return false, nil
	}
	dr.out = append(dr.out, d)
	return false, nil
}

// recvBufSize holds the largest datagram the kernel sends on a netlink
// socket: a dump's part is at most 32 KiB.
const recvBufSize = 64 << 10

// exchange sends req (one or more netlink messages) on sock and reads the
// replies into Kernel's receive buffer, handing fn each message from the
// kernel to this socket whose sequence number is in [first, last] (its
// header, and its payload, valid only during the call), until fn says it is
// done or returns an error. Other messages (late replies to an earlier
// request that timed out) are skipped. Send and receive wait at most
// genlTimeout. The caller holds k.mu.
func (k *Kernel) exchange(sock *nl.SocketHandle, req []byte, first, last uint32, fn func(h *unix.NlMsghdr, data []byte) (bool, error)) error {
	fd := sock.Socket.GetFd()
	if err := k.wait(fd, unix.POLLOUT, func() error {
		return unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	if len(k.recvBuf) < recvBufSize {
		k.recvBuf = make([]byte, recvBufSize)
	}
	for {
		var n, flags int
		var from unix.Sockaddr
		if err := k.wait(fd, unix.POLLIN, func() (err error) {
			n, _, flags, from, err = unix.Recvmsg(fd, k.recvBuf, nil, 0)
			return err
		}); err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			return fmt.Errorf("netlink receive: a reply longer than %d bytes", len(k.recvBuf))
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != nl.PidKernel {
			continue
		}
		b := k.recvBuf[:n]
		for len(b) >= unix.NLMSG_HDRLEN {
			h := (*unix.NlMsghdr)(unsafe.Pointer(&b[0]))
			if h.Len < unix.NLMSG_HDRLEN || int(h.Len) > len(b) {
				return fmt.Errorf("netlink reply: a message of %d bytes in %d", h.Len, len(b))
			}
			if h.Pid == k.genlPid && h.Seq >= first && h.Seq <= last {
				done, err := fn(h, b[unix.NLMSG_HDRLEN:h.Len])
				if err != nil || done {
					return err
				}
			}
			b = b[min(netlinkAlign(int(h.Len)), len(b)):]
		}
	}
}

// wait runs op on the non-blocking fd until it does not answer EAGAIN,
// polling for events in between; after genlTimeout in all it gives up.
func (k *Kernel) wait(fd int, events int16, op func() error) error {
	var deadline time.Time
	for {
		err := op()
		if err != unix.EAGAIN && err != unix.EINTR {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(genlTimeout)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("no answer in %v: %w", genlTimeout, unix.ETIMEDOUT)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: events}}
		if _, err := unix.Poll(pfd, int(left.Milliseconds())+1); err != nil && err != unix.EINTR {
			return err
		}
	}
}

// appendGenlMsg appends a netlink header (its length left 0, for
// endGenlMsg) and a generic netlink header for IPVS command cmd.
func appendGenlMsg(buf []byte, family, flags uint16, seq uint32, cmd uint8) []byte {
	ne := binary.NativeEndian
	buf = ne.AppendUint32(buf, 0)
	buf = ne.AppendUint16(buf, family)
	buf = ne.AppendUint16(buf, flags)
	buf = ne.AppendUint32(buf, seq)
	buf = ne.AppendUint32(buf, 0) // to the kernel
	return append(buf, cmd, ipvsGenlVersion, 0, 0)
}

// endGenlMsg sets the length of the message that starts at buf[start:].
func endGenlMsg(buf []byte, start int) {
	binary.NativeEndian.PutUint32(buf[start:], uint32(len(buf)-start))
}

// appendAttr appends one netlink attribute, padded.
func appendAttr(buf []byte, typ uint16, val ...byte) []byte {
	ne := binary.NativeEndian
	buf = ne.AppendUint16(buf, uint16(unix.SizeofNlAttr+len(val)))
	buf = ne.AppendUint16(buf, typ)
	buf = append(buf, val...)
	for len(buf)%unix.NLA_ALIGNTO != 0 {
		buf = append(buf, 0)
	}
	return buf
}

// appendU16Attr appends a u16 attribute in host order, padded.
func appendU16Attr(buf []byte, typ uint16, v uint16) []byte {
	ne := binary.NativeEndian
	buf = ne.AppendUint16(buf, unix.SizeofNlAttr+2)
	buf = ne.AppendUint16(buf, typ)
	return append(ne.AppendUint16(buf, v), 0, 0)
}

// appendU32Attr appends a u32 attribute in host order.
func appendU32Attr(buf []byte, typ uint16, v uint32) []byte {
	ne := binary.NativeEndian
	buf = ne.AppendUint16(buf, unix.SizeofNlAttr+4)
	buf = ne.AppendUint16(buf, typ)
	return ne.AppendUint32(buf, v)
}

// appendSetDest appends to buf one IPVS_CMD_SET_DEST message that writes d
// (every setting as dumped, the weight d.Weight) in the service whose
// IPVS_CMD_ATTR_SERVICE attribute is svcAttr. family is IPVS's generic
// netlink id; ack asks the kernel to acknowledge success too.
func appendSetDest(buf []byte, family uint16, seq uint32, ack bool, svcAttr []byte, d kernelDest) []byte {
	ne := binary.NativeEndian
	start := len(buf)
	flags := uint16(unix.NLM_F_REQUEST)
	if ack {
		flags |= unix.NLM_F_ACK
	}
	buf = appendGenlMsg(buf, family, flags, seq, ipvsCmdSetDest)
	buf = append(buf, svcAttr...)
	nest := len(buf)
	buf = append(buf, 0, 0, 0, 0) // IPVS_CMD_ATTR_DEST's header, set below
	if a := d.Addr.Addr(); a.Is4() {
		b := a.As4()
		buf = appendAttr(buf, ipvsDestAttrAddr, b[:]...)
	} else {
		b := a.As16()
		buf = appendAttr(buf, ipvsDestAttrAddr, b[:]...)
	}
	port := d.Addr.Port()
	buf = appendAttr(buf, ipvsDestAttrPort, byte(port>>8), byte(port))
	if d.sentFamily {
		buf = appendU16Attr(buf, ipvsDestAttrAddrFamily, d.family)
	}
	buf = appendU32Attr(buf, ipvsDestAttrFwdMethod, d.fwd)
	buf = appendU32Attr(buf, ipvsDestAttrWeight, uint32(d.Weight))
	buf = appendU32Attr(buf, ipvsDestAttrUThresh, d.upper)
	buf = appendU32Attr(buf, ipvsDestAttrLThresh, d.lower)
	if d.haveTun {
		buf = appendAttr(buf, ipvsDestAttrTunType, d.tunType)
		buf = appendAttr(buf, ipvsDestAttrTunPort, byte(d.tunPort>>8), byte(d.tunPort))
		buf = appendU16Attr(buf, ipvsDestAttrTunFlags, d.tunFlags)
	}
	ne.PutUint16(buf[nest:], uint16(len(buf)-nest))
	ne.PutUint16(buf[nest+2:], ipvsCmdAttrDest)
	endGenlMsg(buf, start)
	return buf
}

// ackErrno reads a netlink error message's payload: the errno it carries
// (0 for an acknowledgement).
func ackErrno(data []byte) (syscall.Errno, error) {
	if len(data) < 4 {
		return 0, fmt.Errorf("netlink error message of %d bytes", len(data))
	}
	return syscall.Errno(-int32(nl.NativeEndian().Uint32(data[:4]))), nil
}

// setDests writes ws, each with IPVS_CMD_SET_DEST, in the service key, up
// to setBatch in one sendmsg, and returns each write's outcome: nil, the
// kernel's errno, or, when the reply could not be read, that error for every
// write of the batch not yet answered (whether the kernel made them is then
// unknown; the next read of the table says). The caller holds k.mu.
func (k *Kernel) setDests(key ServiceKey, ws []kernelDest) []error {
	errs := make([]error, len(ws))
	sock, err := k.genlSocket()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	svcAttr := serviceAttr(key).Serialize()
	for lo := 0; lo < len(ws); lo += setBatch {
		hi := min(lo+setBatch, len(ws))
		k.sendBatch(sock, svcAttr, ws[lo:hi], errs[lo:hi])
	}
	return errs
}

// sendBatch sends ws in one sendmsg and fills errs from the replies.
func (k *Kernel) sendBatch(sock *nl.SocketHandle, svcAttr []byte, ws []kernelDest, errs []error) {
	fail := func(err error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	// Sequence numbers come from the socket's counter, which every request
	// on it takes, so a late reply to an earlier request is never read as
	// one of these.
	first := atomic.AddUint32(&sock.Seq, uint32(len(ws))) - uint32(len(ws)) + 1
	buf := k.setBuf[:0]
	for i, d := range ws {
		buf = appendSetDest(buf, k.family, first+uint32(i), i == len(ws)-1, svcAttr, d)
	}
	k.setBuf = buf
	last := first + uint32(len(ws)) - 1
	err := k.exchange(sock, buf, first, last, func(h *unix.NlMsghdr, data []byte) (bool, error) {
		if h.Type != unix.NLMSG_ERROR {
			return false, nil
		}
		i := int(h.Seq - first)
		errno, err := ackErrno(data)
		if err != nil {
			errs[i] = err
		} else if errno != 0 {
			errs[i] = errno
		}
		// Replies come in request order: a write before the last
		// without an error reply succeeded.
		return h.Seq == last, nil
	})
	if err != nil {
		fail(fmt.Errorf("weight writes: %w", err))
	}
}

// genlSocket returns Kernel's generic netlink socket in its namespace,
// opening it on first use; the caller holds k.mu.
func (k *Kernel) genlSocket() (*nl.SocketHandle, error) {
	if k.genl != nil {
		return k.genl, nil
	}
	ns := netns.None()
	if k.netns != "" {
		var err error
		if ns, err = netns.GetFromPath(k.netns); err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", k.netns, err)
		}
		defer ns.Close()
	}
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("open generic netlink socket: %w", err)
	}
	// Replies are addressed to the socket's port id, read once here
	// rather than at every request.
	pid, err := s.GetPid()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("generic netlink socket: %w", err)
	}
	k.genl, k.genlPid = &nl.SocketHandle{Socket: s}, pid
	return k.genl, nil
}

// serviceAttr is the IPVS_CMD_ATTR_SERVICE that names a canonical key in
// a request: the family and the mark, or the protocol, address and port.
func serviceAttr(key ServiceKey) *nl.RtAttr {
	a := nl.NewRtAttr(ipvsCmdAttrService, nil)
	a.AddRtAttr(ipvsSvcAttrAF, nl.Uint16Attr(uint16(serviceFamily(key))))
	if key.IsFWMark() {
		a.AddRtAttr(ipvsSvcAttrFWMark, nl.Uint32Attr(key.FWMark))
		return a
	}
	a.AddRtAttr(ipvsSvcAttrProtocol, nl.Uint16Attr(uint16(key.Protocol)))
	a.AddRtAttr(ipvsSvcAttrAddr, key.Addr.Addr().AsSlice())
	a.AddRtAttr(ipvsSvcAttrPort, nl.BEUint16Attr(key.Addr.Port()))
	return a
}
