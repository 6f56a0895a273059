// Package ipvs owns every conversation with the Linux IPVS table.
//
// It offers one narrow interface, Table, with two implementations: Kernel,
// which talks to the kernel over generic netlink (through github.com/moby/ipvs
// and, for destination reads and weight writes, on a socket of its own),
// and Mem, an in-memory table for unit tests, the demo and the simulator.
// Both behave the same way and are exercised by the same tests (the
// conformance suite; the kernel run needs LVS_KERNEL_TEST=1 and a VM, see
// docs/developer/ipvs.md). Kernel is Linux-only.
//
// The package must not decide weights, hold policy, or know about agents: it
// reads services and destinations and writes destinations' weights. An
// optional ConnReader (both implementations) counts the kernel's connection
// table's entries per destination, and an optional TemplateReader (both)
// its persistence templates.
package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// MaxWeight is the largest weight this package writes. The kernel stores a
// signed 32-bit weight, but ipvsadm takes at most 65535 and
// github.com/moby/ipvs reads a weight back through a 16-bit field, so larger
// values are refused.
const MaxWeight = 65535

// Errors returned by Table implementations. Callers test them with errors.Is.
var (
	// ErrNotFound means the service or destination is not (or no longer) in
	// the table. A destination removed by another tool between a read and a
	// write is a normal event, not a failure of the daemon.
	ErrNotFound = errors.New("ipvs: service or destination not found")
	// ErrWeightChanged means a compare-and-set weight write found another
	// weight than the one it expected: someone else changed it.
	ErrWeightChanged = errors.New("ipvs: weight changed by another writer")
	// ErrWeightRange means a weight outside 0..MaxWeight was asked for.
	ErrWeightRange = errors.New("ipvs: weight out of range 0..65535")
	// ErrExist means a service or destination being added is already in the
	// table (the kernel's EEXIST).
	ErrExist = errors.New("ipvs: service or destination already exists")
	// ErrNoIPVS means the kernel has no IPVS support loaded.
	ErrNoIPVS = errors.New("ipvs: the kernel has no IPVS (generic netlink family \"IPVS\" missing); load it with 'modprobe ip_vs'")
)

// Protocol is a virtual service's transport protocol (IPPROTO_* numbers).
type Protocol uint16

// Protocols IPVS balances.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return "proto" + strconv.Itoa(int(p))
}

// Family is an address family of a firewall-mark service.
type Family uint16

// Address families (AF_INET, AF_INET6).
const (
	IPv4 Family = 2
	IPv6 Family = 10
)

func (f Family) String() string {
	switch f {
	case IPv4:
		return "inet"
	case IPv6:
		return "inet6"
	}
	return "af" + strconv.Itoa(int(f))
}

// ServiceKey identifies a virtual service: either an address, port and
// protocol, or a firewall mark with an address family. It is comparable and
// usable as a map key.
type ServiceKey struct {
	Protocol Protocol       // zero for a firewall-mark service
	Addr     netip.AddrPort // zero for a firewall-mark service
	FWMark   uint32         // non-zero for a firewall-mark service
	Family   Family         // address family of a firewall-mark service
}

// IsFWMark reports whether k names a firewall-mark service.
func (k ServiceKey) IsFWMark() bool { return k.FWMark != 0 }

// String formats k the way ParseServiceKey reads it:
// "10.0.0.1:80/tcp", "[2001:db8::1]:443/tcp", "fwmark:7/inet".
func (k ServiceKey) String() string {
	if k.IsFWMark() {
		return fmt.Sprintf("fwmark:%d/%s", k.FWMark, k.Family)
	}
	return k.Addr.String() + "/" + k.Protocol.String()
}

// ParseServiceKey reads "ADDR:PORT/PROTO" (PROTO one of tcp, udp, sctp;
// IPv6 addresses in brackets) or "fwmark:N" with an optional "/inet" or
// "/inet6" (default inet).
func ParseServiceKey(s string) (ServiceKey, error) {
	if rest, ok := strings.CutPrefix(s, "fwmark:"); ok {
		markText, famText, hasFam := strings.Cut(rest, "/")
		mark, err := strconv.ParseUint(markText, 10, 32)
		if err != nil || mark == 0 {
			return ServiceKey{}, fmt.Errorf("service %q: firewall mark must be a whole number from 1 to 4294967295", s)
		}
		k := ServiceKey{FWMark: uint32(mark), Family: IPv4}
		if hasFam {
			switch famText {
			case "inet":
			case "inet6":
				k.Family = IPv6
			default:
				return ServiceKey{}, fmt.Errorf("service %q: address family must be inet or inet6", s)
			}
		}
		return k, nil
	}
	addrText, protoText, ok := strings.Cut(s, "/")
	if !ok {
		return ServiceKey{}, fmt.Errorf("service %q: want ADDRESS:PORT/PROTOCOL (e.g. 192.0.2.10:80/tcp) or fwmark:N", s)
	}
	ap, err := netip.ParseAddrPort(addrText)
	if err != nil {
		return ServiceKey{}, fmt.Errorf("service %q: %w", s, err)
	}
	k := ServiceKey{Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
	switch protoText {
	case "tcp":
		k.Protocol = TCP
	case "udp":
		k.Protocol = UDP
	case "sctp":
		k.Protocol = SCTP
	default:
		return ServiceKey{}, fmt.Errorf("service %q: protocol must be tcp, udp or sctp", s)
	}
	return k, nil
}

// Service is a virtual service as read from the table.
type Service struct {
	Key       ServiceKey
	Scheduler string // "wrr", "wlc", ...
}

// Destination is a real server of a service as read from the table.
type Destination struct {
	Addr          netip.AddrPort
	Weight        int
	ActiveConns   int
	InactiveConns int
	// Connections is the kernel's cumulative count of connections scheduled
	// to this destination. It is 32 bits wide and wraps; use ConnectionDelta.
	// The kernel refreshes it on its 2-second rate estimator.
	Connections uint32
}

// ConnectionDelta returns how many connections were counted between two
// readings of a wrapping 32-bit counter (modular arithmetic).
func ConnectionDelta(prev, cur uint32) uint32 { return cur - prev }

// Table is what the monitor needs from an IPVS table. Implementations are
// safe for concurrent use.
type Table interface {
	// Services lists the virtual services. The order is the
	// implementation's (the kernel's is its hash order); do not rely on it.
	Services() ([]Service, error)
	// Destinations lists one service's real servers, in no promised order
	// (the kernel lists the newest first). A missing service returns an
	// error wrapping ErrNotFound.
	Destinations(svc ServiceKey) ([]Destination, error)
	// SetWeight writes one destination's weight if, and only if, the table
	// still holds the weight from: a compare-and-set, so a weight changed by
	// another tool since the caller read it is never overwritten. It returns
	// an error wrapping ErrWeightChanged in that case, ErrNotFound when the
	// service or destination is gone, ErrWeightRange for to outside
	// 0..MaxWeight. Every other attribute of the destination is kept.
	// When to equals from nothing is written.
	SetWeight(svc ServiceKey, dst netip.AddrPort, from, to int) error
	// SetWeights applies changes to one service's destinations, each a
	// compare-and-set exactly as SetWeight (ErrWeightChanged, ErrNotFound,
	// ErrWeightRange, from == to writes nothing), reading the service's
	// destinations once for all of them. It returns one error per change,
	// in order (nil: written or nothing to write). Changes apply in order,
	// so a destination named twice sees the first change's weight.
	SetWeights(svc ServiceKey, changes []WeightChange) []error
}

// TemplateReader is implemented by tables that count each destination's
// persistence templates (Kernel, Mem). A persistent service (ipvsadm -p)
// keeps a template per client (per client network with a persistence
// netmask) that sends the client's new connections to the same real
// server, even one of weight 0, until the template expires: a drained
// server is empty only when its templates are gone too.
type TemplateReader interface {
	// Persistence reads svc's persistence timeout and how many
	// persistence templates point at each of its real servers. A missing
	// service returns an error wrapping ErrNotFound.
	Persistence(svc ServiceKey) (Persistence, error)
}

// Persistence is a service's persistence as the kernel holds it.
type Persistence struct {
	// Timeout is the service's persistence timeout (ipvsadm -p), 0 for a
	// service that is not persistent. The kernel sets a template's timer
	// to it whenever a new connection uses the template, and sets it
	// again when it runs out while the template still has connections.
	Timeout time.Duration
	// Templates is how many templates point at each real server (the
	// kernel's IPVS_DEST_ATTR_PERSIST_CONNS, the PersistConn column of
	// ipvsadm -L --persistent-conn): every real server, 0 for one without.
	Templates map[netip.AddrPort]int
}

// WeightChange is one compare-and-set weight write of a service's destination.
type WeightChange struct {
	Dest     netip.AddrPort
	From, To int
}

// Admin adds and removes services and destinations. lvs-monitor never uses
// it; tests, the demo and the simulator build tables with it.
type Admin interface {
	Table
	AddService(svc ServiceKey, scheduler string) error
	RemoveService(svc ServiceKey) error
	AddDestination(svc ServiceKey, dst netip.AddrPort, weight int) error
	RemoveDestination(svc ServiceKey, dst netip.AddrPort) error
}
