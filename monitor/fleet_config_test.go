package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const fleetMinimal = minimal + `[sync]
id = "dir1"
backend = "etcd"
[sync.etcd]
endpoints = ["http://127.0.0.1:2379"]
directors = ["dir1", "dir2"]
`

func TestFleetConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig("fleet.toml", []byte(fleetMinimal))
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Sync.Etcd
	if !cfg.Sync.Fleet() || e.Prefix != "/lvs-feedback/" || e.LeaseTTL != 15*time.Second || e.DialTimeout != 5*time.Second {
		t.Fatalf("fleet defaults: fleet %v %+v; want prefix /lvs-feedback/, lease 3 × 5 s, dial 5 s", cfg.Sync.Fleet(), e)
	}
	pair, err := ParseConfig("pair.toml", []byte(minimal+"[sync]\nid = \"a\"\nlisten = \"127.0.0.1:9773\"\nkey_file = \"/k\"\nrole = \"active\"\n[[sync.peer]]\nid = \"b\"\naddress = \"127.0.0.1:9774\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if pair.Sync.Fleet() || pair.Sync.Backend != "pair" {
		t.Fatalf("a pair config: fleet %v backend %q", pair.Sync.Fleet(), pair.Sync.Backend)
	}
}

// TestFleetConfigErrors: every misuse is named by its key.
func TestFleetConfigErrors(t *testing.T) {
	open := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(open, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ add, key string }{
		"pair key listen":     {"listen = \"127.0.0.1:9773\"\n", "sync.listen"},
		"pair key role":       {"role = \"active\"\n", "sync.role"},
		"pair peers":          {"[[sync.peer]]\nid = \"b\"\naddress = \"127.0.0.1:1\"\n", "sync.peer"},
		"no endpoints":        {"[sync.etcd]\nendpoints = []\n", "sync.etcd.endpoints"},
		"endpoint not URL":    {"[sync.etcd]\nendpoints = [\"127.0.0.1:2379\"]\n", "sync.etcd.endpoints[0]"},
		"prefix":              {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nprefix = \"/x\"\n", "sync.etcd.prefix"},
		"lease below 2 s":     {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nlease_ttl = \"1s\"\n", "sync.etcd.lease_ttl"},
		"lease fraction":      {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nlease_ttl = \"10500ms\"\n", "sync.etcd.lease_ttl"},
		"lease below 2 ivals": {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nlease_ttl = \"8s\"\n", "sync.etcd.lease_ttl"},
		"cert without key":    {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\ncert_file = \"/c.pem\"\n", "sync.etcd.cert_file"},
		"relative ca":         {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nca_file = \"ca.pem\"\n", "sync.etcd.ca_file"},
		"user without pw":     {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nusername = \"u\"\n", "sync.etcd.username"},
		"no directors list":   {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n", "sync.etcd.directors"},
		"self not listed":     {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\ndirectors = [\"dir2\", \"dir3\"]\n", "sync.etcd.directors"},
		"director twice":      {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\ndirectors = [\"dir1\", \"dir2\", \"dir2\"]\n", "sync.etcd.directors[2]"},
		"director id":         {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\ndirectors = [\"dir1\", \"dir 2\"]\n", "sync.etcd.directors[1]"},
		"pw file readable":    {"[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nusername = \"u\"\npassword_file = \"" + open + "\"\n", "sync.etcd.password_file"},
	}
	for name, c := range cases {
		conf := minimal + "[sync]\nid = \"dir1\"\nbackend = \"etcd\"\n" + c.add
		if !strings.Contains(c.add, "[sync.etcd]") {
			conf = minimal + "[sync]\nid = \"dir1\"\nbackend = \"etcd\"\n" + c.add + "[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n"
			if strings.HasPrefix(c.add, "[[") { // an array table ends [sync]: the etcd table goes first
				conf = minimal + "[sync]\nid = \"dir1\"\nbackend = \"etcd\"\n[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n" + c.add
			}
		}
		_, err := ParseConfig("bad.toml", []byte(conf))
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: error %v, want one naming %s", name, err, c.key)
		}
	}
	if _, err := ParseConfig("bad.toml", []byte(minimal+"[sync]\nid = \"dir1\"\nbackend = \"raft\"\n")); err == nil || !strings.Contains(err.Error(), "sync.backend") {
		t.Errorf("unknown backend: %v", err)
	}
	if _, err := ParseConfig("bad.toml", []byte(minimal+"[sync]\nid = \"a\"\nlisten = \"127.0.0.1:9773\"\nkey_file = \"/k\"\nrole = \"active\"\n[sync.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n[[sync.peer]]\nid = \"b\"\naddress = \"127.0.0.1:9774\"\n")); err == nil || !strings.Contains(err.Error(), "sync.etcd.endpoints") {
		t.Errorf("etcd keys in a pair: %v", err)
	}
	if _, err := ParseConfig("bad.toml", []byte(minimal+"[sync]\nbackend = \"etcd\"\n")); err == nil || !strings.Contains(err.Error(), "sync.id") {
		t.Errorf("fleet without id: %v", err)
	}
}

// TestFleetMetrics: the fleet series follow the status; the error counter
// counts the client's failures once each.
func TestFleetMetrics(t *testing.T) {
	x := NewMetrics(prometheus.NewRegistry())
	x.observeFleet(FleetStatus{Leader: true, EtcdUp: true, Directors: 3, DocRevision: 17, EtcdErrors: 2, CountersRefused: 4})
	x.observeFleet(FleetStatus{Leader: false, EtcdUp: false, Directors: 2, DocRevision: 17, EtcdErrors: 5, DocumentsRefused: 3, CountersRefused: 4})
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"leader", testutil.ToFloat64(x.fleetLeader), 0},
		{"sync_writer", testutil.ToFloat64(x.syncWriter), 0},
		{"etcd up", testutil.ToFloat64(x.fleetEtcdUp), 0},
		{"directors", testutil.ToFloat64(x.fleetDirectors), 2},
		{"revision", testutil.ToFloat64(x.fleetDocRevision), 17},
		{"errors", testutil.ToFloat64(x.fleetEtcdErrors), 5},
		{"documents refused", testutil.ToFloat64(x.fleetDocRefused), 3},
		{"counters refused", testutil.ToFloat64(x.fleetCtrRefused), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
