package api

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// CheckTarget says whether service and server are well-formed as the
// daemon reads them — service "VIP:PORT/PROTO" (tcp, udp, sctp; IPv6 in
// brackets) or "fwmark:N" (optionally "/inet" or "/inet6"), server
// "RIP:PORT" or a bare RIP — so that a client can refuse a typo before it
// asks. nil does not mean the daemon manages that server.
//
// The daemon parses with ipvs.ParseServiceKey and control.ParseTarget,
// which this package may not import; a test in package control checks that
// the two accept the same strings with the same messages.
func CheckTarget(service, server string) error {
	if err := checkService(strings.TrimSpace(service)); err != nil {
		return err
	}
	server = strings.TrimSpace(server)
	if _, err := netip.ParseAddrPort(server); err == nil {
		return nil
	}
	if _, err := netip.ParseAddr(strings.Trim(server, "[]")); err != nil {
		return fmt.Errorf("server %q: want RIP:PORT as in ipvsadm -L -n", server)
	}
	return nil
}

func checkService(s string) error {
	if rest, ok := strings.CutPrefix(s, "fwmark:"); ok {
		markText, famText, hasFam := strings.Cut(rest, "/")
		mark, err := strconv.ParseUint(markText, 10, 32)
		if err != nil || mark == 0 {
			return fmt.Errorf("service %q: firewall mark must be a whole number from 1 to 4294967295", s)
		}
		if hasFam && famText != "inet" && famText != "inet6" {
			return fmt.Errorf("service %q: address family must be inet or inet6", s)
		}
		return nil
	}
	addrText, protoText, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf("service %q: want ADDRESS:PORT/PROTOCOL (e.g. 192.0.2.10:80/tcp) or fwmark:N", s)
	}
	if _, err := netip.ParseAddrPort(addrText); err != nil {
		return fmt.Errorf("service %q: %w", s, err)
	}
	switch protoText {
	case "tcp", "udp", "sctp":
		return nil
	}
	return fmt.Errorf("service %q: protocol must be tcp, udp or sctp", s)
}
