package scheduler

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
	"lvs-feedback/scheduler/fleet"
)

// TestReloadChangesTheInterval: a reloaded interval applies without a
// restart, even while Run waits out a long one.
func TestReloadChangesTheInterval(t *testing.T) {
	cfg, err := monitor.ParseConfig("test.toml", []byte(cpuOnlyConfig))
	must(t, err)
	cfg.StateDir = t.TempDir()
	table := ipvs.NewMem()
	agents := newStubAgents()
	must(t, table.AddService(svcKey, "wrr"))
	for _, rs := range []netip.AddrPort{rsA, rsB, rsC} {
		must(t, table.AddDestination(svcKey, rs, 10))
		agents.set(agentOf(rs), 0.95) // at target: weights stay
	}
	store, err := monitor.NewFileStore(cfg.StateDir)
	must(t, err)
	cfg.Interval = time.Hour
	m, err := monitor.New(cfg, monitor.Deps{Table: table, Agents: agents, Prober: newStubProber(), Store: store}, false)
	must(t, err)
	cycles := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Run(ctx, m, Config{Monitor: cfg, AfterCycle: func(monitor.CycleReport, error) { cycles <- struct{}{} }})
	}()
	defer func() { cancel(); <-done }()
	<-cycles // the first cycle runs at once; the next would be an hour away
	cfg.Interval = 20 * time.Millisecond
	m.Reload(cfg)
	for i := range 3 {
		select {
		case <-cycles:
		case <-time.After(10 * time.Second):
			t.Fatalf("cycle %d after reloading a 20 ms interval did not come", i+2)
		}
	}
}

const fleetMinimal = `
interval = "5s"
[[service]]
address = "192.0.2.10:80/tcp"
[[service.server]]
address = "198.51.100.11:80"
weight = 10
[sync]
id = "dir1"
backend = "etcd"
[sync.etcd]
endpoints = ["http://127.0.0.1:2379"]
directors = ["dir1", "dir2"]
`

// TestFleetClientConfig: every [sync.etcd] key reaches the etcd client —
// the TLS and authentication keys were once lost behind a comment.
func TestFleetClientConfig(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "etcd-password")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := monitor.ParseConfig("fleet.toml", []byte(fleetMinimal+`prefix = "/lb/"
lease_ttl = "12s"
dial_timeout = "2s"
ca_file = "/etc/lvs/ca.pem"
cert_file = "/etc/lvs/dir1.pem"
key_file = "/etc/lvs/dir1.key"
username = "lvs"
password_file = "`+pw+`"
`))
	if err != nil {
		t.Fatal(err)
	}
	got := fleetClientConfig(cfg, true, nil)
	want := fleet.Config{ID: "dir1", Endpoints: []string{"http://127.0.0.1:2379"}, Prefix: "/lb/", LeaseTTL: 12 * time.Second,
		DialTimeout: 2 * time.Second, OpTimeout: 5 * time.Second, CAFile: "/etc/lvs/ca.pem", CertFile: "/etc/lvs/dir1.pem",
		KeyFile: "/etc/lvs/dir1.key", Username: "lvs", PasswordFile: pw, Observer: true, Members: []string{"dir1", "dir2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fleet client config\n got %+v\nwant %+v", got, want)
	}
}
