//go:build linux

package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	mobyipvs "github.com/moby/ipvs"
)

var _ ConnReader = (*Kernel)(nil)

// connTable is where the kernel lists the connections of the caller's
// network namespace.
const connTable = "/proc/net/ip_vs_conn"

// errConnsOtherNetns: /proc/net is the caller's namespace, not the table's.
var errConnsOtherNetns = errors.New("ipvs: the connection table is read only in the monitor's own network namespace")

// ConnStates reads the kernel's connection table (/proc/net/ip_vs_conn:
// there is no netlink dump of it) and the TCP timeouts, and counts the
// entries of the destinations in want. The kernel walks its whole table
// for it: callers read it rarely.
func (k *Kernel) ConnStates(want map[netip.AddrPort]struct{}) (map[ConnKey]ConnCounts, error) {
	if k.netns != "" {
		return nil, fmt.Errorf("read connection table: %w", errConnsOtherNetns)
	}
	var t ConnTimeouts
	err := k.with("read TCP timeouts", func(h *mobyipvs.Handle) error {
		c, err := h.GetConfig()
		if err != nil {
			return kernelErr("read TCP timeouts", err)
		}
		t = ConnTimeouts{TCP: c.TimeoutTCP, TCPFin: c.TimeoutTCPFin}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f, err := os.Open(connTable)
	if err != nil {
		return nil, fmt.Errorf("read connection table: %w", err)
	}
	defer f.Close()
	return ParseConns(f, t, want)
}
