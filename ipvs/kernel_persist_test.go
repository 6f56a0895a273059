//go:build linux

package ipvs

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink/nl"
)

// destMsg builds one message of a destination dump as the kernel sends
// it: the generic netlink header, then IPVS_CMD_ATTR_DEST holding attrs.
func destMsg(attrs map[int][]byte) []byte {
	d := nl.NewRtAttr(ipvsCmdAttrDest, nil)
	for _, typ := range []int{ipvsDestAttrAddr, ipvsDestAttrPort, 3, ipvsDestAttrPersistConns, ipvsDestAttrAddrFamily} {
		if v, ok := attrs[typ]; ok {
			d.AddRtAttr(typ, v)
		}
	}
	hdr := &nl.Genlmsg{Command: ipvsCmdGetDest, Version: ipvsGenlVersion}
	return append(hdr.Serialize(), d.Serialize()...)
}

// TestParsePersistConns reads the destination and its template count out
// of dump messages built by hand: IPv4 and IPv6 addresses in the kernel's
// 16-byte field, the family taken from the service when the kernel does
// not send the destination's, and every message missing what the count
// needs refused rather than read as 0 templates.
func TestParsePersistConns(t *testing.T) {
	v4 := append([]byte{10, 1, 0, 7}, make([]byte, 12)...)
	v6 := netip.MustParseAddr("2001:db8:1::9").AsSlice()
	port := nl.BEUint16Attr(8080)
	fam4, fam6 := nl.Uint16Attr(uint16(IPv4)), nl.Uint16Attr(uint16(IPv6))
	cases := []struct {
		name   string
		attrs  map[int][]byte
		svcFam Family
		want   netip.AddrPort
		n      int
		err    string
	}{
		{"ipv4", map[int][]byte{1: v4, 2: port, 3: nl.Uint32Attr(0), 9: nl.Uint32Attr(42), 11: fam4}, IPv4, netip.MustParseAddrPort("10.1.0.7:8080"), 42, ""},
		{"ipv4 none", map[int][]byte{1: v4, 2: port, 9: nl.Uint32Attr(0), 11: fam4}, IPv4, netip.MustParseAddrPort("10.1.0.7:8080"), 0, ""},
		{"ipv6", map[int][]byte{1: v6, 2: port, 9: nl.Uint32Attr(70000), 11: fam6}, IPv6, netip.MustParseAddrPort("[2001:db8:1::9]:8080"), 70000, ""},
		{"family from service", map[int][]byte{1: v4, 2: port, 9: nl.Uint32Attr(5)}, IPv4, netip.MustParseAddrPort("10.1.0.7:8080"), 5, ""},
		{"ipv4 destination of an ipv6 fwmark service", map[int][]byte{1: v4, 2: port, 9: nl.Uint32Attr(1), 11: fam4}, IPv6, netip.MustParseAddrPort("10.1.0.7:8080"), 1, ""},
		{"no count", map[int][]byte{1: v4, 2: port, 11: fam4}, IPv4, netip.AddrPort{}, 0, "persistent connection count"},
		{"short count", map[int][]byte{1: v4, 2: port, 9: nl.Uint16Attr(1), 11: fam4}, IPv4, netip.AddrPort{}, 0, "persistent connection count"},
		{"no port", map[int][]byte{1: v4, 9: nl.Uint32Attr(1), 11: fam4}, IPv4, netip.AddrPort{}, 0, "port"},
		{"no address", map[int][]byte{2: port, 9: nl.Uint32Attr(1), 11: fam4}, IPv4, netip.AddrPort{}, 0, "address of 0 bytes"},
		{"short ipv6 address", map[int][]byte{1: v4[:4], 2: port, 9: nl.Uint32Attr(1), 11: fam6}, IPv6, netip.AddrPort{}, 0, "address of 4 bytes"},
	}
	for _, c := range cases {
		a, n, err := parsePersistConns(destMsg(c.attrs), c.svcFam)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %v, %d, %v; want an error about %q", c.name, a, n, err, c.err)
			}
			continue
		}
		if err != nil || a != c.want || n != c.n {
			t.Errorf("%s: got %v, %d, %v; want %v, %d", c.name, a, n, err, c.want, c.n)
		}
	}
	if _, _, err := parsePersistConns([]byte{1, 2}, IPv4); err == nil {
		t.Error("a 2-byte message was read")
	}
	hdr := &nl.Genlmsg{Command: ipvsCmdGetDest, Version: ipvsGenlVersion}
	if _, _, err := parsePersistConns(hdr.Serialize(), IPv4); err == nil {
		t.Error("a message without IPVS_CMD_ATTR_DEST was read")
	}
}
