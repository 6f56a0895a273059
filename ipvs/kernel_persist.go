//go:build linux

package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The kernel reports a destination's persistence templates in the
// IPVS_DEST_ATTR_PERSIST_CONNS attribute of its destination dump; moby/ipvs
// reads past it. Kernel asks for that dump itself, on a generic netlink
// socket of its own, and reads only the attributes below (numbers from
// linux/ip_vs.h).
const (
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
	ipvsDestAttrPersistConns = 9  // u32
	ipvsDestAttrAddrFamily   = 11 // u16; absent before Linux 4.4: the service's family
)

// nlaTypeMask clears an attribute type's nested and byte-order flags.
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// genlTimeout bounds one send and one receive on Kernel's own socket, so
// that a lost reply is an error and not a wait forever.
var genlTimeout = unix.Timeval{Sec: 10}

var _ TemplateReader = (*Kernel)(nil)

// svcFlagPersistent is IP_VS_SVC_F_PERSISTENT: the service is persistent
// and its timeout is the persistence timeout.
const svcFlagPersistent = 0x1

// Persistence reads svc's persistence timeout (through moby/ipvs) and its
// destinations' template counts (a destination dump of Kernel's own); see
// TemplateReader.
func (k *Kernel) Persistence(svc ServiceKey) (Persistence, error) {
	op := fmt.Sprintf("read persistence of %s", svc)
	key, err := canonicalKey(svc)
	if err != nil {
		return Persistence{}, fmt.Errorf("%s: %w", op, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h, err := k.handle()
	if err != nil {
		return Persistence{}, fmt.Errorf("%s: %w", op, err)
	}
	ms, err := h.GetService(mobyService(key))
	if err != nil {
		return Persistence{}, kernelErr(op, err)
	}
	out := Persistence{Templates: map[netip.AddrPort]int{}}
	if ms.Flags&svcFlagPersistent != 0 {
		out.Timeout = time.Duration(ms.Timeout) * time.Second
	}
	sock, err := k.genlSocket()
	if err != nil {
		return Persistence{}, fmt.Errorf("%s: %w", op, err)
	}
	req := nl.NewNetlinkRequest(int(k.family), unix.NLM_F_DUMP)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_GENERIC: sock}
	req.AddData(&nl.Genlmsg{Command: ipvsCmdGetDest, Version: ipvsGenlVersion})
	req.AddData(serviceAttr(key))
	var parseErr error
	err = req.ExecuteIter(unix.NETLINK_GENERIC, k.family, func(msg []byte) bool {
		a, n, err := parsePersistConns(msg, serviceFamily(key))
		if err != nil {
			parseErr = err
			return false
		}
		out.Templates[a] = n
		return true
	})
	if err != nil {
		return Persistence{}, kernelErr(op, err)
	}
	if parseErr != nil {
		return Persistence{}, fmt.Errorf("%s: %w", op, parseErr)
	}
	return out, nil
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
	if err := s.SetSendTimeout(&genlTimeout); err != nil {
		s.Close()
		return nil, fmt.Errorf("generic netlink socket: %w", err)
	}
	if err := s.SetReceiveTimeout(&genlTimeout); err != nil {
		s.Close()
		return nil, fmt.Errorf("generic netlink socket: %w", err)
	}
	k.genl = &nl.SocketHandle{Socket: s}
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

// parsePersistConns reads one message of a destination dump (its generic
// netlink header and attributes): the destination's address and its
// persistence templates. svcFam is the service's family, for a kernel
// that does not say the destination's. A message without the address, the
// port or the count is an error: the kernel always sends them, so a
// missing one is not read as zero templates.
func parsePersistConns(msg []byte, svcFam Family) (netip.AddrPort, int, error) {
	if len(msg) < nl.SizeofGenlmsg {
		return netip.AddrPort{}, 0, fmt.Errorf("destination message of %d bytes", len(msg))
	}
	top, err := nl.ParseRouteAttr(msg[nl.SizeofGenlmsg:])
	if err != nil {
		return netip.AddrPort{}, 0, fmt.Errorf("destination message: %w", err)
	}
	for _, t := range top {
		if t.Attr.Type&nlaTypeMask != ipvsCmdAttrDest {
			continue
		}
		attrs, err := nl.ParseRouteAttr(t.Value)
		if err != nil {
			return netip.AddrPort{}, 0, fmt.Errorf("destination attributes: %w", err)
		}
		var addr []byte
		var port, fam uint16
		havePort, persist := false, -1
		for _, a := range attrs {
			switch a.Attr.Type & nlaTypeMask {
			case ipvsDestAttrAddr:
				addr = a.Value
			case ipvsDestAttrPort:
				if len(a.Value) == 2 {
					port, havePort = binary.BigEndian.Uint16(a.Value), true
				}
			case ipvsDestAttrAddrFamily:
				if len(a.Value) == 2 {
					fam = nl.NativeEndian().Uint16(a.Value)
				}
			case ipvsDestAttrPersistConns:
				if len(a.Value) == 4 {
					persist = int(nl.NativeEndian().Uint32(a.Value))
				}
			}
		}
		if fam == 0 {
			fam = uint16(svcFam)
		}
		var ip netip.Addr
		switch {
		case Family(fam) == IPv4 && len(addr) >= 4:
			ip = netip.AddrFrom4([4]byte(addr[:4]))
		case Family(fam) == IPv6 && len(addr) == 16:
			ip = netip.AddrFrom16([16]byte(addr))
		default:
			return netip.AddrPort{}, 0, fmt.Errorf("destination address of %d bytes in family %d", len(addr), fam)
		}
		if !havePort || persist < 0 {
			return netip.AddrPort{}, 0, fmt.Errorf("destination %s without its port or its persistent connection count", ip)
		}
		return netip.AddrPortFrom(ip, port), persist, nil
	}
	return netip.AddrPort{}, 0, fmt.Errorf("destination message without IPVS_CMD_ATTR_DEST")
}
