package scheduler

import (
	"bytes"
	"errors"
	"lvs-feedback/policy"
	"lvs-feedback/replica"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestSealVerifyRoundTrip(t *testing.T) {
	k := testKey(t, 1)
	sent := time.Unix(1700000000, 123456789)
	in := Message{
		Sender: "dir-a", Epoch: 7, Seq: 42, SentAt: sent, Writer: true,
		Snapshot: sampleSnapshot(),
		Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 3, ID: 9}, Key: key(svcWeb, "198.51.100.1:80"), Weight: 0, Op: replica.OpDrain},
			{Pos: replica.EditPos{Epoch: 3, ID: 10}, Key: key(svcWeb, "198.51.100.2:80"), Weight: 10, Op: replica.OpUndrain},
			{Pos: replica.EditPos{Epoch: 3, ID: 11}, Key: key(svcWeb, "198.51.100.3:80"), Weight: 7}},
		Acks:    []replica.Ack{{Peer: "dir-b", Pos: replica.EditPos{Epoch: 2, ID: 5}}},
		Heard:   []PeerEpoch{{Peer: "dir-b", Epoch: 4}, {Peer: "dir-c", Epoch: 1}},
		Gen:     19,
		Adopted: replica.Adoption{Writer: "dir-c", Epoch: 6, Gen: 88},
	}
	frame, err := Seal(k, in, testNonce)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewVerifier(VerifierConfig{Key: k, Self: "dir-b"})
	out, err := v.Verify(frame, fresh())
	if err != nil {
		t.Fatal(err)
	}
	in.Version = Version
	// The snapshot comes back sorted by key; sampleSnapshot is not.
	want := in
	want.Snapshot = replica.Snapshot{Dests: sortedDests(in.Snapshot.Dests)}
	if !out.SentAt.Equal(want.SentAt) {
		t.Errorf("SentAt %v, want %v", out.SentAt, want.SentAt)
	}
	out.SentAt = want.SentAt
	if !reflect.DeepEqual(out, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, want)
	}
	if got := v.Counters().Accepted(); got != 1 {
		t.Errorf("accepted = %d", got)
	}
}

func sortedDests(d []replica.DestState) []replica.DestState {
	out := slices.Clone(d)
	slices.SortFunc(out, func(a, b replica.DestState) int { return replica.CompareKeys(a.Key, b.Key) })
	return out
}

func TestEncodingIsDeterministic(t *testing.T) {
	k := testKey(t, 1)
	a := Message{Sender: "a", Epoch: 1, Seq: 1, SentAt: time.Unix(1, 0), Snapshot: sampleSnapshot()}
	b := a
	b.Snapshot = replica.Snapshot{Dests: sortedDests(a.Snapshot.Dests)}
	fa, _ := Seal(k, a, testNonce)
	fb, _ := Seal(k, b, testNonce)
	if !bytes.Equal(fa, fb) {
		t.Error("the same state in another order encodes differently")
	}
}

func TestSealRefusesInvalidMessages(t *testing.T) {
	k := testKey(t, 1)
	good := sampleSnapshot().Dests[0]
	cases := map[string]Message{
		"empty sender":      {Sender: ""},
		"bad sender":        {Sender: "a b"},
		"long sender":       {Sender: string(bytes.Repeat([]byte("x"), 65))},
		"unknown state":     {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: good.Key, State: "maintenance"}}}},
		"unknown set_by":    {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: good.Key, State: replica.StateManaged, SetBy: "cron"}}}},
		"negative weight":   {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: good.Key, State: replica.StateManaged, Weight: -1}}}},
		"weight too large":  {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: good.Key, State: replica.StateManaged, Weight: 65536}}}},
		"duplicate":         {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{good, good}}},
		"no dest addr":      {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: replica.DestKey{Service: svcWeb}, State: replica.StateManaged}}}},
		"negative ctrl":     {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: good.Key, State: replica.StateManaged, Carried: policy.Carried{Ctrl: -1, CtrlSet: true}}}}},
		"negative ramp":     {Sender: "a", Snapshot: replica.Snapshot{Dests: []replica.DestState{{Key: good.Key, State: replica.StateManaged, Carried: policy.Carried{Ramping: true, RampElapsed: -1}}}}},
		"bad ack peer":      {Sender: "a", Acks: []replica.Ack{{Peer: ""}}},
		"bad edit weight":   {Sender: "a", Edits: []replica.Edit{{Key: good.Key, Weight: 70000}}},
		"bad heard peer":    {Sender: "a", Heard: []PeerEpoch{{Peer: "b c", Epoch: 1}}},
		"drain to a weight": {Sender: "a", Edits: []replica.Edit{{Key: good.Key, Weight: 5, Op: replica.OpDrain}}},
		"unknown edit op":   {Sender: "a", Edits: []replica.Edit{{Key: good.Key, Op: "reboot"}}},
		"bad adopted":       {Sender: "a", Adopted: replica.Adoption{Writer: "x y", Epoch: 1}},
	}
	for name, m := range cases {
		if _, err := Seal(k, m, testNonce); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

// bigSnapshot returns n managed destinations spread over services of 100.
func bigSnapshot(n int) replica.Snapshot {
	var s replica.Snapshot
	for i := range n {
		svc := svcWeb
		svc.Addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i / 100 / 250)}), uint16(1000+i/100))
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 8080)
		s.Dests = append(s.Dests, replica.DestState{
			Key: replica.DestKey{Service: svc, Dest: dst}, State: replica.StateManaged, Weight: 100 + i%50, DefaultWeight: 100,
			Carried: policy.Carried{Ctrl: 100.123456789 + float64(i%50), CtrlSet: true},
		})
	}
	return s
}

func TestFrameSizeBound(t *testing.T) {
	k := testKey(t, 1)
	small, err := Seal(k, Message{Sender: "a", Snapshot: bigSnapshot(1000)}, testNonce)
	if err != nil {
		t.Fatal(err)
	}
	perDest := float64(len(small)) / 1000
	capacity := int(float64(MaxFrameSize) / perDest)
	t.Logf("frame: %.0f bytes per managed destination; MaxFrameSize %d holds about %d destinations", perDest, MaxFrameSize, capacity)
	if capacity < 20000 {
		t.Errorf("the frame bound holds only %d destinations", capacity)
	}
	if _, err := Seal(k, Message{Sender: "a", Snapshot: bigSnapshot(capacity * 2)}, testNonce); !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalid) {
		t.Errorf("oversized snapshot: err = %v, want ErrInvalid and ErrTooLarge", err)
	}
}

func BenchmarkSeal10k(b *testing.B) {
	k := testKey(b, 1)
	m := Message{Sender: "a", Snapshot: bigSnapshot(10000)}
	for b.Loop() {
		if _, err := Seal(k, m, testNonce); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify10k(b *testing.B) {
	k := testKey(b, 1)
	frame, err := Seal(k, Message{Sender: "a", Seq: 1, Snapshot: bigSnapshot(10000)}, testNonce)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		v, _ := NewVerifier(VerifierConfig{Key: k, Self: "b"})
		if _, err := v.Verify(frame, fresh()); err != nil {
			b.Fatal(err)
		}
	}
}
