package ipvs

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
)

// runConformance runs the behaviour every Admin must share against fresh
// tables from newTable (one per subtest). Mem and Kernel both run it.
func runConformance(t *testing.T, newTable func(t *testing.T) Admin) {
	var (
		tcp4   = mustKey(t, "192.0.2.10:80/tcp")
		udp4   = mustKey(t, "192.0.2.10:53/udp")
		tcp6   = mustKey(t, "[2001:db8::10]:443/tcp")
		mark4  = mustKey(t, "fwmark:7")
		mark6  = mustKey(t, "fwmark:8/inet6")
		real1  = netip.MustParseAddrPort("10.1.0.1:8080")
		real2  = netip.MustParseAddrPort("10.1.0.2:8080")
		real3  = netip.MustParseAddrPort("10.1.0.3:8080")
		real4  = netip.MustParseAddrPort("10.1.0.4:8080")
		real6  = netip.MustParseAddrPort("[2001:db8:1::1]:8443")
		noSuch = netip.MustParseAddrPort("10.1.0.99:8080")
	)

	// withDests returns a table holding tcp4 with real1..real3 at weights
	// 10, 20, 30.
	withDests := func(t *testing.T) Admin {
		tb := newTable(t)
		must(t, tb.AddService(tcp4, "wrr"))
		must(t, tb.AddDestination(tcp4, real1, 10))
		must(t, tb.AddDestination(tcp4, real2, 20))
		must(t, tb.AddDestination(tcp4, real3, 30))
		return tb
	}

	t.Run("AddListServices", func(t *testing.T) {
		tb := newTable(t)
		if got := services(t, tb); len(got) != 0 {
			t.Fatalf("fresh table lists %v", got)
		}
		want := map[ServiceKey]string{tcp4: "wrr", udp4: "rr", tcp6: "wlc", mark4: "wrr", mark6: "wlc"}
		for _, k := range []ServiceKey{tcp4, udp4, tcp6, mark4, mark6} {
			must(t, tb.AddService(k, want[k]))
		}
		got := services(t, tb)
		if len(got) != len(want) {
			t.Fatalf("Services = %v, want %d services", got, len(want))
		}
		for _, s := range got {
			if sched, ok := want[s.Key]; !ok || sched != s.Scheduler {
				t.Errorf("Services lists %v (%s); want one of %v", s.Key, s.Scheduler, want)
			}
		}
		// Keys read back parse and print the same way.
		for _, s := range got {
			if k, err := ParseServiceKey(s.Key.String()); err != nil || k != s.Key {
				t.Errorf("read-back key %#v does not round-trip through String: %v, %v", s.Key, k, err)
			}
		}
	})

	t.Run("AddServiceTwice", func(t *testing.T) {
		tb := newTable(t)
		must(t, tb.AddService(tcp4, "wrr"))
		err := tb.AddService(tcp4, "wlc")
		if !errors.Is(err, ErrExist) {
			t.Fatalf("second AddService: %v, want ErrExist", err)
		}
		// Same address and port, other protocol: another service.
		must(t, tb.AddService(ServiceKey{Protocol: UDP, Addr: tcp4.Addr}, "wrr"))
	})

	t.Run("IPv4MappedKeyIsTheIPv4Service", func(t *testing.T) {
		tb := newTable(t)
		must(t, tb.AddService(tcp4, "wrr"))
		mapped := ServiceKey{Protocol: TCP, Addr: netip.AddrPortFrom(netip.AddrFrom16(tcp4.Addr.Addr().As16()), 80)}
		must(t, tb.AddDestination(mapped, real1, 5))
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 5})
	})

	t.Run("DestinationsListedWithWeights", func(t *testing.T) {
		tb := withDests(t)
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real2: 20, real3: 30})
		for _, d := range destinations(t, tb, tcp4) {
			if d.ActiveConns != 0 || d.InactiveConns != 0 || d.Connections != 0 {
				t.Errorf("new destination %v has connections: %+v", d.Addr, d)
			}
		}
	})

	t.Run("DestinationsOfEveryServiceKind", func(t *testing.T) {
		tb := newTable(t)
		must(t, tb.AddService(udp4, "rr"))
		must(t, tb.AddService(tcp6, "wlc"))
		must(t, tb.AddService(mark4, "wrr"))
		must(t, tb.AddDestination(udp4, netip.MustParseAddrPort("10.1.0.1:53"), 3))
		must(t, tb.AddDestination(tcp6, real6, 4))
		must(t, tb.AddDestination(mark4, real1, 5))
		checkWeights(t, tb, udp4, map[netip.AddrPort]int{netip.MustParseAddrPort("10.1.0.1:53"): 3})
		checkWeights(t, tb, tcp6, map[netip.AddrPort]int{real6: 4})
		checkWeights(t, tb, mark4, map[netip.AddrPort]int{real1: 5})
		must(t, tb.SetWeight(tcp6, real6, 4, 40))
		must(t, tb.SetWeight(mark4, real1, 5, 50))
		checkWeights(t, tb, tcp6, map[netip.AddrPort]int{real6: 40})
		checkWeights(t, tb, mark4, map[netip.AddrPort]int{real1: 50})
	})

	t.Run("EmptyServiceHasNoDestinations", func(t *testing.T) {
		tb := newTable(t)
		must(t, tb.AddService(tcp4, "wrr"))
		ds, err := tb.Destinations(tcp4)
		if err != nil || len(ds) != 0 {
			t.Fatalf("Destinations of an empty service = %v, %v; want none, nil", ds, err)
		}
	})

	t.Run("AddDestinationTwice", func(t *testing.T) {
		tb := withDests(t)
		if err := tb.AddDestination(tcp4, real1, 99); !errors.Is(err, ErrExist) {
			t.Fatalf("duplicate AddDestination: %v, want ErrExist", err)
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real2: 20, real3: 30})
	})

	t.Run("AddDestinationWeightRange", func(t *testing.T) {
		tb := newTable(t)
		must(t, tb.AddService(tcp4, "wrr"))
		for _, w := range []int{-1, MaxWeight + 1} {
			if err := tb.AddDestination(tcp4, real1, w); !errors.Is(err, ErrWeightRange) {
				t.Errorf("AddDestination weight %d: %v, want ErrWeightRange", w, err)
			}
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{})
		must(t, tb.AddDestination(tcp4, real1, 0))
		must(t, tb.AddDestination(tcp4, real2, MaxWeight))
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 0, real2: MaxWeight})
	})

	t.Run("AddDestinationFamilyMismatch", func(t *testing.T) {
		tb := newTable(t)
		must(t, tb.AddService(tcp4, "wrr"))
		must(t, tb.AddService(tcp6, "wrr"))
		if err := tb.AddDestination(tcp4, real6, 1); err == nil {
			t.Error("IPv6 destination accepted in an IPv4 service")
		}
		if err := tb.AddDestination(tcp6, real1, 1); err == nil {
			t.Error("IPv4 destination accepted in an IPv6 service")
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{})
		checkWeights(t, tb, tcp6, map[netip.AddrPort]int{})
	})

	t.Run("SetWeight", func(t *testing.T) {
		tb := withDests(t)
		must(t, tb.SetWeight(tcp4, real2, 20, 25))
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real2: 25, real3: 30})
		// Same value: a no-op that succeeds.
		must(t, tb.SetWeight(tcp4, real2, 25, 25))
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real2: 25, real3: 30})
	})

	t.Run("SetWeightBounds", func(t *testing.T) {
		tb := withDests(t)
		must(t, tb.SetWeight(tcp4, real1, 10, 0))
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 0, real2: 20, real3: 30})
		must(t, tb.SetWeight(tcp4, real1, 0, MaxWeight))
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: MaxWeight, real2: 20, real3: 30})
		for _, w := range []int{MaxWeight + 1, -1, 1 << 31} {
			err := tb.SetWeight(tcp4, real1, MaxWeight, w)
			if !errors.Is(err, ErrWeightRange) {
				t.Errorf("SetWeight to %d: %v, want ErrWeightRange", w, err)
			}
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: MaxWeight, real2: 20, real3: 30})
	})

	t.Run("SetWeightConflict", func(t *testing.T) {
		tb := withDests(t)
		// Someone else set real2 to 7 after we read 20.
		must(t, tb.SetWeight(tcp4, real2, 20, 7))
		err := tb.SetWeight(tcp4, real2, 20, 40)
		if !errors.Is(err, ErrWeightChanged) {
			t.Fatalf("SetWeight with stale from: %v, want ErrWeightChanged", err)
		}
		if !strings.Contains(err.Error(), "7") {
			t.Errorf("conflict error %q does not name the current weight 7", err)
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real2: 7, real3: 30})
	})

	t.Run("SetWeightConcurrentWritersOneWins", func(t *testing.T) {
		tb := withDests(t)
		const writers = 8
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() { errs[i] = tb.SetWeight(tcp4, real1, 10, 100+i) })
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if won >= 0 {
					t.Fatalf("writers %d and %d both won the same compare-and-set", won, i)
				}
				won = i
			case !errors.Is(err, ErrWeightChanged):
				t.Fatalf("writer %d: %v, want nil or ErrWeightChanged", i, err)
			}
		}
		if won < 0 {
			t.Fatal("no writer won")
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 100 + won, real2: 20, real3: 30})
	})

	t.Run("ConcurrentReadersAndWriters", func(t *testing.T) {
		// Many goroutines share one table: reads never fail, and every
		// write either lands or reports the weight it lost to.
		tb := withDests(t)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 6 {
			wg.Go(func() {
				for i := range 50 {
					if _, err := tb.Services(); err != nil {
						errs <- err
						return
					}
					ds, err := tb.Destinations(tcp4)
					if err != nil {
						errs <- err
						return
					}
					d := ds[(g+i)%len(ds)]
					err = tb.SetWeight(tcp4, d.Addr, d.Weight, 1+(d.Weight+g)%100)
					if err != nil && !errors.Is(err, ErrWeightChanged) {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if ds := destinations(t, tb, tcp4); len(ds) != 3 {
			t.Errorf("destinations after the storm: %v", ds)
		}
	})

	t.Run("DestinationRemovedBetweenReadAndWrite", func(t *testing.T) {
		tb := withDests(t)
		ds := destinations(t, tb, tcp4)
		must(t, tb.RemoveDestination(tcp4, real2))
		var read Destination
		for _, d := range ds {
			if d.Addr == real2 {
				read = d
			}
		}
		err := tb.SetWeight(tcp4, real2, read.Weight, read.Weight+1)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("SetWeight of a removed destination: %v, want ErrNotFound", err)
		}
		if err := tb.SetWeight(tcp4, noSuch, 0, 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetWeight of an unknown destination: %v, want ErrNotFound", err)
		}
		if err := tb.RemoveDestination(tcp4, real2); !errors.Is(err, ErrNotFound) {
			t.Errorf("second RemoveDestination: %v, want ErrNotFound", err)
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real3: 30})
	})

	t.Run("ServiceRemoved", func(t *testing.T) {
		tb := withDests(t)
		must(t, tb.AddService(udp4, "rr"))
		must(t, tb.RemoveService(tcp4))
		if ds, err := tb.Destinations(tcp4); !errors.Is(err, ErrNotFound) {
			t.Errorf("Destinations of a removed service = %v, %v; want ErrNotFound", ds, err)
		}
		if err := tb.SetWeight(tcp4, real1, 10, 11); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetWeight in a removed service: %v, want ErrNotFound", err)
		}
		if err := tb.AddDestination(tcp4, real1, 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("AddDestination to a removed service: %v, want ErrNotFound", err)
		}
		if err := tb.RemoveDestination(tcp4, real1); !errors.Is(err, ErrNotFound) {
			t.Errorf("RemoveDestination from a removed service: %v, want ErrNotFound", err)
		}
		if err := tb.RemoveService(tcp4); !errors.Is(err, ErrNotFound) {
			t.Errorf("second RemoveService: %v, want ErrNotFound", err)
		}
		if got := services(t, tb); len(got) != 1 || got[0].Key != udp4 {
			t.Errorf("Services after removal = %v, want only %v", got, udp4)
		}
		// Re-adding the service starts it empty.
		must(t, tb.AddService(tcp4, "wrr"))
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{})
	})

	t.Run("SetWeightKeepsOtherAttributes", func(t *testing.T) {
		tb := withDests(t)
		before := destinations(t, tb, tcp4)
		must(t, tb.SetWeight(tcp4, real2, 20, 21))
		after := destinations(t, tb, tcp4)
		if len(after) != len(before) {
			t.Fatalf("destinations before %v, after %v", before, after)
		}
		for _, b := range before {
			i := slices.IndexFunc(after, func(a Destination) bool { return a.Addr == b.Addr })
			if i < 0 {
				t.Fatalf("destination %v vanished", b.Addr)
			}
			want := b
			if b.Addr == real2 {
				want.Weight = 21
			}
			if after[i] != want {
				t.Errorf("after SetWeight: %+v, want %+v", after[i], want)
			}
		}
	})

	t.Run("SetWeightsMixedBatch", func(t *testing.T) {
		tb := withDests(t)
		must(t, tb.AddDestination(tcp4, real4, 40))
		// real2 vanishes after the caller read it at 20.
		must(t, tb.RemoveDestination(tcp4, real2))
		changes := []WeightChange{
			{Dest: real1, From: 10, To: 15},            // written
			{Dest: real2, From: 20, To: 25},            // vanished
			{Dest: real3, From: 99, To: 31},            // changed by someone else
			{Dest: real3, From: 30, To: MaxWeight + 1}, // out of range
			{Dest: real3, From: 30, To: -1},            // out of range
			{Dest: real4, From: 40, To: 40},            // nothing to write
			{Dest: noSuch, From: 0, To: 1},             // never there
			{Dest: real6, From: 0, To: 1},              // wrong family
			{Dest: real4, From: 40, To: 0},             // written, to the bound
			{Dest: real1, From: 15, To: 16},            // sees the first write
			{Dest: real1, From: 10, To: 17},            // stale after the first write
		}
		errs := tb.SetWeights(tcp4, changes)
		if len(errs) != len(changes) {
			t.Fatalf("SetWeights returned %d errors for %d changes", len(errs), len(changes))
		}
		want := []error{nil, ErrNotFound, ErrWeightChanged, ErrWeightRange, ErrWeightRange, nil, ErrNotFound, errAny, nil, nil, ErrWeightChanged}
		for i, err := range errs {
			checkChangeErr(t, i, changes[i], err, want[i])
		}
		if err := errs[2]; err != nil && !strings.Contains(err.Error(), "30") {
			t.Errorf("conflict error %q does not name the current weight 30", err)
		}
		if err := errs[10]; err != nil && !strings.Contains(err.Error(), "16") {
			t.Errorf("conflict error %q does not name the weight 16 written earlier in the batch", err)
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 16, real3: 30, real4: 0})
	})

	t.Run("SetWeightsAllWritten", func(t *testing.T) {
		tb := withDests(t)
		errs := tb.SetWeights(tcp4, []WeightChange{{real3, 30, 3}, {real1, 10, 1}, {real2, 20, 2}})
		for i, err := range errs {
			if err != nil {
				t.Errorf("change %d: %v", i, err)
			}
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 1, real2: 2, real3: 3})
	})

	t.Run("SetWeightsMissingService", func(t *testing.T) {
		tb := withDests(t)
		must(t, tb.AddService(udp4, "rr"))
		must(t, tb.RemoveService(udp4))
		for _, svc := range []ServiceKey{udp4, tcp6} { // removed; never added
			changes := []WeightChange{{real1, 10, 11}, {real2, 0, 0}, {real3, 30, -1}}
			if svc == tcp6 {
				changes = []WeightChange{{real6, 10, 11}, {real6, 0, 0}, {real6, 30, -1}}
			}
			errs := tb.SetWeights(svc, changes)
			if len(errs) != len(changes) {
				t.Fatalf("%v: SetWeights returned %d errors for %d changes", svc, len(errs), len(changes))
			}
			for i, w := range []error{ErrNotFound, ErrNotFound, ErrWeightRange} {
				checkChangeErr(t, i, changes[i], errs[i], w)
			}
		}
		errs := tb.SetWeights(ServiceKey{Protocol: TCP}, []WeightChange{{real1, 10, 11}})
		if len(errs) != 1 || errs[0] == nil || errors.Is(errs[0], ErrNotFound) {
			t.Errorf("SetWeights with an invalid service key = %v, want an invalid-key error", errs)
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real2: 20, real3: 30})
	})

	t.Run("SetWeightsEmptyBatch", func(t *testing.T) {
		tb := withDests(t)
		for _, changes := range [][]WeightChange{nil, {}} {
			if errs := tb.SetWeights(tcp4, changes); len(errs) != 0 {
				t.Errorf("SetWeights(%#v) = %v, want no errors", changes, errs)
			}
			if errs := tb.SetWeights(udp4, changes); len(errs) != 0 { // no such service: nothing to report
				t.Errorf("SetWeights(missing service, %#v) = %v, want no errors", changes, errs)
			}
		}
		checkWeights(t, tb, tcp4, map[netip.AddrPort]int{real1: 10, real2: 20, real3: 30})
	})

	t.Run("SetWeightsConcurrentBatchesOneWinsEach", func(t *testing.T) {
		tb := withDests(t)
		const writers = 6
		errs := make([][]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				errs[i] = tb.SetWeights(tcp4, []WeightChange{{real1, 10, 100 + i}, {real2, 20, 200 + i}, {real3, 30, 300 + i}})
			})
		}
		wg.Wait()
		want := map[netip.AddrPort]int{}
		for d, dst := range []netip.AddrPort{real1, real2, real3} {
			won := -1
			for i := range writers {
				switch err := errs[i][d]; {
				case err == nil:
					if won >= 0 {
						t.Fatalf("%v: writers %d and %d both won the same compare-and-set", dst, won, i)
					}
					won = i
				case !errors.Is(err, ErrWeightChanged):
					t.Fatalf("writer %d, %v: %v, want nil or ErrWeightChanged", i, dst, err)
				}
			}
			if won < 0 {
				t.Fatalf("%v: no writer won", dst)
			}
			want[dst] = 100*(d+1) + won
		}
		checkWeights(t, tb, tcp4, want)
	})

	t.Run("InvalidKeysRefused", func(t *testing.T) {
		tb := newTable(t)
		bad := []ServiceKey{
			{},                                       // nothing
			{Protocol: TCP},                          // no address
			{Addr: tcp4.Addr},                        // no protocol
			{FWMark: 1},                              // no family
			{FWMark: 1, Family: IPv4, Protocol: TCP}, // mark and protocol
			{Protocol: TCP, Addr: tcp4.Addr, Family: IPv6}, // family mismatch
		}
		for _, k := range bad {
			if err := tb.AddService(k, "wrr"); err == nil {
				t.Errorf("AddService(%#v) accepted", k)
			}
		}
		if got := services(t, tb); len(got) != 0 {
			t.Errorf("table holds %v after refused adds", got)
		}
		if err := tb.AddService(tcp4, ""); err == nil {
			t.Error("AddService without a scheduler accepted")
		}
	})

	// Without traffic no destination has a persistence template: every
	// real server of every kind of service is listed with 0, and a
	// missing service is ErrNotFound.
	t.Run("PersistenceWithoutTraffic", func(t *testing.T) {
		tb := newTable(t)
		tr, ok := tb.(TemplateReader)
		if !ok {
			t.Fatalf("%T does not count persistence templates", tb)
		}
		dests := map[ServiceKey][]netip.AddrPort{
			tcp4: {real1, real2}, udp4: {real3}, tcp6: {real6}, mark4: {real4}, mark6: {real6}, mustKey(t, "192.0.2.11:80/tcp"): nil,
		}
		for k, ds := range dests {
			must(t, tb.AddService(k, "wrr"))
			for _, d := range ds {
				must(t, tb.AddDestination(k, d, 1))
			}
		}
		for k, ds := range dests {
			p, err := tr.Persistence(k)
			got := p.Templates
			if err != nil {
				t.Fatalf("Persistence(%v): %v", k, err)
			}
			if p.Timeout != 0 {
				t.Errorf("Persistence(%v).Timeout = %v for a service added without persistence", k, p.Timeout)
			}
			if len(got) != len(ds) {
				t.Errorf("Persistence(%v).Templates = %v, want %d destinations", k, got, len(ds))
			}
			for _, d := range ds {
				if n, ok := got[d]; !ok || n != 0 {
					t.Errorf("Persistence(%v).Templates[%v] = %d, %v; want 0, listed", k, d, n, ok)
				}
			}
		}
		if _, err := tr.Persistence(mustKey(t, "192.0.2.99:80/tcp")); !errors.Is(err, ErrNotFound) {
			t.Errorf("PersistConns of a missing service: %v, want ErrNotFound", err)
		}
	})
}

// TestConnectionDelta checks the wrapping arithmetic of the kernel's 32-bit
// connection counter.
func TestConnectionDelta(t *testing.T) {
	for _, c := range []struct{ prev, cur, want uint32 }{
		{0, 0, 0},
		{5, 12, 7},
		{0xFFFFFFF0, 0x10, 0x20},
		{0xFFFFFFFF, 0, 1},
		{1, 0, 0xFFFFFFFF}, // a full turn minus one, never negative
	} {
		if got := ConnectionDelta(c.prev, c.cur); got != c.want {
			t.Errorf("ConnectionDelta(%#x, %#x) = %#x, want %#x", c.prev, c.cur, got, c.want)
		}
	}
}

// errAny stands for "some error, no particular sentinel" in checkChangeErr.
var errAny = errors.New("any error")

// checkChangeErr checks the error of change i of a SetWeights batch: nil
// when want is nil, else an error wrapping want (any error for errAny) that
// names the destination.
func checkChangeErr(t *testing.T, i int, c WeightChange, err, want error) {
	t.Helper()
	switch {
	case want == nil:
		if err != nil {
			t.Errorf("change %d %+v: %v, want nil", i, c, err)
		}
	case err == nil:
		t.Errorf("change %d %+v: nil, want %v", i, c, want)
	case want != errAny && !errors.Is(err, want):
		t.Errorf("change %d %+v: %v, want %v", i, c, err, want)
	case !strings.Contains(err.Error(), c.Dest.String()):
		t.Errorf("change %d: error %q does not name the destination %v", i, err, c.Dest)
	}
}

func mustKey(t *testing.T, s string) ServiceKey {
	t.Helper()
	k, err := ParseServiceKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func services(t *testing.T, tb Table) []Service {
	t.Helper()
	s, err := tb.Services()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func destinations(t *testing.T, tb Table, k ServiceKey) []Destination {
	t.Helper()
	d, err := tb.Destinations(k)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkWeights compares k's destinations, in any order, with want.
func checkWeights(t *testing.T, tb Table, k ServiceKey, want map[netip.AddrPort]int) {
	t.Helper()
	got := map[netip.AddrPort]int{}
	for _, d := range destinations(t, tb, k) {
		if _, dup := got[d.Addr]; dup {
			t.Errorf("%v listed twice in %v", d.Addr, k)
		}
		got[d.Addr] = d.Weight
	}
	if !maps.Equal(got, want) {
		t.Errorf("%v destinations = %v, want %v", k, got, want)
	}
}
