package scheduler

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"lvs-feedback/scheduler/fleet/etcdtest"
)

// feed adds new connections to d's table every 50 ms until the test ends:
// per tick, perTick[i] to server i of rsA, rsB, rsC.
func feed(t *testing.T, d *fleetMember, perTick [3]uint32) {
	t.Helper()
	var stop atomic.Bool
	done := make(chan struct{})
	t.Cleanup(func() { stop.Store(true); <-done })
	go func() {
		defer close(done)
		for !stop.Load() {
			for i, rs := range []netip.AddrPort{rsA, rsB, rsC} {
				_ = d.table.AddConnections(svcKey, rs, perTick[i])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

// forge writes, every 200 ms until stop, a counters record for id claiming
// a million new connections to rsA per write (and, with lease, under that
// lease): what any client able to write under the prefix could do.
func forge(t *testing.T, cli *clientv3.Client, id string, lease clientv3.LeaseID, stop *atomic.Bool) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { stop.Store(true); <-done })
	go func() {
		defer close(done)
		var opts []clientv3.OpOption
		if lease != 0 {
			opts = append(opts, clientv3.WithLease(lease))
		}
		total := uint64(0)
		for i := 1; !stop.Load(); i++ {
			total += 1_000_000
			v := fmt.Sprintf("lvs-feedback-counters 1 %s 1 %d\ns %s\nd %s %d 1000000 0 0\n", id, i, svcKey, rsA, total)
			_, _ = cli.Put(context.Background(), "/fleet-test/directors/"+id, v, opts...)
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

// TestFleetFakeCounters: records claiming a million new connections per
// write to one server — under an id the configuration does not list, under
// a listed id without a lease, and under a listed id with a lease of the
// forger's own — change no weight: the first two are untrusted, the third
// implausible (over 10 × the leader's and the honest director's figures).
func TestFleetFakeCounters(t *testing.T) {
	c := etcdtest.Start(t, 1)
	d1, d2 := newFleetMember(t, "dir1", c.Members[0]), newFleetMember(t, "dir2", c.Members[0])
	for _, d := range []*fleetMember{d1, d2} {
		d.capacity = true
		for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
			d.agents.set(agentOf(rs), 0.5)
		}
		feed(t, d, [3]uint32{20, 20, 20})
	}
	d1.start(t, false)
	eventually(t, 60*time.Second, "dir1 leads", func() bool { return d1.fleet().Leader })
	d2.start(t, false)
	d1.waitCycles(t, 6)
	cli := c.Client(t)
	lease, err := cli.Grant(context.Background(), 60)
	must(t, err)
	var stop atomic.Bool
	forge(t, cli, "evil", 0, &stop)        // not listed
	forge(t, cli, "dir4", 0, &stop)        // listed, no lease
	forge(t, cli, "dir3", lease.ID, &stop) // listed, leased: implausible
	maxW := 0
	for range 14 {
		d1.waitCycles(t, 1)
		for _, d := range []*fleetMember{d1, d2} {
			for _, w := range d.weights(t) {
				maxW = max(maxW, w)
			}
		}
	}
	stop.Store(true)
	t.Logf("under attack for 14 leader cycles: largest weight in either table %d; dir1 %v, dir2 %v; leader's status %+v",
		maxW, d1.weights(t), d2.weights(t), d1.fleet())
	if maxW != 10 {
		t.Errorf("a weight reached %d under forged counters; want every server kept at 10 (all three equal)", maxW)
	}
	f := d1.fleet()
	// Per leader cycle: two untrusted records, one implausible server.
	if f.CountersRefused < 14*3 {
		t.Errorf("the leader refused %d records/figures in 14 cycles; want at least 42", f.CountersRefused)
	}
	if got := d1.m.Status().Sync.Fleet.CountersRefused; got != f.CountersRefused {
		t.Errorf("status %d, fleet status %d", got, f.CountersRefused)
	}
}

// TestFleetWeightRange: the leader writes no weight of its own above the
// configured range (weight.min 1 to weight.scale 10 × default 10 = 100),
// though its capacity controller asks for twice that for a server serving
// 20 times the others' connections on the same CPU; a follower refuses a
// document — even one that names the elected leader and its term — with
// weight 65,535 of lvs-monitor's, a default weight of 0, or a drained
// server at a non-zero weight, shows why in its status and holds its table.
func TestFleetWeightRange(t *testing.T) {
	c := etcdtest.Start(t, 1)
	d1, d2 := newFleetMember(t, "dir1", c.Members[0]), newFleetMember(t, "dir2", c.Members[0])
	d1.capacity, d2.capacity = true, true
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		d1.agents.set(agentOf(rs), 0.5)
		d2.agents.set(agentOf(rs), 0.5)
	}
	feed(t, d1, [3]uint32{40, 2, 2})
	d1.start(t, false)
	eventually(t, 60*time.Second, "dir1 leads", func() bool { return d1.fleet().Leader })
	d2.start(t, false)
	maxA := 0
	eventually(t, 120*time.Second, "A at the top of the range in both tables", func() bool {
		maxA = max(maxA, d1.weights(t)[rsA], d2.weights(t)[rsA])
		return d1.weights(t)[rsA] == 100 && d2.weights(t)[rsA] == 100
	})
	d1.waitCycles(t, 4)
	maxA = max(maxA, d1.weights(t)[rsA])
	if maxA != 100 {
		t.Fatalf("A's weight reached %d; want at most 100", maxA)
	}
	var capW int
	for _, s := range d1.m.Status().LastCycle.Dests {
		if c := s.Decision.Trace.Capacity; s.Key.Dest == rsA && c != nil {
			capW = c.Weight
		}
	}
	t.Logf("the capacity controller's weight for A: %d; written: 100", capW)
	if capW <= 100 {
		t.Errorf("the controller asked for %d: the test does not exercise the bound", capW)
	}

	// Documents a follower refuses, each under the leader's own name and
	// term (as a client with write access to the prefix could forge).
	cli := c.Client(t)
	term := d1.store.Status().Term
	head := fmt.Sprintf("lvs-feedback-state 1 dir1 %d 1\ns %s\n", term, svcKey)
	held := d2.weights(t)
	for _, bad := range []struct{ line, why string }{
		{fmt.Sprintf("d %s managed 65535 10 0 0 0 lvs-monitor 65535 1 0 0", rsB), "weight 65535 outside the configured range 1–100"},
		{fmt.Sprintf("d %s managed 10 0 0 0 0 lvs-monitor 10 1 0 0", rsB), "default weight 0"},
		{fmt.Sprintf("d %s drained 7 10 0 0 0 operator 0 0 0 0", rsB), "drained with weight 7"},
	} {
		before := d2.fleet().DocumentsRefused
		// The leader replaces the document every cycle: write it until the
		// follower has read it.
		eventually(t, 60*time.Second, "dir2 refuses: "+bad.why, func() bool {
			_, err := cli.Put(context.Background(), "/fleet-test/state", head+bad.line+"\n")
			must(t, err)
			time.Sleep(100 * time.Millisecond)
			f := d2.fleet()
			return f.DocumentsRefused > before && strings.Contains(f.Refused, bad.why)
		})
		if w := d2.weights(t); w[rsB] != held[rsB] {
			t.Fatalf("dir2 applied a refused document (%s): %v, held %v", bad.why, w, held)
		}
	}
	eventually(t, 60*time.Second, "dir2 applies the leader's documents again", func() bool {
		f := d2.fleet()
		return f.Refused == "" && f.DocRevision == d1.fleet().DocRevision
	})
}

// TestFleetForgedTerm: a document whose term is MaxInt64 is refused by a
// follower (it is not the elected leader's term), which says so in its
// status and metrics and goes on applying the real leader's documents.
// Then etcd is restored (wiped and the document put back, as from a
// backup: revisions start again, every term now lower than before): the
// follower applies the new leader's documents.
func TestFleetForgedTerm(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	// etcd's history before the fleet: the first term is well above the
	// revisions an etcd restored from a backup of that time starts at.
	for i := range 50 {
		_, err := cli.Put(context.Background(), "/before/fleet", fmt.Sprint(i))
		must(t, err)
	}
	d1, d2 := newFleetMember(t, "dir1", c.Members[0]), newFleetMember(t, "dir2", c.Members[0])
	d1.start(t, false)
	eventually(t, 60*time.Second, "dir1 leads", func() bool { return d1.fleet().Leader })
	d2.start(t, false)
	eventually(t, 60*time.Second, "dir2 follows dir1's document", func() bool {
		return d2.fleet().DocRevision > 0 && d2.fleet().DocRevision == d1.fleet().DocRevision
	})
	fake := fmt.Sprintf("lvs-feedback-state 1 dir1 %d 1\ns %s\nd %s managed 3 10 0 0 0 lvs-monitor 3 1 0 0\n", int64(math.MaxInt64), svcKey, rsA)
	before := d2.fleet().DocumentsRefused
	var fakeRev int64 // the last forged put's revision
	eventually(t, 60*time.Second, "dir2 refuses the forged term", func() bool {
		resp, err := cli.Put(context.Background(), "/fleet-test/state", fake)
		must(t, err)
		fakeRev = resp.Header.Revision
		time.Sleep(100 * time.Millisecond)
		f := d2.fleet()
		return f.DocumentsRefused > before && strings.Contains(f.Refused, "term 9223372036854775807, but the elected leader is dir1 in term")
	})
	if w := d2.weights(t); w[rsA] != 10 {
		t.Fatalf("dir2 applied the forged document: %v", w)
	}
	must(t, d1.m.Drain(svcKey, rsC))
	// The last forged put may land after a document of the leader's:
	// wait for dir2 to apply one written after it.
	eventually(t, 60*time.Second, "the leader's drain reaches dir2", func() bool {
		return d2.weights(t)[rsC] == 0 && d2.fleet().DocRevision > fakeRev
	})
	if d2.fleet().Refused != "" {
		t.Errorf("dir2 still reports a refusal after applying the leader's document: %q", d2.fleet().Refused)
	}

	// Restore: the document of before is put back into an empty etcd.
	// dir2 is cut off meanwhile, so that dir1 leads again and dir2 — the
	// same process, with whatever it remembers — follows the new term.
	r, err := cli.Get(context.Background(), "/fleet-test/state")
	must(t, err)
	backup := r.Kvs[0].Value
	oldTerm := d1.store.Status().Term
	d2.proxy.Cut()
	c.Wipe(60 * time.Second)
	_, err = cli.Put(context.Background(), "/fleet-test/state", string(backup))
	must(t, err)
	var newTerm int64
	// Until dir1 has seen the wipe, its status still shows the old term.
	eventually(t, 60*time.Second, "dir1 leads in a new term after the restore", func() bool {
		newTerm = d1.store.Status().Term
		return newTerm > 0 && newTerm != oldTerm && d1.fleet().Leader
	})
	d2.proxy.Restore()
	leader, follower := d1, d2
	t.Logf("after the restore: %s leads in term %d (before: %d)", leader.id, newTerm, oldTerm)
	if newTerm >= oldTerm {
		t.Fatalf("the new term %d is not below the old %d: the restore does not test what it should", newTerm, oldTerm)
	}
	// The drain stands (the leader took over the restored document), and
	// an undrain made now reaches the follower.
	leader.waitCycles(t, 2)
	if leader.weights(t)[rsC] != 0 {
		t.Fatalf("%s after the restore: %v; want C still drained", leader.id, leader.weights(t))
	}
	must(t, leader.m.Undrain(svcKey, rsC))
	eventually(t, 60*time.Second, "the undrain after the restore reaches "+follower.id, func() bool {
		return follower.weights(t)[rsC] > 0 && follower.fleet().Refused == ""
	})
}
