package fleet

import (
	"lvs-feedback/replica"
	"reflect"
	"strings"
	"testing"
)

func TestCountersRoundTrip(t *testing.T) {
	keys := benchKeys(250)
	c := Counters{Director: "dir-1", Start: 7, Cycle: 99}
	for i, k := range keys {
		c.Dests = append(c.Dests, DestCounters{Key: k, NewTotal: uint64(i * 1000), New: int64(i) - 1, Active: i, Inactive: 2 * i})
	}
	c.Edits = []replica.Edit{{Pos: replica.EditPos{Epoch: 7, ID: 3}, Key: keys[5], Weight: 0}, {Pos: replica.EditPos{Epoch: 7, ID: 4}, Key: keys[200], Weight: 17},
		{Pos: replica.EditPos{Epoch: 7, ID: 5}, Key: keys[6], Weight: 0, Op: replica.OpDrain}, {Pos: replica.EditPos{Epoch: 7, ID: 6}, Key: keys[7], Weight: 10, Op: replica.OpUndrain}}
	b, err := EncodeCounters(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCounters(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip differs:\n%+v\n%+v", got, c)
	}
}

func TestCountersMalformed(t *testing.T) {
	good := "lvs-feedback-counters 1 d1 1 2\ns 10.0.0.1:80/tcp\nd 10.0.1.1:80 5 1 2 3\n"
	if _, err := DecodeCounters([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		"", "{}", "lvs-feedback-counters 2 d1 1 2\n", "lvs-feedback-counters 1 d/1 1 2\n",
		"lvs-feedback-counters 1 d1 1 2\nd 10.0.1.1:80 5 1 2 3\n", // destination before a service
		strings.Replace(good, "5 1 2 3", "5 -2 2 3", 1),           // new below -1
		strings.Replace(good, "5 1 2 3", "5 1 -2 3", 1),           // negative active
		strings.Replace(good, "5 1 2 3", "5 1 2", 1),              // a field missing
		strings.Replace(good, "10.0.1.1:80", "10.0.1.1", 1),       // no port
		good + "e 10.0.1.1:80 1 2 70000\n",                        // edit weight out of range
		good + "e 10.0.1.1:80 1 2 5 drain\n",                      // a drain to a non-zero weight
		good + "e 10.0.1.1:80 1 2 0 erase\n",                      // an unknown request
		good + "e 10.0.1.1:80 1 2 0 drain x\n",                    // a field too many
		good + "x what\n",
	} {
		if _, err := DecodeCounters([]byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestDocumentRoundTrip(t *testing.T) {
	d := Document{Leader: "dir1", Term: 12, Cycle: 3, Acks: []replica.Ack{{Peer: "dir2", Pos: replica.EditPos{Epoch: 4, ID: 9}}}}
	for i, k := range benchKeys(20) {
		d.Snapshot.Dests = append(d.Snapshot.Dests, replica.DestState{Key: k, State: "managed", Weight: i, DefaultWeight: 10, SetBy: "lvs-monitor"})
	}
	d.Snapshot.Dests[3].Ctrl, d.Snapshot.Dests[3].CtrlSet = 4.25, true
	d.Snapshot.Dests[4].State, d.Snapshot.Dests[4].Weight, d.Snapshot.Dests[4].Held = "drained", 0, true
	b, err := EncodeDocument(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip differs:\n%+v\n%+v", got, d)
	}
	dup := d
	dup.Snapshot.Dests = append(dup.Snapshot.Dests, d.Snapshot.Dests[0])
	if b, _ := EncodeDocument(dup); true {
		if _, err := DecodeDocument(b); err == nil {
			t.Error("a destination listed twice decoded")
		}
	}
}

// TestDocumentInconsistent: a document whose records no leader writes —
// a default weight of 0, a drained or down server with a non-zero
// weight — is refused with an error naming the server and the rule.
func TestDocumentInconsistent(t *testing.T) {
	const head = "lvs-feedback-state 1 x 5 1\ns 10.0.0.1:80/tcp\n"
	for _, c := range []struct{ line, want string }{
		{"d 10.0.1.1:80 managed 10 0 0 0 0 lvs-monitor 10 1 0 0", "default weight 0 (a default weight is at least 1)"},
		{"d 10.0.1.1:80 drained 5 10 0 0 0 operator 0 0 0 0", "drained with weight 5 (a server out of rotation has weight 0)"},
		{"d 10.0.1.1:80 down 5 10 0 0 10 lvs-monitor 0 0 0 0", "down with weight 5"},
		{"d 10.0.1.1:80 managed 10 10 0 0 0 lvs-monitor 10 1 0 0 1", "held while managed (only an lvsctl drain is held)"},
		{"d 10.0.1.1:80 drained 0 10 0 0 0 operator 0 0 0 0 2", "unreadable held flag"},
	} {
		_, err := DecodeDocument([]byte(head + c.line + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "10.0.1.1:80") {
			t.Errorf("%s: %v; want an error saying %q", c.line, err, c.want)
		}
	}
	// The held flag is optional: a leader that does not write it holds no
	// drain.
	ok := head + "d 10.0.1.1:80 drained 0 10 0 0 0 operator 0 0 0 0\nd 10.0.1.2:80 down 0 10 0 0 10 lvs-monitor 0 0 0 0\nd 10.0.1.3:80 drained 0 10 0 0 10 operator 0 0 0 0 1\n"
	d, err := DecodeDocument([]byte(ok))
	if err != nil {
		t.Fatalf("a consistent document: %v", err)
	}
	if held := []bool{d.Snapshot.Dests[0].Held, d.Snapshot.Dests[2].Held}; held[0] || !held[1] {
		t.Errorf("held flags %v, want [false true]", held)
	}
}
