package monitor

import "testing"

// TestReplicationString: the operator's reply says where a request holds.
func TestReplicationString(t *testing.T) {
	unreachable := "peer unreachable (dir-b, 10.0.0.2:9773: connect: connection refused)"
	for _, tt := range []struct {
		r    Replication
		want string
	}{
		{Replication{Verb: "drained"}, "drained"},
		{Replication{Verb: "drained", Peers: []string{"dir-b"}, Confirmed: []string{"dir-b"}}, "drained on both directors"},
		{Replication{Verb: "undrained", Peers: []string{"b", "c"}, Confirmed: []string{"b", "c"}}, "undrained on all 3 directors"},
		{Replication{Verb: "drained", Peers: []string{"dir-b"}, Missing: []string{unreachable}}, "drained here only: " + unreachable},
		{Replication{Verb: "drained", Peers: []string{"b", "c"}, Confirmed: []string{"b"}, Missing: []string{"c did not confirm within 2.4s"}},
			"drained here and on b; not on the others: c did not confirm within 2.4s"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.r, got, tt.want)
		}
		if tt.r.Everywhere() != (len(tt.r.Missing) == 0) {
			t.Errorf("%+v: Everywhere %v", tt.r, tt.r.Everywhere())
		}
	}
}
