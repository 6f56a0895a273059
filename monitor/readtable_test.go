package monitor

import (
	"bytes"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"lvs-feedback/ipvs"
)

// A destination removed and added again comes back at the end of its
// service's list, so every configured server after it moves up: each
// must still be read as itself, and a destination not in the
// configuration noted as left alone.
func TestReadTableFollowsTheTablesOrder(t *testing.T) {
	r := newRig(t)
	var buf bytes.Buffer
	m := r.monitorLogging(&buf)
	kernel := func(rep CycleReport) map[netip.AddrPort]int {
		got := map[netip.AddrPort]int{}
		for _, d := range rep.Dests {
			got[d.Key.Dest] = d.Kernel
		}
		return got
	}
	// The table holds A, B, C, X; the first cycle adopts A, B and C.
	if got, want := kernel(cycle(t, m)), map[netip.AddrPort]int{rsA: 10, rsB: 10, rsC: 10}; !maps.Equal(got, want) {
		t.Fatalf("first cycle read %v, want %v", got, want)
	}
	if !strings.Contains(buf.String(), "server="+rsX.String()) {
		t.Errorf("X, in the table but not the configuration, not noted:\n%s", buf.String())
	}
	// A leaves and comes back with weight 4: the table is B, C, X, A.
	must(t, r.table.RemoveDestination(svcKey, rsA))
	cycle(t, m)
	must(t, r.table.AddDestination(svcKey, rsA, 4))
	must(t, r.table.SetWeight(svcKey, rsC, 10, 7))
	if dests, _ := r.table.Destinations(svcKey); dests[0].Addr != rsB || dests[3].Addr != rsA {
		t.Fatalf("table order %v, want B first and A last", dests)
	}
	if got, want := kernel(cycle(t, m)), map[netip.AddrPort]int{rsA: 4, rsB: 10, rsC: 7}; !maps.Equal(got, want) {
		t.Errorf("after A came back last, the cycle read %v, want %v", got, want)
	}
}

func TestTableIndexFind(t *testing.T) {
	table := []ipvs.Destination{{Addr: rsB}, {Addr: rsC}, {Addr: rsA}}
	x := tableIndex{table: table}
	for _, tt := range []struct {
		addr netip.AddrPort
		hint int
		want int
		ok   bool
	}{
		{rsC, 1, 1, true},  // where it was
		{rsA, 0, 2, true},  // moved
		{rsA, 7, 2, true},  // hint beyond the table
		{rsA, -1, 2, true}, // no hint
		{rsX, 2, 0, false}, // not there
	} {
		got, ok := x.find(tt.addr, tt.hint)
		if got != tt.want && tt.ok || ok != tt.ok {
			t.Errorf("find(%s, hint %d) = %d, %v; want %d, %v", tt.addr, tt.hint, got, ok, tt.want, tt.ok)
		}
	}
	servers := []ServerConfig{{Addr: rsA}, {Addr: rsC}}
	if got := x.unconfigured(servers); !slices.Equal(got, []netip.AddrPort{rsB}) {
		t.Errorf("unconfigured = %v, want [%s]", got, rsB)
	}
	// Not indexed yet, two not configured: in the table's order.
	y := tableIndex{table: []ipvs.Destination{{Addr: rsX}, {Addr: rsB}, {Addr: rsA}, {Addr: rsC}}}
	if got, want := y.unconfigured(servers), []netip.AddrPort{rsX, rsB}; !slices.Equal(got, want) {
		t.Errorf("unconfigured = %v, want %v", got, want)
	}
}
