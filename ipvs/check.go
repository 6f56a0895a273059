package ipvs

import (
	"fmt"
	"net/netip"
)

// This file holds the argument checks both implementations share, so that
// Mem and Kernel refuse the same inputs with the same errors.

// canonicalKey checks k and returns its canonical form: IPv4-mapped IPv6
// addresses unmapped, Family cleared for address services. Keys read back by
// Services are always canonical.
func canonicalKey(k ServiceKey) (ServiceKey, error) {
	if k.IsFWMark() {
		if k.Addr.IsValid() || k.Protocol != 0 {
			return ServiceKey{}, fmt.Errorf("service %s: a firewall-mark service has no address or protocol", k)
		}
		if k.Family != IPv4 && k.Family != IPv6 {
			return ServiceKey{}, fmt.Errorf("service %s: firewall-mark service needs family inet or inet6", k)
		}
		return k, nil
	}
	if !k.Addr.IsValid() {
		return ServiceKey{}, fmt.Errorf("service %s: no address and no firewall mark", k)
	}
	switch k.Protocol {
	case TCP, UDP, SCTP:
	default:
		return ServiceKey{}, fmt.Errorf("service %s: protocol must be tcp, udp or sctp", k)
	}
	addr, err := canonicalAddr(k.Addr)
	if err != nil {
		return ServiceKey{}, fmt.Errorf("service %s: %w", k, err)
	}
	if k.Family != 0 && k.Family != familyOf(addr.Addr()) {
		return ServiceKey{}, fmt.Errorf("service %s: family %s does not match the address", k, k.Family)
	}
	return ServiceKey{Protocol: k.Protocol, Addr: addr}, nil
}

// canonicalAddr unmaps IPv4-mapped IPv6 addresses and refuses zones, which
// the kernel table cannot hold.
func canonicalAddr(ap netip.AddrPort) (netip.AddrPort, error) {
	if !ap.IsValid() {
		return netip.AddrPort{}, fmt.Errorf("invalid address %q", ap)
	}
	if ap.Addr().Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("address %s: IPVS addresses carry no zone", ap)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// familyOf returns the address family of a canonical (unmapped) address.
func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// serviceFamily returns the address family of a canonical key.
func serviceFamily(k ServiceKey) Family {
	if k.IsFWMark() {
		return k.Family
	}
	return familyOf(k.Addr.Addr())
}

// canonicalDest checks a destination address against its (canonical)
// service: a masqueraded destination has the service's address family.
func canonicalDest(k ServiceKey, dst netip.AddrPort) (netip.AddrPort, error) {
	d, err := canonicalAddr(dst)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("destination: %w", err)
	}
	if familyOf(d.Addr()) != serviceFamily(k) {
		return netip.AddrPort{}, fmt.Errorf("destination %s: address family differs from service %s", d, k)
	}
	return d, nil
}

// checkWeight refuses weights outside 0..MaxWeight.
func checkWeight(w int) error {
	if w < 0 || w > MaxWeight {
		return fmt.Errorf("weight %d: %w", w, ErrWeightRange)
	}
	return nil
}
