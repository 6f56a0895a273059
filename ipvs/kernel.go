//go:build linux

package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Kernel is the Linux IPVS table of one network namespace, reached over
// generic netlink: services, additions and removals through
// github.com/moby/ipvs, destination dumps and weight writes on a socket of
// its own (kernel_dests.go says why). It implements Admin.
//
// A moby/ipvs handle is not safe for concurrent use (a reply can be read by
// the wrong caller, and a caller can then wait forever), so Kernel owns one
// handle and holds a mutex around every call on it. Kernel is safe for
// concurrent use.
type Kernel struct {
	mu sync.Mutex
	h  *mobyipvs.Handle // nil once closed
	// netns is the namespace's path, "" for the caller's: the connection
	// table is read from /proc/net only in the caller's (ConnStates).
	netns string
	// family is the generic netlink family id of IPVS, and genl the socket
	// of Kernel's own reads and writes, opened on first use; nil once
	// closed.
	family  uint16
	genl    *nl.SocketHandle
	genlPid uint32 // genl's netlink port id
	// Scratch of SetWeights, reused under mu: the dump, its index by
	// address, the writes, the change each write is for, and their
	// messages.
	dumped  []kernelDest
	index   map[netip.AddrPort]int
	writes  []kernelDest
	writeOf []int
	setBuf  []byte
	// recvBuf holds one datagram from Kernel's own socket.
	recvBuf []byte
}

var _ Admin = (*Kernel)(nil)

// OpenKernel opens the IPVS table of the network namespace at netnsPath (for
// example /run/netns/NAME or /proc/PID/ns/net), or of the caller's namespace
// when netnsPath is "".
//
// It first checks that the kernel has IPVS (the generic netlink family
// "IPVS"): without it moby/ipvs would accept every write and do nothing. The
// error then wraps ErrNoIPVS. It also reads the service list once, so that a
// missing CAP_NET_ADMIN is reported here (the error wraps os.ErrPermission)
// rather than on the first write.
func OpenKernel(netnsPath string) (*Kernel, error) {
	where := "the current network namespace"
	if netnsPath != "" {
		where = "network namespace " + netnsPath
	}
	family, err := checkIPVSFamily(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("open IPVS in %s: %w", where, err)
	}
	h, err := mobyipvs.New(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("open IPVS in %s: %w", where, err)
	}
	if _, err := h.GetServices(); err != nil {
		h.Close()
		return nil, kernelErr(fmt.Sprintf("open IPVS in %s: list services", where), err)
	}
	return &Kernel{h: h, netns: netnsPath, family: family}, nil
}

// checkIPVSFamily asks the generic netlink controller of the namespace at
// path ("" = current) whether the "IPVS" family is registered, and returns
// its id.
func checkIPVSFamily(path string) (uint16, error) {
	var nh *netlink.Handle
	var err error
	if path == "" {
		// NewHandle without protocols would open a socket for every
		// netlink protocol; only the generic one is needed.
		nh, err = netlink.NewHandle(unix.NETLINK_GENERIC)
	} else {
		ns, nsErr := netns.GetFromPath(path)
		if nsErr != nil {
			return 0, nsErr
		}
		defer ns.Close()
		nh, err = netlink.NewHandleAt(ns, unix.NETLINK_GENERIC)
	}
	if err != nil {
		return 0, fmt.Errorf("open generic netlink socket: %w", err)
	}
	defer nh.Close()
	f, err := nh.GenlFamilyGet("IPVS")
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, ErrNoIPVS
		}
		return 0, fmt.Errorf("look up generic netlink family IPVS: %w", err)
	}
	return f.ID, nil
}

// Close releases the netlink socket. Calls after Close return an error.
func (k *Kernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.h != nil {
		k.h.Close()
		k.h = nil
	}
	if k.genl != nil {
		k.genl.Close()
		k.genl = nil
	}
	return nil
}

var errClosed = errors.New("ipvs: kernel table is closed")

// handle returns the open handle; the caller holds k.mu.
func (k *Kernel) handle() (*mobyipvs.Handle, error) {
	if k.h == nil {
		return nil, errClosed
	}
	return k.h, nil
}

// with runs fn on the open handle under the lock; op names the operation
// in errors.
func (k *Kernel) with(op string, fn func(h *mobyipvs.Handle) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, err := k.handle()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fn(h)
}

// canonicalPair checks and canonicalises a service and one of its
// destinations for the operation op.
func canonicalPair(op string, svc ServiceKey, dst netip.AddrPort) (ServiceKey, netip.AddrPort, error) {
	key, err := canonicalKey(svc)
	if err != nil {
		return ServiceKey{}, netip.AddrPort{}, fmt.Errorf("%s: %w", op, err)
	}
	addr, err := canonicalDest(key, dst)
	if err != nil {
		return ServiceKey{}, netip.AddrPort{}, fmt.Errorf("%s: %w", op, err)
	}
	return key, addr, nil
}

// Services lists the virtual services (in the kernel's hash order).
func (k *Kernel) Services() ([]Service, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, err := k.handle()
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	ms, err := h.GetServices()
	if err != nil {
		return nil, kernelErr("list services", err)
	}
	out := make([]Service, 0, len(ms))
	for _, m := range ms {
		key, err := keyFromMoby(m)
		if err != nil {
			return nil, fmt.Errorf("list services: %w", err)
		}
		out = append(out, Service{Key: key, Scheduler: m.SchedName})
	}
	return out, nil
}

// Destinations lists svc's real servers in the kernel's order.
func (k *Kernel) Destinations(svc ServiceKey) ([]Destination, error) {
	op := fmt.Sprintf("list destinations of %s", svc)
	key, err := canonicalKey(svc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h, err := k.handle()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	k.dumped, err = k.dumpDests(key, k.dumped)
	if err != nil {
		return nil, kernelErr(op, err)
	}
	if len(k.dumped) == 0 {
		// The kernel answers a destination dump of a missing service
		// with an empty list, not an error: ask for the service itself.
		if err := serviceExists(h, key); err != nil {
			return nil, kernelErr(op, err)
		}
	}
	out := make([]Destination, len(k.dumped))
	for i, d := range k.dumped {
		out[i] = d.Destination
	}
	return out, nil
}

// SetWeight writes dst's weight if the kernel still holds from; see Table.
// It is SetWeights with one change.
func (k *Kernel) SetWeight(svc ServiceKey, dst netip.AddrPort, from, to int) error {
	return k.SetWeights(svc, []WeightChange{{Dest: dst, From: from, To: to}})[0]
}

// SetWeights applies compare-and-set weight writes to svc's destinations;
// see Table.
//
// Under the lock it dumps the service's destinations once, compares each
// change's weight with the dump, and writes back every setting the kernel
// dumped with only the weight changed: IPVS_CMD_SET_DEST replaces
// forwarding method, thresholds and tunnel settings too, so writing a
// freshly built destination would reset them. When from == to nothing is
// written, since every destination edit restarts the scheduler's round
// (wrr). A later change of the same destination in one call compares with
// the earlier one's weight.
func (k *Kernel) SetWeights(svc ServiceKey, changes []WeightChange) []error {
	errs := make([]error, len(changes))
	if len(changes) == 0 {
		return errs
	}
	// Operation names are built only for errors: a batch of thousands of
	// successful writes should not format thousands of strings.
	op := func(c WeightChange) string { return fmt.Sprintf("set weight of %s in %s", c.Dest, svc) }
	key, keyErr := canonicalKey(svc)
	addrs := make([]netip.AddrPort, len(changes))
	pending := 0
	for i, c := range changes {
		if err := checkWeight(c.To); err != nil {
			errs[i] = fmt.Errorf("%s: %w", op(c), err)
			continue
		}
		if keyErr != nil {
			errs[i] = fmt.Errorf("%s: %w", op(c), keyErr)
			continue
		}
		a, err := canonicalDest(key, c.Dest)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", op(c), err)
			continue
		}
		addrs[i] = a
		pending++
	}
	if pending == 0 {
		return errs
	}
	// failPending gives every change still without an error the error
	// that mk builds for it.
	failPending := func(mk func(c WeightChange) error) []error {
		for i, c := range changes {
			if errs[i] == nil {
				errs[i] = mk(c)
			}
		}
		return errs
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	h, err := k.handle()
	if err != nil {
		return failPending(func(c WeightChange) error { return fmt.Errorf("%s: %w", op(c), err) })
	}
	k.dumped, err = k.dumpDests(key, k.dumped)
	if err != nil {
		return failPending(func(c WeightChange) error { return kernelErr(op(c), err) })
	}
	if k.index == nil {
		k.index = make(map[netip.AddrPort]int, len(k.dumped))
	}
	clear(k.index)
	for i, d := range k.dumped {
		k.index[d.Addr] = i
	}
	// The kernel dumps a missing service as an empty list; whether the
	// service exists is asked once, for the first destination not found.
	var svcErr error
	svcChecked := false
	writes := k.writes[:0]
	writeOf := k.writeOf[:0]
	for i, c := range changes {
		if errs[i] != nil {
			continue
		}
		j, ok := k.index[addrs[i]]
		if !ok {
			if !svcChecked {
				svcErr, svcChecked = serviceExists(h, key), true
			}
			if svcErr != nil {
				errs[i] = kernelErr(op(c), svcErr)
			} else {
				errs[i] = fmt.Errorf("%s: destination not in the kernel table: %w", op(c), ErrNotFound)
			}
			continue
		}
		cur := &k.dumped[j]
		if cur.Weight != c.From {
			errs[i] = fmt.Errorf("%s: kernel holds weight %d, not %d: %w", op(c), cur.Weight, c.From, ErrWeightChanged)
			continue
		}
		if c.From == c.To {
			continue
		}
		cur.Weight = c.To
		writes = append(writes, *cur)
		writeOf = append(writeOf, i)
	}
	k.writes, k.writeOf = writes, writeOf
	if len(writes) == 0 {
		return errs
	}
	for w, err := range k.setDests(key, writes) {
		if err != nil {
			i := writeOf[w]
			errs[i] = kernelErr(op(changes[i]), err)
		}
	}
	return errs
}

// AddService adds an empty virtual service with the named scheduler
// ("wrr", "wlc", ...); the kernel loads the scheduler module on demand and
// refuses unknown names. Persistence, timeout and flags are left at zero.
func (k *Kernel) AddService(svc ServiceKey, scheduler string) error {
	op := fmt.Sprintf("add service %s", svc)
	key, err := canonicalKey(svc)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if scheduler == "" {
		return fmt.Errorf("%s: no scheduler given", op)
	}
	ms := mobyService(key)
	ms.SchedName = scheduler
	return k.with(op, func(h *mobyipvs.Handle) error {
		if err := h.NewService(ms); err != nil {
			if errors.Is(err, unix.ENOENT) {
				// For a new service ENOENT means the scheduler, not the
				// service, is missing.
				return fmt.Errorf("%s: the kernel has no scheduler %q (module ip_vs_%s): %w", op, scheduler, scheduler, err)
			}
			return kernelErr(op, err)
		}
		return nil
	})
}

// RemoveService removes a service and its destinations.
func (k *Kernel) RemoveService(svc ServiceKey) error {
	op := fmt.Sprintf("remove service %s", svc)
	key, err := canonicalKey(svc)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return k.with(op, func(h *mobyipvs.Handle) error {
		return kernelErr(op, h.DelService(mobyService(key)))
	})
}

// AddDestination adds a real server with the given weight, forwarded by
// masquerading (NAT, IP_VS_CONN_F_MASQ), the kernel's and ipvsadm's default,
// without connection thresholds. A real server that needs direct routing or
// tunnelling is configured with ipvsadm or keepalived; SetWeight keeps
// whatever method it has.
func (k *Kernel) AddDestination(svc ServiceKey, dst netip.AddrPort, weight int) error {
	op := fmt.Sprintf("add destination %s to %s", dst, svc)
	if err := checkWeight(weight); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	key, addr, err := canonicalPair(op, svc, dst)
	if err != nil {
		return err
	}
	md := mobyDest(addr)
	md.Weight = weight
	md.ConnectionFlags = mobyipvs.ConnFwdMasq
	return k.with(op, func(h *mobyipvs.Handle) error {
		return kernelErr(op, h.NewDestination(mobyService(key), md))
	})
}

// RemoveDestination removes a real server from a service.
func (k *Kernel) RemoveDestination(svc ServiceKey, dst netip.AddrPort) error {
	op := fmt.Sprintf("remove destination %s from %s", dst, svc)
	key, addr, err := canonicalPair(op, svc, dst)
	if err != nil {
		return err
	}
	return k.with(op, func(h *mobyipvs.Handle) error {
		return kernelErr(op, h.DelDestination(mobyService(key), mobyDest(addr)))
	})
}

// serviceExists asks the kernel for one service; a missing one is ESRCH.
func serviceExists(h *mobyipvs.Handle, key ServiceKey) error {
	_, err := h.GetService(mobyService(key))
	return err
}

// kernelErr turns a moby/ipvs error (bare errno values) into one that wraps
// this package's sentinel errors and the errno, with op as context. nil
// stays nil.
func kernelErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch errno {
	case unix.ESRCH:
		return fmt.Errorf("%s: service not in the kernel table: %w (%w)", op, ErrNotFound, errno)
	case unix.ENOENT:
		return fmt.Errorf("%s: destination not in the kernel table: %w (%w)", op, ErrNotFound, errno)
	case unix.EEXIST:
		return fmt.Errorf("%s: %w (%w)", op, ErrExist, errno)
	case unix.ERANGE:
		return fmt.Errorf("%s: kernel refused the value: %w (%w)", op, ErrWeightRange, errno)
	case unix.EPERM:
		return fmt.Errorf("%s: %w: IPVS needs CAP_NET_ADMIN (run as root or grant the capability)", op, errno)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// mobyService builds the moby/ipvs service that identifies key (canonical).
func mobyService(key ServiceKey) *mobyipvs.Service {
	fam := serviceFamily(key)
	s := &mobyipvs.Service{AddressFamily: uint16(fam)}
	// The kernel wants a netmask on new services: all ones for IPv4, a
	// prefix length 1..128 for IPv6 (ipvsadm's defaults).
	if fam == IPv6 {
		s.Netmask = 128
	} else {
		s.Netmask = 0xFFFFFFFF
	}
	if key.IsFWMark() {
		s.FWMark = key.FWMark
		return s
	}
	s.Protocol = uint16(key.Protocol)
	s.Address = net.IP(key.Addr.Addr().AsSlice())
	s.Port = key.Addr.Port()
	return s
}

// mobyDest builds the moby/ipvs destination for a canonical address.
func mobyDest(a netip.AddrPort) *mobyipvs.Destination {
	return &mobyipvs.Destination{
		Address:       net.IP(a.Addr().AsSlice()),
		Port:          a.Port(),
		AddressFamily: uint16(familyOf(a.Addr())),
	}
}

// keyFromMoby converts a service read from the kernel. Its Flags (which
// include 0x2, "hashed") are not part of the key.
func keyFromMoby(m *mobyipvs.Service) (ServiceKey, error) {
	if m.FWMark != 0 {
		return ServiceKey{FWMark: m.FWMark, Family: Family(m.AddressFamily)}, nil
	}
	ap, ok := addrPortFromMoby(m.Address, m.Port)
	if !ok {
		return ServiceKey{}, fmt.Errorf("kernel service with unreadable address %v (family %d)", m.Address, m.AddressFamily)
	}
	return ServiceKey{Protocol: Protocol(m.Protocol), Addr: ap}, nil
}

// addrPortFromMoby converts a net.IP (4 or 16 bytes) to a canonical
// netip.AddrPort, IPv4 as a 4-byte address.
func addrPortFromMoby(ip net.IP, port uint16) (netip.AddrPort, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), port), true
}
