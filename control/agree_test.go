package control_test

import (
	"testing"

	"lvs-feedback/control"
	"lvs-feedback/control/api"
	"lvs-feedback/policy"
)

// Package api may not import the daemon, so it spells out some of the
// daemon's names and grammar itself; these tests hold the copies to the
// originals.

// TestOwnershipAgrees: the server sends string(policy.Ownership) in the
// Ownership fields; clients compare it with the api constants.
func TestOwnershipAgrees(t *testing.T) {
	for _, c := range []struct {
		api string
		mon policy.Ownership
	}{
		{api.OwnershipManaged, policy.Managed},
		{api.OwnershipDrained, policy.DrainedByOperator},
		{api.OwnershipDown, policy.Down},
	} {
		if c.api != string(c.mon) {
			t.Errorf("api has %q, monitor %q", c.api, c.mon)
		}
	}
}

// targets are service and server strings, good and bad, for
// TestCheckTargetAgrees and the seeds of FuzzCheckTargetAgrees.
var targets = [][2]string{
	{"192.0.2.10:80/tcp", "198.51.100.11:80"},
	{" 192.0.2.10:80/udp ", " 198.51.100.11 "},
	{"192.0.2.10:80/sctp", "[198.51.100.11]"},
	{"[2001:db8::1]:443/tcp", "[2001:db8::2]:443"},
	{"[2001:db8::1]:443/tcp", "2001:db8::2"},
	{"[::ffff:192.0.2.10]:80/tcp", "[::ffff:198.51.100.11]:80"},
	{"fwmark:7", "198.51.100.11:80"},
	{"fwmark:7/inet6", "[2001:db8::2]:80"},
	{"fwmark:4294967295/inet", "198.51.100.11"},
	{"fwmark:0", "198.51.100.11:80"},
	{"fwmark:4294967296", "198.51.100.11:80"},
	{"fwmark:-1", "198.51.100.11:80"},
	{"fwmark:7/ipx", "198.51.100.11:80"},
	{"fwmark:", "198.51.100.11:80"},
	{"192.0.2.10:80/icmp", "198.51.100.11:80"},
	{"192.0.2.10:80", "198.51.100.11:80"},
	{"192.0.2.10/tcp", "198.51.100.11:80"},
	{"192.0.2.10:99999/tcp", "198.51.100.11:80"},
	{"2001:db8::1:443/tcp", "198.51.100.11:80"},
	{"", ""},
	{"192.0.2.10:80/tcp", "nonsense"},
	{"192.0.2.10:80/tcp", "198.51.100.11:80:80"},
	{"192.0.2.10:80/tcp", ""},
	{"192.0.2.10:80/TCP", "198.51.100.11:80"},
}

// checkAgrees fails when api.CheckTarget, which lvsctl uses, and
// control.ParseTarget, which the server uses, disagree about a target.
func checkAgrees(t *testing.T, service, server string) {
	t.Helper()
	_, _, want := control.ParseTarget(service, server)
	got := api.CheckTarget(service, server)
	switch {
	case (got == nil) != (want == nil):
		t.Errorf("%q %q: api.CheckTarget says %v, control.ParseTarget %v", service, server, got, want)
	case got != nil && got.Error() != want.Error():
		t.Errorf("%q %q: api.CheckTarget says %q, control.ParseTarget %q", service, server, got, want)
	}
}

func TestCheckTargetAgrees(t *testing.T) {
	for _, tt := range targets {
		checkAgrees(t, tt[0], tt[1])
	}
}

func FuzzCheckTargetAgrees(f *testing.F) {
	for _, tt := range targets {
		f.Add(tt[0], tt[1])
	}
	f.Fuzz(checkAgrees)
}
