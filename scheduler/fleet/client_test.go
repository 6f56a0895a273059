package fleet

import (
	"context"
	"errors"
	"lvs-feedback/replica"
	"net/netip"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/scheduler/fleet/etcdtest"
)

// testMembers are the director ids the tests' clients list.
var testMembers = []string{"a", "b", "d"}

func newClient(t *testing.T, c *etcdtest.Cluster, id string) *Client {
	t.Helper()
	cl, err := New(Config{ID: id, Members: testMembers, Endpoints: c.Endpoints(), Prefix: "/t/", LeaseTTL: 2 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

var testKey = replica.DestKey{Service: ipvs.ServiceKey{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Protocol: ipvs.TCP},
	Dest: netip.MustParseAddrPort("10.0.1.1:80")}

// TestElectionFencing: one leader among three; its fenced read and write
// work; a document written by it is read by the others; once its lease is
// gone (Close), another leads and the old one's writes are refused.
func TestElectionFencing(t *testing.T) {
	c := etcdtest.Start(t, 3)
	a, b, d := newClient(t, c, "a"), newClient(t, c, "b"), newClient(t, c, "d")
	ctx := context.Background()
	// A client publishes under its own lease; under load a follower's
	// grant can come after the leader's election.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, x := range []*Client{a, b, d} {
		if !x.WaitLease(wctx) {
			t.Fatalf("%s: no lease within 30 s", x.cfg.ID)
		}
	}
	var leader *Client
	waitFor(t, 30*time.Second, "a leader", func() bool {
		for _, x := range []*Client{a, b, d} {
			if x.Status().Leader {
				leader = x
				return true
			}
		}
		return false
	})
	n := 0
	for _, x := range []*Client{a, b, d} {
		if x.Status().Leader {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d leaders", n)
	}
	for _, x := range []*Client{a, b, d} {
		if x != leader {
			if _, err := x.ReadFleet(ctx, true); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("a follower's fenced read: %v, want ErrNotLeader", err)
			}
			if err := x.Publish(ctx, Counters{Director: x.cfg.ID, Dests: []DestCounters{{Key: testKey, NewTotal: 5, New: 5, Active: 2}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fl, err := leader.ReadFleet(ctx, true)
	if err != nil || len(fl.Directors) != 2 || fl.Document != nil {
		t.Fatalf("leader's read: %+v, %v; want 2 directors, no document", fl, err)
	}
	doc := Document{Leader: leader.cfg.ID, Cycle: 1, Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: testKey, State: "drained", Weight: 0, DefaultWeight: 10}}},
		Acks: []replica.Ack{{Peer: "b", Pos: replica.EditPos{Epoch: 3, ID: 1}}}}
	rev, err := leader.WriteDocument(ctx, doc, 0, Counters{Director: leader.cfg.ID})
	if err != nil {
		t.Fatal(err)
	}
	// The revision compare-and-set: a write from an out-of-date read fails.
	if _, err := leader.WriteDocument(ctx, doc, 0, Counters{Director: leader.cfg.ID}); !errors.Is(err, ErrDocumentMoved) {
		t.Fatalf("stale-revision write: %v, want ErrDocumentMoved", err)
	}
	other := a
	if other == leader {
		other = b
	}
	v, err := other.ReadView(ctx)
	if err != nil || v.Document == nil || v.Document.Revision != rev || v.Leader != leader.cfg.ID || v.Directors != 3 ||
		v.Document.Snapshot.Dests[0].State != "drained" || v.Document.Acks[0].Pos.Epoch != 3 || v.Document.Term != leader.Status().Term {
		t.Fatalf("view %+v (doc %+v), %v", v, v.Document, err)
	}
	oldTerm := leader.Status().Term
	leader.Close()
	var next *Client
	took := waitFor(t, 30*time.Second, "a new leader", func() bool {
		for _, x := range []*Client{a, b, d} {
			if x != leader && x.Status().Leader {
				next = x
				return true
			}
		}
		return false
	})
	t.Logf("new leader %s after %v (the old one resigned)", next.cfg.ID, took)
	if next.Status().Term <= oldTerm {
		t.Fatalf("term %d not above %d", next.Status().Term, oldTerm)
	}
	if _, err := leader.WriteDocument(ctx, doc, rev, Counters{Director: leader.cfg.ID}); err == nil {
		t.Fatal("the resigned leader wrote the document")
	}
	fl, err = next.ReadFleet(ctx, true)
	if err != nil || fl.Document == nil || fl.Document.Leader != leader.cfg.ID {
		t.Fatalf("new leader's read: %+v, %v", fl, err)
	}
}

// TestMalformedDocument: a document that does not decode is an error
// wrapping ErrMalformed, counted, and nothing of it is returned.
func TestMalformedDocument(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := newClient(t, c, "a")
	cli := c.Client(t)
	ctx := context.Background()
	// A malformed read leaves Up as the last operation left it: wait for
	// the lease, the client's first operation, so that it is up (under
	// load the first read came before the grant).
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !a.WaitLease(wctx) {
		t.Fatal("no lease within 30 s")
	}
	for _, bad := range []string{"{",
		"lvs-feedback-state 1 x 5 1\ns 10.0.0.1:80/tcp\nd 10.0.1.1:80 managed 70000 10 0 0 0 - 0 0 0 0\n", // weight out of range
		"lvs-feedback-state 2 x 5 1\n",   // another format version
		"lvs-feedback-state 1 x/y 5 1\n", // bad leader id
		"lvs-feedback-state 1 x 0 1\n",   // no term
		"lvs-feedback-state 1 x 5 1\ns 10.0.0.1:80/tcp\nd 10.0.1.1:80 gone 1 10 0 0 0 - 0 0 0 0\n",      // unknown state
		"lvs-feedback-state 1 x 5 1\ns 10.0.0.1:80/tcp\nd 10.0.1.1:80 managed 1 10 0 0 0 - NaN 1 0 0\n", // controller state
	} {
		if _, err := cli.Put(ctx, "/t/state", bad); err != nil {
			t.Fatal(err)
		}
		before := a.Status().Errors
		v, err := a.ReadView(ctx)
		if !errors.Is(err, ErrMalformed) || v.Document != nil {
			t.Fatalf("%s: %v, %+v; want ErrMalformed and no document", bad, err, v.Document)
		}
		if a.Status().Errors != before+1 || !a.Status().Up {
			t.Fatalf("%s: status %+v", bad, a.Status())
		}
	}
}

// TestOneMemberDown: with one of three members killed, leading, reading
// and writing go on.
func TestOneMemberDown(t *testing.T) {
	c := etcdtest.Start(t, 3)
	a := newClient(t, c, "a")
	waitFor(t, 30*time.Second, "a leads", func() bool { return a.Status().Leader })
	c.Members[0].Stop()
	ctx := context.Background()
	for i := range 5 {
		fl, err := a.ReadFleet(ctx, false)
		if err != nil {
			t.Fatalf("read %d with a member down: %v", i, err)
		}
		if _, err := a.WriteDocument(ctx, Document{Leader: "a", Cycle: uint64(i)}, fl.DocumentRevision, Counters{Director: "a"}); err != nil {
			t.Fatalf("write %d with a member down: %v", i, err)
		}
	}
	if !a.Status().Leader || !a.Status().Up {
		t.Fatalf("status %+v", a.Status())
	}
}

// TestEtcdUnreachable: with every member down the client reports etcd
// down and, once the lease is gone, neither lease nor leadership; when
// etcd is back it leads again.
func TestEtcdUnreachable(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := newClient(t, c, "a")
	waitFor(t, 30*time.Second, "a leads", func() bool { return a.Status().Leader })
	c.Stop()
	ctx := context.Background()
	waitFor(t, 30*time.Second, "leadership and lease gone", func() bool {
		_, _ = a.ReadView(ctx)
		s := a.Status()
		return !s.Leader && !s.LeaseOK && !s.Up && s.Errors > 0
	})
	if _, err := a.WriteDocument(ctx, Document{Leader: "a"}, 0, Counters{Director: "a"}); err == nil {
		t.Fatal("wrote without etcd")
	}
	c.Restart(60 * time.Second)
	waitFor(t, 60*time.Second, "a leads again", func() bool { return a.Status().Leader })
}
