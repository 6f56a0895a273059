package fleet

import (
	"context"
	"errors"
	"lvs-feedback/replica"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"lvs-feedback/scheduler/fleet/etcdtest"
)

// forged is a director record as anyone able to write under the prefix
// could put it: huge counts for one server.
func forged(id string) string {
	return "lvs-feedback-counters 1 " + id + " 1 1\ns 10.0.0.1:80/tcp\nd 10.0.1.1:80 900000000 900000000 0 0\n"
}

// TestReadFleetTrust: the leader reads the counters of listed directors
// bound to a lease only; a record under an unlisted id, or a listed id's
// record written without a lease, is refused (ErrUntrusted) and counted
// nowhere in Directors.
func TestReadFleetTrust(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a := newClient(t, c, "a")
	ctx := context.Background()
	waitFor(t, 30*time.Second, "a leads", func() bool { return a.Status().Leader })
	b := newClient(t, c, "b")
	waitFor(t, 30*time.Second, "b's lease", func() bool { return b.Status().LeaseOK })
	if err := b.Publish(ctx, Counters{Director: "b", Dests: []DestCounters{{Key: testKey, NewTotal: 7, New: 7}}}); err != nil {
		t.Fatal(err)
	}
	admin := c.Client(t)
	for key, val := range map[string]string{"/t/directors/evil": forged("evil"), "/t/directors/d": forged("d")} {
		if _, err := admin.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	fl, err := a.ReadFleet(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(fl.Directors) != 1 || fl.Directors[0].Director != "b" || fl.Directors[0].Dests[0].NewTotal != 7 {
		t.Fatalf("directors read: %+v; want b's record only", fl.Directors)
	}
	if len(fl.Refused) != 2 || !errors.Is(fl.Refused[0], ErrUntrusted) || !errors.Is(fl.Refused[1], ErrUntrusted) {
		t.Fatalf("refused: %v; want the two forged records", fl.Refused)
	}
	why := errors.Join(fl.Refused...).Error()
	if !strings.Contains(why, `director "evil" is not in sync.etcd.directors`) || !strings.Contains(why, "/t/directors/d: written without a lease") {
		t.Fatalf("refusals do not say why: %s", why)
	}
	// A listed id under a lease of its own is read: what it claims is
	// the plausibility bound's to judge (monitor), and etcd RBAC keeps
	// anyone but that director from writing its key (TestPerDirectorRBAC).
	lease, err := admin.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Put(ctx, "/t/directors/d", forged("d"), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	fl, err = a.ReadFleet(ctx, false)
	if err != nil || len(fl.Directors) != 2 || len(fl.Refused) != 1 {
		t.Fatalf("with d leased: %+v, %v; want b and d read, evil refused", fl, err)
	}
}

// TestReadViewLeaderTerm: a follower's view names the elected leader and
// its term (the election key's creation revision), which the leader's
// documents carry.
func TestReadViewLeaderTerm(t *testing.T) {
	c := etcdtest.Start(t, 1)
	// A stray key beside the election's candidates, older than them: the
	// election ignores it (concurrency.Election keys its candidates under
	// election/ plus "/"), and so must the followers' view of the leader.
	if _, err := c.Client(t).Put(context.Background(), "/t/election/x", "z"); err != nil {
		t.Fatal(err)
	}
	a := newClient(t, c, "a")
	waitFor(t, 30*time.Second, "a leads", func() bool { return a.Status().Leader })
	b := newClient(t, c, "b")
	ctx := context.Background()
	if _, err := a.WriteDocument(ctx, Document{Leader: "a", Cycle: 1}, 0, Counters{Director: "a"}); err != nil {
		t.Fatal(err)
	}
	v, err := b.ReadView(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if term := a.Status().Term; v.Leader != "a" || v.LeaderTerm != term || v.Document == nil || v.Document.Term != term {
		t.Fatalf("view %+v (document %+v); want leader a in term %d, the document of that term", v, v.Document, term)
	}
}

// TestPerDirectorRBAC runs two directors with the etcd users docs/fleet.md
// describes: each role reads the prefix and writes only the director's own
// counters key, the election keys and the document. Both work (one leads,
// the other's counters reach it, its document reaches the other), and
// neither can write the other's counters or a record under a new id.
func TestPerDirectorRBAC(t *testing.T) {
	c := etcdtest.Start(t, 1)
	admin := c.Client(t)
	ctx := context.Background()
	const p = "/t/"
	grant := func(role, key, end string, perm clientv3.PermissionType) func() error {
		return func() error { _, err := admin.RoleGrantPermission(ctx, role, key, end, perm); return err }
	}
	steps := []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
	}
	dir := t.TempDir()
	for _, id := range []string{"a", "b"} {
		role := "lvs-" + id
		steps = append(steps,
			func() error { _, err := admin.RoleAdd(ctx, role); return err },
			grant(role, p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermRead)),
			grant(role, p+"directors/"+id, "", clientv3.PermissionType(clientv3.PermReadWrite)),
			grant(role, p+"election/", clientv3.GetPrefixRangeEnd(p+"election/"), clientv3.PermissionType(clientv3.PermReadWrite)),
			grant(role, p+"state", "", clientv3.PermissionType(clientv3.PermReadWrite)),
			func() error { _, err := admin.UserAdd(ctx, role, "pw-"+id); return err },
			func() error { _, err := admin.UserGrantRole(ctx, role, role); return err },
		)
		if err := os.WriteFile(filepath.Join(dir, id), []byte("pw-"+id+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	steps = append(steps, func() error { _, err := admin.AuthEnable(ctx); return err })
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("RBAC set-up step %d: %v", i, err)
		}
	}
	mk := func(id string) *Client {
		cl, err := New(Config{ID: id, Members: testMembers, Endpoints: c.Endpoints(), Prefix: p, LeaseTTL: 2 * time.Second, DialTimeout: 2 * time.Second,
			Username: "lvs-" + id, PasswordFile: filepath.Join(dir, id)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	a := mk("a")
	waitFor(t, 60*time.Second, "a leads as lvs-a", func() bool { return a.Status().Leader })
	b := mk("b")
	waitFor(t, 60*time.Second, "b's lease as lvs-b", func() bool { return b.Status().LeaseOK })
	if err := b.Publish(ctx, Counters{Director: "b", Dests: []DestCounters{{Key: testKey, NewTotal: 3, New: 3}}}); err != nil {
		t.Fatalf("b publishes its own counters: %v", err)
	}
	fl, err := a.ReadFleet(ctx, false)
	if err != nil || len(fl.Directors) != 1 || fl.Directors[0].Director != "b" {
		t.Fatalf("a's fenced read: %+v, %v; want b's counters", fl, err)
	}
	doc := Document{Leader: "a", Cycle: 1, Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: testKey, State: "managed", Weight: 7, DefaultWeight: 10, SetBy: "lvs-monitor"}}}}
	if _, err := a.WriteDocument(ctx, doc, fl.DocumentRevision, Counters{Director: "a"}); err != nil {
		t.Fatalf("a writes the document: %v", err)
	}
	v, err := b.ReadView(ctx)
	if err != nil || v.Document == nil || v.Document.Snapshot.Dests[0].Weight != 7 {
		t.Fatalf("b's view: %+v, %v", v, err)
	}
	// b's own credentials cannot forge a's counters, nor a new director's.
	raw, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(), Username: "lvs-b", Password: "pw-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, key := range []string{p + "directors/a", p + "directors/evil"} {
		if _, err := raw.Put(ctx, key, forged("a")); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("lvs-b writing %s: %v, want permission denied", key, err)
		}
	}
	r, err := raw.Get(ctx, p+"directors/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range r.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if !slices.Equal(keys, []string{p + "directors/a", p + "directors/b"}) {
		t.Errorf("counters keys %v; want a's and b's only", keys)
	}
}
