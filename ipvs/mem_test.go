package ipvs

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestMemConformance(t *testing.T) {
	runConformance(t, func(*testing.T) Admin { return NewMem() })
}

func TestMemInsertionOrder(t *testing.T) {
	m := NewMem()
	keys := []ServiceKey{mustKey(t, "192.0.2.3:80/tcp"), mustKey(t, "fwmark:1"), mustKey(t, "192.0.2.1:80/tcp"), mustKey(t, "192.0.2.2:80/tcp")}
	for _, k := range keys {
		must(t, m.AddService(k, "wrr"))
	}
	must(t, m.RemoveService(keys[1]))
	must(t, m.AddService(keys[1], "wrr"))
	want := []ServiceKey{keys[0], keys[2], keys[3], keys[1]}
	for i, s := range services(t, m) {
		if s.Key != want[i] {
			t.Errorf("service %d = %v, want %v", i, s.Key, want[i])
		}
	}
	addrs := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.9:80"), netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.0.5:80")}
	for i, a := range addrs {
		must(t, m.AddDestination(keys[0], a, i+1))
	}
	for i, d := range destinations(t, m, keys[0]) {
		if d.Addr != addrs[i] {
			t.Errorf("destination %d = %v, want %v", i, d.Addr, addrs[i])
		}
	}
}

func TestMemCounters(t *testing.T) {
	m := NewMem()
	svc := mustKey(t, "192.0.2.1:80/tcp")
	dst := netip.MustParseAddrPort("10.0.0.1:80")
	must(t, m.AddService(svc, "wlc"))
	must(t, m.AddDestination(svc, dst, 100))

	read := func() Destination {
		t.Helper()
		ds := destinations(t, m, svc)
		if len(ds) != 1 {
			t.Fatalf("destinations = %v", ds)
		}
		return ds[0]
	}
	must(t, m.AddConnections(svc, dst, 0xFFFFFFF0))
	prev := read().Connections
	must(t, m.AddConnections(svc, dst, 0x1F))
	must(t, m.RecordConnection(svc, dst))
	cur := read().Connections
	if cur != 0x10 || ConnectionDelta(prev, cur) != 0x20 {
		t.Errorf("counter %#x -> %#x (delta %#x), want 0x10 and delta 0x20", prev, cur, ConnectionDelta(prev, cur))
	}

	must(t, m.SetActive(svc, dst, 7, 3))
	if d := read(); d.ActiveConns != 7 || d.InactiveConns != 3 {
		t.Errorf("after SetActive: %+v", d)
	}
	if err := m.SetActive(svc, dst, -1, 0); err == nil {
		t.Error("negative active count accepted")
	}

	// SetWeight keeps the counters and gauges.
	must(t, m.SetWeight(svc, dst, 100, 50))
	if d := read(); d != (Destination{Addr: dst, Weight: 50, ActiveConns: 7, InactiveConns: 3, Connections: 0x10}) {
		t.Errorf("after SetWeight: %+v", d)
	}
	if w, err := m.Weight(svc, dst); err != nil || w != 50 {
		t.Errorf("Weight = %d, %v; want 50", w, err)
	}

	other := netip.MustParseAddrPort("10.0.0.2:80")
	for name, err := range map[string]error{
		"RecordConnection": m.RecordConnection(svc, other),
		"AddConnections":   m.AddConnections(svc, other, 1),
		"SetActive":        m.SetActive(svc, other, 1, 1),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s on an unknown destination: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := m.Weight(mustKey(t, "192.0.2.9:80/tcp"), dst); !errors.Is(err, ErrNotFound) {
		t.Errorf("Weight in an unknown service: %v, want ErrNotFound", err)
	}
}

// TestMemPersistConns: SetPersistTimeout and SetPersistConns set what
// Persistence reads, per destination and service; a removed destination takes its count with it;
// a negative count or a missing destination is refused.
func TestMemPersistConns(t *testing.T) {
	m := NewMem()
	a, b := mustKey(t, "192.0.2.1:80/tcp"), mustKey(t, "192.0.2.2:80/tcp")
	r1, r2 := netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("10.0.0.2:80")
	for _, k := range []ServiceKey{a, b} {
		must(t, m.AddService(k, "wrr"))
		must(t, m.AddDestination(k, r1, 1))
		must(t, m.AddDestination(k, r2, 1))
	}
	must(t, m.SetPersistTimeout(a, 360*time.Second))
	must(t, m.SetPersistConns(a, r1, 3))
	must(t, m.SetPersistConns(b, r2, 7))
	check := func(k ServiceKey, want map[netip.AddrPort]int) {
		t.Helper()
		p, err := m.Persistence(k)
		if err != nil {
			t.Fatal(err)
		}
		if k == a && p.Timeout != 360*time.Second || k == b && p.Timeout != 0 {
			t.Errorf("Persistence(%v).Timeout = %v", k, p.Timeout)
		}
		got := p.Templates
		if len(got) != len(want) {
			t.Errorf("Persistence(%v).Templates = %v, want %v", k, got, want)
		}
		for d, n := range want {
			if got[d] != n {
				t.Errorf("Persistence(%v).Templates[%v] = %d, want %d", k, d, got[d], n)
			}
		}
	}
	check(a, map[netip.AddrPort]int{r1: 3, r2: 0})
	check(b, map[netip.AddrPort]int{r1: 0, r2: 7})
	must(t, m.SetPersistConns(a, r1, 0))
	check(a, map[netip.AddrPort]int{r1: 0, r2: 0})
	must(t, m.SetPersistConns(b, r2, 2))
	must(t, m.RemoveDestination(b, r2))
	must(t, m.AddDestination(b, r2, 1))
	check(b, map[netip.AddrPort]int{r1: 0, r2: 0})
	if err := m.SetPersistConns(a, r1, -1); err == nil {
		t.Error("a negative count was accepted")
	}
	if err := m.SetPersistConns(a, netip.MustParseAddrPort("10.0.0.9:80"), 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing destination: %v, want ErrNotFound", err)
	}
}
