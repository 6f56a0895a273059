package fleet

import (
	"context"
	"lvs-feedback/replica"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
	"lvs-feedback/scheduler/fleet/etcdtest"
)

// cpuTime is this process's user+system CPU time (etcd runs in its own).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchKeys(n int) []replica.DestKey {
	var out []replica.DestKey
	for i := range n {
		svc := ipvs.ServiceKey{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i / 100), 1}), 80), Protocol: ipvs.TCP}
		out = append(out, replica.DestKey{Service: svc, Dest: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i % 250)}), 80)})
	}
	return out
}

// BenchmarkFleetCycle1000 is one fleet cycle's etcd work at 1,000
// destinations against a real etcd: a follower's publish and view read,
// and the leader's fenced read of three directors' counters and its
// document write. It reports the client CPU and bytes of each role.
func BenchmarkFleetCycle1000(b *testing.B) {
	c := etcdtest.Start(b, 1)
	ctx := context.Background()
	mk := func(id string) *Client {
		cl, err := New(Config{ID: id, Members: []string{"dir1", "dir2", "dir3"}, Endpoints: c.Endpoints(), Prefix: "/b/", LeaseTTL: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		return cl
	}
	leader := mk("dir1")
	for !leader.Status().Leader {
		time.Sleep(50 * time.Millisecond)
	}
	f2, f3 := mk("dir2"), mk("dir3")
	for !f2.Status().LeaseOK || !f3.Status().LeaseOK {
		time.Sleep(50 * time.Millisecond)
	}
	keys := benchKeys(1000)
	counters := func(id string, cycle uint64) Counters {
		ctr := Counters{Director: id, Start: 1, Cycle: cycle}
		for i, k := range keys {
			ctr.Dests = append(ctr.Dests, DestCounters{Key: k, NewTotal: cycle * uint64(i), New: int64(i), Active: i % 50, Inactive: i % 7})
		}
		return ctr
	}
	doc := Document{Leader: "dir1"}
	for i, k := range keys {
		doc.Snapshot.Dests = append(doc.Snapshot.Dests, replica.DestState{Key: k, State: "managed", Weight: 1 + i%100, DefaultWeight: 100,
			Carried: policy.Carried{Ctrl: float64(i%100) + 0.37, CtrlSet: true}})
	}
	cb, _ := EncodeCounters(counters("dir2", 1))
	db, _ := EncodeDocument(doc)
	if err := f3.Publish(ctx, counters("dir3", 1)); err != nil {
		b.Fatal(err)
	}
	var followerCPU, leaderCPU time.Duration
	var docRev int64
	b.ResetTimer()
	for i := range b.N {
		t0 := cpuTime()
		if err := f2.Publish(ctx, counters("dir2", uint64(i+2))); err != nil {
			b.Fatal(err)
		}
		if _, err := f2.ReadView(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := cpuTime()
		fl, err := leader.ReadFleet(ctx, false)
		if err != nil || len(fl.Directors) < 2 {
			b.Fatal(err, len(fl.Directors))
		}
		docRev = fl.DocumentRevision
		doc.Cycle = uint64(i)
		if _, err := leader.WriteDocument(ctx, doc, docRev, counters("dir1", uint64(i+2))); err != nil {
			b.Fatal(err)
		}
		t2 := cpuTime()
		followerCPU += t1 - t0
		leaderCPU += t2 - t1
	}
	b.ReportMetric(float64(followerCPU.Microseconds())/1000/float64(b.N), "follower-cpu-ms/cycle")
	b.ReportMetric(float64(leaderCPU.Microseconds())/1000/float64(b.N), "leader-cpu-ms/cycle")
	b.ReportMetric(float64(len(cb)), "counters-bytes")
	b.ReportMetric(float64(len(db)), "document-bytes")
	b.ReportMetric(1, "writes/director/cycle")
}
