package scheduler

import (
	"context"
	"lvs-feedback/monitor"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// testRole is a role source the test moves, as keepalived moves a VIP.
type testRole struct {
	mu sync.Mutex
	r  Role
	ch chan Role
}

func newTestRole(r Role) *testRole {
	return &testRole{r: r, ch: make(chan Role, 4)}
}

func (t *testRole) Role() Role {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.r
}

func (t *testRole) Changes() <-chan Role { return t.ch }

func (t *testRole) set(r Role) {
	t.mu.Lock()
	t.r = r
	t.mu.Unlock()
	t.ch <- r
}

// director is one lvs-monitor of a synchronised pair, on its own in-memory
// table, running Run in a goroutine.
type director struct {
	id     string
	table  *ipvs.Mem
	agents *stubAgents
	role   *testRole
	ln     net.Listener
	m      *monitor.Monitor
	cancel context.CancelFunc
	done   chan struct{}
	// weight, when set, replaces the formula's [weight] line of the
	// configuration (e.g. the capacity controller); extra is appended to
	// it (e.g. a [backlog_guard] table).
	weight, extra string
}

func writeKey(t *testing.T, b byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sync.key")
	if err := os.WriteFile(path, []byte(strings.Repeat(string(rune('a'+b)), 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newPair returns two directors sharing keyFile: dir-a active, dir-b
// standby (not started).
func newPair(t *testing.T, keyFile string) (a, b *director) {
	t.Helper()
	return newDirector(t, "dir-a", Active, keyFile), newDirector(t, "dir-b", Standby, keyFile)
}

func newDirector(t *testing.T, id string, role Role, keyFile string) *director {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	d := &director{id: id, table: ipvs.NewMem(), agents: newStubAgents(), role: newTestRole(role), ln: ln}
	must(t, d.table.AddService(svcKey, "wrr"))
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		must(t, d.table.AddDestination(svcKey, rs, 10))
		d.agents.set(agentOf(rs), 0.95)
	}
	t.Cleanup(func() { ln.Close() })
	return d
}

// start runs d's monitor, synchronised with peers, its state in a new
// directory.
func (d *director) start(t *testing.T, keyFile string, peers ...*director) {
	t.Helper()
	var addrs [][2]string
	for _, p := range peers {
		addrs = append(addrs, [2]string{p.id, p.ln.Addr().String()})
	}
	d.run(t, keyFile, t.TempDir(), addrs...)
}

func (d *director) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
}

func (d *director) weights(t *testing.T) map[netip.AddrPort]int {
	t.Helper()
	return tableWeights(t, d.table)
}

// tableWeights returns svcKey's weights in table, by real server.
func tableWeights(t *testing.T, table ipvs.Table) map[netip.AddrPort]int {
	t.Helper()
	dests, err := table.Destinations(svcKey)
	must(t, err)
	w := map[netip.AddrPort]int{}
	for _, x := range dests {
		w[x.Addr] = x.Weight
	}
	return w
}

func (d *director) writer() bool {
	s := d.m.Status().Sync
	return s != nil && s.Writer
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// every runs step(0), step(1), … every d in a goroutine until the returned
// stop is called (it waits for the goroutine) or step fails (the test then
// fails).
func every(t *testing.T, d time.Duration, step func(i int) error) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if err := step(i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

func sameWeights(a, b map[netip.AddrPort]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestDirectorPair runs two real lvs-monitors synchronised over loopback:
// the standby mirrors the active's weights, a drain on the standby reaches
// the active, and after a failover the new active carries on from the
// replicated weights with every drain kept.
func TestDirectorPair(t *testing.T) {
	key := writeKey(t, 1)
	a, b := newPair(t, key)
	for _, d := range []*director{a, b} {
		d.agents.set(agentOf(rsB), 1.5) // B is hot, as both directors' agents see it
	}
	a.start(t, key, b)
	b.start(t, key, a)

	eventually(t, 10*time.Second, "a writes and lowers B", func() bool { return a.writer() && a.weights(t)[rsB] < 5 })
	eventually(t, 10*time.Second, "b mirrors a", func() bool { return sameWeights(a.weights(t), b.weights(t)) })
	if b.writer() {
		t.Fatal("the standby writes")
	}

	// An operator drains C on the standby, with ipvsadm.
	must(t, b.table.SetWeight(svcKey, rsC, b.weights(t)[rsC], 0))
	eventually(t, 10*time.Second, "the drain on b reaches a", func() bool {
		st := a.m.Status()
		for _, s := range st.LastCycle.Dests {
			if s.Key.Dest == rsC {
				return s.State == policy.DrainedByOperator && s.SetBy == policy.ByOperator && a.weights(t)[rsC] == 0
			}
		}
		return false
	})
	// The standby's records say who set each weight, as the writer's do.
	eventually(t, 10*time.Second, "b's records carry who set the weights", func() bool {
		by := map[netip.AddrPort]policy.Origin{}
		for _, s := range b.m.Status().LastCycle.Dests {
			by[s.Key.Dest] = s.SetBy
		}
		return by[rsC] == policy.ByOperator && by[rsB] == policy.ByMonitor
	})

	// The active dies; keepalived moves the VIP to b.
	a.stop()
	last := a.weights(t)
	var ctrlB float64
	for _, s := range a.m.Status().LastCycle.Dests {
		if s.Key.Dest == rsB {
			ctrlB = s.Decision.Trace.CtrlAfter
		}
	}
	eventually(t, 5*time.Second, "b holds a's last state", func() bool { return sameWeights(last, b.weights(t)) })
	t0 := time.Now()
	b.role.set(Active)
	took := eventually(t, 5*time.Second, "b writes", b.writer)
	t.Logf("takeover: b writing %v after getting the VIP (interval 200ms)", took)
	if diff := b.weights(t); !sameWeights(diff, last) {
		t.Errorf("right after the takeover the tables differ: a %v, b %v", last, diff)
	}
	// b carries on from a's controller state, not from the default weight
	// nor the kernel's. Typically B's controller weight is at the floor, 1,
	// while the kernel holds 2 (within the threshold); B idle now:
	// 1 + 5·∛0.95 = 5.9 → 6, where starting from the kernel's 2 would give 7.
	b.agents.set(agentOf(rsB), 0)
	eventually(t, 10*time.Second, "b raises B", func() bool { return b.weights(t)[rsB] != last[rsB] })
	w := b.weights(t)
	want := policy.RoundWeight(policy.NextWeight(ctrlB, 0, 10, monitor.DefaultConfig().Weight))
	if w[rsB] != want {
		t.Errorf("after failover B went %d → %d, want %d (continuing from a's controller weight %.3f)", last[rsB], w[rsB], want, ctrlB)
	}
	if w[rsC] != 0 {
		t.Errorf("after failover: C %d, want 0 (drained on the old standby, kept)", w[rsC])
	}
	t.Logf("failover done %v after the VIP moved", time.Since(t0))
}

// TestDirectorPairWrongKey: a director with another key is refused; nothing
// it sends reaches the table.
func TestDirectorPairWrongKey(t *testing.T) {
	a := newDirector(t, "dir-a", Active, "")
	b := newDirector(t, "dir-b", Standby, "")
	a.agents.set(agentOf(rsB), 1.95)
	a.start(t, writeKey(t, 1), b)
	b.start(t, writeKey(t, 2), a)
	eventually(t, 10*time.Second, "a lowers B", func() bool { return a.weights(t)[rsB] < 10 })
	eventually(t, 10*time.Second, "b rejects a's frames", func() bool {
		s := b.m.Status().Sync
		return s != nil && s.Frames["bad_mac"] > 0
	})
	if got := b.weights(t)[rsB]; got != 10 {
		t.Errorf("a frame with the wrong key reached b's table: B weight %d", got)
	}
	if s := b.m.Status().Sync; s.Frames["accepted"] != 0 || len(s.Peers) != 1 || !eventuallyBool(10*time.Second, func() bool { return b.m.Status().Sync.Peers[0].Unreachable }) {
		t.Errorf("b's sync status %+v: want no accepted frames and a unreachable", s)
	}
}

func eventuallyBool(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestDirectorPairCapacity: two real monitors running the capacity
// controller. The active lowers B, which serves half as many connections
// as A and C for the same CPU; the standby, with no traffic through its
// own table, mirrors the weights without measuring; after the takeover it
// measures the same and keeps B where it is — it never writes B's
// configured weight back in between (it did, for the confirmation
// intervals, when the takeover came before the follower's next cycle after
// adopting the writer's weights).
func TestDirectorPairCapacity(t *testing.T) {
	key := writeKey(t, 1)
	a, b := newPair(t, key)
	for _, d := range []*director{a, b} {
		d.weight = "controller = \"capacity\"\n"
		for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
			d.agents.set(agentOf(rs), 0.5)
		}
	}
	// The clients' connections go through the director that holds the
	// VIP: per 20 ms, 4 to A and C, 2 to B (fixed: the inputs stay put).
	var through atomic.Pointer[director]
	through.Store(a)
	defer every(t, 20*time.Millisecond, func(int) error {
		d := through.Load()
		for rs, n := range map[netip.AddrPort]uint32{rsA: 4, rsB: 2, rsC: 4} {
			if err := d.table.AddConnections(svcKey, rs, n); err != nil {
				return err
			}
		}
		return nil
	})()
	a.start(t, key, b)
	b.start(t, key, a)

	// B: half the median's capacity per unit of weight, for 3 intervals
	// (confirm): 10 → 5.
	eventually(t, 10*time.Second, "a lowers B", func() bool { return a.writer() && a.weights(t)[rsB] == 5 })
	eventually(t, 10*time.Second, "b mirrors a", func() bool { return sameWeights(a.weights(t), b.weights(t)) })
	a.stop()
	last := a.weights(t)
	through.Store(b)
	b.role.set(Active)
	eventually(t, 5*time.Second, "b writes", b.writer)
	// Ten intervals of b writing: B must stay where a left it.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if w := b.weights(t); w[rsB] != last[rsB] || w[rsA] != last[rsA] || w[rsC] != last[rsC] {
			t.Fatalf("after the takeover b's weights %v, want a's last %v kept", w, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("weights kept across the takeover: %v", last)
}

// TestDirectorPairGuard: the writer's backlog guard cuts between cycles and
// the follower's table takes the cut; the follower, seeing a backlog in its
// own table, writes nothing of its own. The formula runs at its target load
// (step 0): every change is the guard's.
func TestDirectorPairGuard(t *testing.T) {
	key := writeKey(t, 2)
	a, b := newPair(t, key)
	for _, d := range []*director{a, b} {
		d.extra = "[backlog_guard]\ncheck = \"50ms\"\n"
		for rs, n := range map[netip.AddrPort]int{rsA: 5, rsB: 5, rsC: 5} {
			must(t, d.table.SetActive(svcKey, rs, n, 0))
		}
	}
	a.start(t, key, b)
	b.start(t, key, a)
	eventually(t, 10*time.Second, "a writes, b follows", func() bool { return a.writer() && !b.writer() })
	// B's active connections grow on both tables, one every 20 ms: median
	// 0.5 per unit of weight, B beyond 2× and 16 over from 21 on.
	defer every(t, 20*time.Millisecond, func(i int) error {
		if n := 20 + i; n < 200 {
			for _, d := range []*director{a, b} {
				if err := d.table.SetActive(svcKey, rsB, n, 0); err != nil {
					return err
				}
			}
		}
		return nil
	})()
	eventually(t, 10*time.Second, "a's guard cuts B", func() bool { return a.weights(t)[rsB] < 10 })
	cut := a.weights(t)[rsB]
	eventually(t, 5*time.Second, "b's table takes a's cut", func() bool { return sameWeights(a.weights(t), b.weights(t)) })
	if w := a.weights(t); w[rsA] != 10 || w[rsC] != 10 {
		t.Errorf("a's weights %v: only B should move", w)
	}
	t.Logf("B cut to %d on a, mirrored by b", cut)
}

// TestPeerSources: the hosts of the peers' addresses that are IP literals
// (IPv6 with its zone dropped by the listener), names and bad ones skipped.
func TestPeerSources(t *testing.T) {
	got := peerSources([]string{"10.0.0.2:9773", "[fd00::2]:9773", "dirb.example:9773", "nonsense", "[fe80::1%eth1]:9773"})
	want := []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fe80::1%eth1")}
	if len(got) != len(want) {
		t.Fatalf("peerSources = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("peerSources[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}
