package main

import (
	"strings"
	"testing"
	"time"

	"lvs-feedback/control/api"
)

// TestStatusFleet: a fleet director's status names its role, the leader,
// whether etcd answers and the document revision.
func TestStatusFleet(t *testing.T) {
	cases := []struct {
		f    api.FleetStatus
		want []string
	}{
		{api.FleetStatus{Leader: true, LeaderID: "dir1", EtcdUp: true, LeaseOK: true, DocRevision: 42, Directors: 3},
			[]string{"fleet: dir1, LEADER: decides and writes the fleet's weights (leader dir1, 3 directors, document revision 42)", "  etcd reachable; 0 failed etcd operations"}},
		{api.FleetStatus{LeaderID: "dir2", EtcdUp: true, LeaseOK: true, DocRevision: 43, Directors: 3},
			[]string{"fleet: dir1, follower: applies the leader's weights (leader dir2, 3 directors, document revision 43)"}},
		{api.FleetStatus{EtcdUp: false, EtcdError: "context deadline exceeded", EtcdErrors: 7, DocRevision: 43},
			[]string{"(leader none known, 0 directors, document revision 43)", "  ETCD UNREACHABLE: table held (fail static): context deadline exceeded; 7 failed etcd operations"}},
		{api.FleetStatus{EtcdUp: true, LeaderID: "dir2"}, []string{"  etcd reachable, NO LEASE: table held"}},
		{api.FleetStatus{EtcdUp: true, LeaseOK: true, LeaderID: "dir2", DocumentsRefused: 3, CountersRefused: 5,
			Refused: "written by dir2 in term 9223372036854775807, but the elected leader is dir2 in term 41"},
			[]string{"  DOCUMENT REFUSED: table held: written by dir2 in term 9223372036854775807, but the elected leader is dir2 in term 41",
				"  refused: 3 documents, 5 director counters"}},
	}
	for _, c := range cases {
		var b strings.Builder
		printStatus(&b, api.Status{Now: time.Unix(0, 0), Services: []api.ServiceStatus{}, Sync: &api.SyncStatus{ID: "dir1", Role: "leader", Fleet: &c.f}}, time.UTC)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("status of %+v:\n%s\nwant a line with %q", c.f, b.String(), w)
			}
		}
		if strings.Contains(b.String(), "sync: ") {
			t.Errorf("a fleet director printed the pair's sync line:\n%s", b.String())
		}
	}
}
