package scheduler

import (
	"context"
	"lvs-feedback/monitor"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
	"lvs-feedback/scheduler/fleet"
	"lvs-feedback/scheduler/fleet/etcdtest"
)

// fleetMember is one lvs-monitor of an etcd fleet on its own in-memory
// table, reaching etcd through its own proxy (cut to cut it off).
type fleetMember struct {
	id     string
	table  *ipvs.Mem
	agents *stubAgents
	proxy  *etcdtest.Proxy
	m      *monitor.Monitor
	store  FleetStore // its etcd client
	cancel context.CancelFunc
	done   chan struct{}

	// killMidCycle, when set, cuts the director off from etcd in its next
	// document write: after it decided and wrote its own table, before the
	// fleet hears of it.
	killMidCycle atomic.Bool
	cutAt        atomic.Int64 // when it was cut (Unix ns)

	mu     sync.Mutex
	cycles int
	ends   []time.Time // when each cycle ended
	// newA sums the new connections to rsA the controller saw in this
	// director's cycles as leader.
	newA int64
	// capacity: run the capacity controller (default: the LVS formula).
	capacity bool
}

func newFleetMember(t *testing.T, id string, member *etcdtest.Member) *fleetMember {
	t.Helper()
	d := &fleetMember{id: id, table: ipvs.NewMem(), agents: newStubAgents(), proxy: etcdtest.NewProxy(t, member)}
	must(t, d.table.AddService(svcKey, "wrr"))
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		must(t, d.table.AddDestination(svcKey, rs, 10))
		d.agents.set(agentOf(rs), 0.95)
	}
	return d
}

func (d *fleetMember) start(t *testing.T, dryRun bool) {
	t.Helper()
	conf := strings.Replace(cpuOnlyConfig, `interval = "1s"`, `interval = "500ms"`, 1)
	if d.capacity {
		conf = strings.Replace(conf, `controller = "lvs"`, `controller = "capacity"`, 1)
	}
	conf = strings.Replace(conf, `agent_timeout = "500ms"`, `agent_timeout = "100ms"`, 1)
	conf = strings.Replace(conf, `probe_timeout = "500ms"`, `probe_timeout = "100ms"`, 1)
	conf = strings.Replace(conf, "[availability]\n", "[availability]\nslow_start = \"0s\"\nagent_expiry = \"10s\"\n", 1)
	conf += "[sync]\nid = \"" + d.id + "\"\nbackend = \"etcd\"\n[sync.etcd]\nendpoints = [\"" + d.proxy.URL + "\"]\nprefix = \"/fleet-test/\"\nlease_ttl = \"2s\"\ndial_timeout = \"2s\"\ndirectors = [\"dir1\", \"dir2\", \"dir3\", \"dir4\"]\n"
	cfg, err := monitor.ParseConfig(d.id+".toml", []byte(conf))
	must(t, err)
	cfg.StateDir = t.TempDir()
	store, err := monitor.NewFileStore(cfg.StateDir)
	must(t, err)
	e := cfg.Sync.Etcd
	cl, err := fleet.New(fleet.Config{ID: d.id, Endpoints: e.Endpoints, Prefix: e.Prefix, LeaseTTL: e.LeaseTTL, DialTimeout: e.DialTimeout,
		OpTimeout: time.Second, Observer: dryRun, Members: e.Directors})
	must(t, err)
	d.store = killableStore{Client: cl, d: d}
	d.m, err = monitor.New(cfg, monitor.Deps{Table: d.table, Agents: d.agents, Prober: newStubProber(), Store: store}, dryRun)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		err := Run(ctx, d.m, Config{Monitor: cfg, DryRun: dryRun, Fleet: d.store, AfterCycle: func(rep monitor.CycleReport, _ error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.cycles++
			d.ends = append(d.ends, time.Now())
			if s := d.m.Status().Sync; s != nil && s.Writer {
				for _, x := range rep.Dests {
					if x.Key.Dest == rsA && x.NewConns > 0 {
						d.newA += x.NewConns
					}
				}
			}
		}})
		if err != nil {
			t.Errorf("%s: Run: %v", d.id, err)
		}
	}()
	t.Cleanup(d.stop)
}

// killableStore is the director's etcd client, cut off from etcd in
// WriteDocument when the test says so.
type killableStore struct {
	*fleet.Client
	d *fleetMember
}

func (k killableStore) WriteDocument(ctx context.Context, doc fleet.Document, rev int64, own fleet.Counters) (int64, error) {
	if k.d.killMidCycle.Load() {
		k.d.proxy.Cut()
		k.d.cutAt.CompareAndSwap(0, time.Now().UnixNano())
	}
	return k.Client.WriteDocument(ctx, doc, rev, own)
}

func (d *fleetMember) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
}

func (d *fleetMember) cycleCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cycles
}

func (d *fleetMember) fleet() monitor.FleetStatus {
	if s := d.m.Status().Sync; s != nil && s.Fleet != nil {
		return *s.Fleet
	}
	return monitor.FleetStatus{}
}

func (d *fleetMember) weights(t *testing.T) map[netip.AddrPort]int {
	t.Helper()
	return tableWeights(t, d.table)
}

// waitCycles waits until d has run n more cycles.
func (d *fleetMember) waitCycles(t *testing.T, n int) {
	t.Helper()
	target := d.cycleCount() + n
	eventually(t, time.Duration(n)*20*time.Second, d.id+" cycles", func() bool { return d.cycleCount() >= target })
}

func leaderOf(ds []*fleetMember) *fleetMember {
	var l *fleetMember
	for _, d := range ds {
		if d.fleet().Leader {
			if l != nil {
				return nil // two claim it: not settled
			}
			l = d
		}
	}
	return l
}

func allEqual(t *testing.T, ds []*fleetMember) bool {
	for _, d := range ds[1:] {
		if !sameWeights(ds[0].weights(t), d.weights(t)) {
			return false
		}
	}
	return true
}

// TestFleet runs three lvs-monitors as a fleet on a real 3-member etcd:
// one leads on the sum of their counters, all tables hold its weights, a
// drain made on a follower reaches all, the leader cut off (as if it
// crashed: no resignation) is replaced within two lease TTLs by one that
// carries on from the stored state, the cut-off one holds its table and
// rejoins, and with etcd down every table is held.
func TestFleet(t *testing.T) {
	c := etcdtest.Start(t, 3)
	var ds []*fleetMember
	for i, id := range []string{"dir1", "dir2", "dir3"} {
		d := newFleetMember(t, id, c.Members[i])
		d.agents.set(agentOf(rsB), 1.5) // B is hot, as every director's agents see it
		ds = append(ds, d)
	}
	for _, d := range ds {
		d.start(t, false)
	}
	var leader *fleetMember
	eventually(t, 60*time.Second, "one leader, B lowered in all three tables", func() bool {
		leader = leaderOf(ds)
		return leader != nil && allEqual(t, ds) && ds[0].weights(t)[rsB] < 5
	})
	eventually(t, 30*time.Second, "every director: the leader's id, etcd up, 3 directors, a document", func() bool {
		for _, d := range ds {
			if f := d.fleet(); f.LeaderID != leader.id || !f.EtcdUp || f.Directors != 3 || f.DocRevision == 0 {
				return false
			}
		}
		return true
	})

	// The controller sees the sum of the three directors' counters.
	leader.mu.Lock()
	leader.newA = 0
	leader.mu.Unlock()
	for i, d := range ds {
		must(t, d.table.AddConnections(svcKey, rsA, uint32(100*(i+1))))
	}
	eventually(t, 60*time.Second, "the leader's controller sees 600 new connections to A", func() bool {
		leader.mu.Lock()
		defer leader.mu.Unlock()
		if leader.newA > 600 {
			t.Fatalf("leader counted %d new connections, more than the 600 made", leader.newA)
		}
		return leader.newA == 600
	})

	// An operator drains C through lvsctl on a follower.
	var follower *fleetMember
	for _, d := range ds {
		if d != leader {
			follower = d
			break
		}
	}
	must(t, follower.m.Drain(svcKey, rsC))
	eventually(t, 60*time.Second, "the drain reaches every table", func() bool {
		for _, d := range ds {
			if d.weights(t)[rsC] != 0 {
				return false
			}
		}
		return allEqual(t, ds)
	})
	eventually(t, 30*time.Second, "the leader's record: C drained by the operator", func() bool {
		for _, s := range leader.m.Status().LastCycle.Dests {
			if s.Key.Dest == rsC {
				return s.State == policy.DrainedByOperator
			}
		}
		return false
	})
	// A rebuild on the leader — C removed and re-added at its weight with
	// counters above the recorded ones, as IPVS gives a destination back
	// from its trash — is no undrain: the follower's lvsctl drain reached
	// the leader as a drain, held.
	must(t, leader.table.RemoveDestination(svcKey, rsC))
	must(t, leader.table.AddDestination(svcKey, rsC, 10))
	must(t, leader.table.AddConnections(svcKey, rsC, 1<<30))
	leader.waitCycles(t, 3)
	for _, d := range ds {
		if w := d.weights(t)[rsC]; w != 0 {
			t.Errorf("%s: C at weight %d after a rebuild on the leader, want 0 (drained with lvsctl)", d.id, w)
		}
	}

	// The leader is killed mid-cycle: cut off from etcd after it decided
	// and wrote its table, before its document (its lease is not revoked).
	var rest []*fleetMember
	for _, d := range ds {
		if d != leader {
			rest = append(rest, d)
		}
	}
	leader.agents.set(agentOf(rsB), 1.0) // B recovers a little: the leader's last decision moves it
	leader.killMidCycle.Store(true)
	eventually(t, 30*time.Second, "the leader's document write cut", func() bool { return !leader.fleet().EtcdUp })
	cut := time.Unix(0, leader.cutAt.Load())
	held := leader.weights(t)
	var next *fleetMember
	eventually(t, 60*time.Second, "a new leader among the others", func() bool {
		next = leaderOf(rest)
		return next != nil
	})
	took := time.Since(cut)
	eventually(t, 30*time.Second, next.id+"'s first cycle as leader", func() bool { return next.m.Last().Start.After(cut.Add(took)) })
	applied := next.m.Last().Start.Add(next.m.Last().Duration).Sub(cut)
	next.mu.Lock()
	cycles := 0
	for _, e := range next.ends {
		if e.After(cut) {
			cycles++
		}
	}
	next.mu.Unlock()
	t.Logf("failover: %s leads %v after %s was killed mid-cycle, and has applied its first own decision %v after it (its cycle %d since; 500 ms cycles, lease TTL 2 s)",
		next.id, took.Round(time.Millisecond), leader.id, applied.Round(time.Millisecond), cycles)
	if took > 2*2*time.Second+5*time.Second { // 2 TTLs, and slack for a loaded machine
		t.Errorf("failover took %v, over 2 lease TTLs (+5 s slack)", took)
	}
	// It carries on from the stored state: the drain stays, B stays low.
	next.waitCycles(t, 3)
	for _, d := range rest {
		w := d.weights(t)
		if w[rsC] != 0 || w[rsB] >= 5 {
			t.Fatalf("%s after failover: %v; want C drained, B still low", d.id, w)
		}
	}
	eventually(t, 30*time.Second, "the two hold the same weights", func() bool { return allEqual(t, rest) })
	// The cut-off director holds its table and says etcd is unreachable.
	eventually(t, 30*time.Second, leader.id+" reports etcd unreachable", func() bool {
		f := leader.fleet()
		return !f.EtcdUp && !f.Leader && f.EtcdErrors > 0
	})
	leader.agents.set(agentOf(rsA), 1.8) // would move A if it still decided
	leader.waitCycles(t, 3)
	if w := leader.weights(t); !sameWeights(w, held) {
		t.Fatalf("cut-off %s changed its table: %v, held %v", leader.id, w, held)
	}
	leader.agents.set(agentOf(rsA), 0.95)
	// Back: it follows and converges.
	leader.killMidCycle.Store(false)
	leader.proxy.Restore()
	eventually(t, 60*time.Second, leader.id+" follows and converges", func() bool {
		f := leader.fleet()
		return f.EtcdUp && !f.Leader && f.LeaderID == next.id && allEqual(t, ds)
	})

	// etcd down: every director holds its table (fail static). The tables
	// are taken once each director has seen etcd gone, and only then does
	// A's load move: a leader's cycle still running with etcd up may
	// write, one after it may not.
	c.Stop()
	for _, d := range ds {
		eventually(t, 30*time.Second, d.id+" sees etcd down", func() bool { return !d.fleet().EtcdUp })
	}
	before3 := map[string]map[netip.AddrPort]int{}
	for _, d := range ds {
		before3[d.id] = d.weights(t)
		d.agents.set(agentOf(rsA), 1.8)
	}
	for _, d := range ds {
		d.waitCycles(t, 4)
	}
	for _, d := range ds {
		if w := d.weights(t); !sameWeights(w, before3[d.id]) {
			t.Errorf("%s changed its table with etcd down: %v, was %v", d.id, w, before3[d.id])
		}
		if f := d.fleet(); f.EtcdUp || f.Leader {
			t.Errorf("%s with etcd down: status %+v", d.id, f)
		}
	}
}

// TestFleetJoinDryRunHandover: a director joining a running fleet
// converges in its first cycle; one run with -dry-run never leads and
// never writes; a leader stopped (lease revoked) is replaced and its
// successor continues from the stored state.
func TestFleetJoinDryRunHandover(t *testing.T) {
	c := etcdtest.Start(t, 1)
	d1, d2, d3 := newFleetMember(t, "dir1", c.Members[0]), newFleetMember(t, "dir2", c.Members[0]), newFleetMember(t, "dir3", c.Members[0])
	for _, d := range []*fleetMember{d1, d2, d3} {
		d.agents.set(agentOf(rsB), 1.5)
	}
	d1.start(t, false)
	eventually(t, 60*time.Second, "dir1 leads and lowers B", func() bool { return d1.fleet().Leader && d1.weights(t)[rsB] < 5 })
	must(t, d1.m.Drain(svcKey, rsC))
	d1.waitCycles(t, 2)

	d2.start(t, false)
	eventually(t, 60*time.Second, "dir2's first cycle", func() bool { return d2.cycleCount() >= 1 })
	// Its first cycle read the document and applied it.
	if w, want := d2.weights(t), d1.weights(t); w[rsB] >= 5 || w[rsC] != 0 {
		t.Fatalf("dir2 after its first cycle: %v; the leader's %v", w, want)
	}
	d3.start(t, true)
	d3.waitCycles(t, 3)
	if w := d3.weights(t); w[rsA] != 10 || w[rsB] != 10 || w[rsC] != 10 {
		t.Fatalf("the dry-run director wrote its table: %v", w)
	}
	if d3.fleet().Leader {
		t.Fatal("the dry-run director leads")
	}

	ctrlB := d1.weights(t)[rsB]
	d1.stop() // resigns: its lease is revoked
	stopped := time.Now()
	eventually(t, 30*time.Second, "dir2 leads", func() bool { return d2.fleet().Leader })
	t.Logf("handover after a clean stop: %v", time.Since(stopped))
	d2.waitCycles(t, 2)
	if w := d2.weights(t); w[rsC] != 0 || w[rsB] > ctrlB+2 {
		t.Fatalf("dir2 leading: %v; want C still drained and B near %d", w, ctrlB)
	}
	if d3.fleet().Leader || d3.fleet().LeaderID != "dir2" {
		t.Fatalf("dir3's view: %+v", d3.fleet())
	}

	// A malformed document: dir3 applies nothing of it and counts it; a
	// new leader (dir4) continues from its own state and replaces it.
	d2.stop()
	d4 := newFleetMember(t, "dir4", c.Members[0])
	held := d3.weights(t)
	errs := d3.fleet().EtcdErrors
	if _, err := c.Client(t).Put(context.Background(), "/fleet-test/state", "lvs-feedback-state 1 dir9 999999 1\ns 192.0.2.10:80/tcp\nd 198.51.100.11:80 managed 99999 10 0 0 0 - 0 0 0 0\n"); err != nil {
		t.Fatal(err)
	}
	d3.waitCycles(t, 3)
	if f := d3.fleet(); f.EtcdErrors <= errs || !f.EtcdUp {
		t.Fatalf("dir3 after a malformed document: %+v; want errors counted, etcd still up", f)
	}
	if w := d3.weights(t); !sameWeights(w, held) {
		t.Fatalf("dir3 applied a malformed document: %v, had %v", w, held)
	}
	d4.start(t, false)
	eventually(t, 60*time.Second, "dir4 leads and replaces the document", func() bool {
		r, err := c.Client(t).Get(context.Background(), "/fleet-test/state")
		if err != nil || len(r.Kvs) != 1 {
			return false
		}
		doc, err := fleet.DecodeDocument(r.Kvs[0].Value)
		return err == nil && doc.Leader == "dir4" && d4.fleet().Leader
	})
	eventually(t, 30*time.Second, "dir3 reads the new document", func() bool { return d3.fleet().DocRevision == d4.fleet().DocRevision })
}
