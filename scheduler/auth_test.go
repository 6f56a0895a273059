package scheduler

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"lvs-feedback/replica"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeKeyFile(t *testing.T, content []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sync.key")
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadKey(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef-secret")
	for _, mode := range []os.FileMode{0o600, 0o400} {
		k, err := LoadKey(writeKeyFile(t, secret, mode))
		if err != nil {
			t.Errorf("mode %04o: %v", mode, err)
			continue
		}
		if !bytes.Equal(k.b, secret) {
			t.Errorf("mode %04o: key bytes differ", mode)
		}
	}
	refused := []struct {
		name string
		path func() string
		want string
	}{
		{"group-readable", func() string { return writeKeyFile(t, secret, 0o640) }, "mode 0640"},
		{"world-readable", func() string { return writeKeyFile(t, secret, 0o644) }, "chmod 600"},
		{"group-writable", func() string { return writeKeyFile(t, secret, 0o620) }, "mode 0620"},
		{"short", func() string { return writeKeyFile(t, secret[:31], 0o600) }, "31 bytes, need at least 32"},
		{"empty", func() string { return writeKeyFile(t, nil, 0o600) }, "0 bytes"},
		{"huge", func() string { return writeKeyFile(t, bytes.Repeat(secret, 200), 0o600) }, "larger than"},
		{"directory", func() string { d := filepath.Join(t.TempDir(), "d"); os.Mkdir(d, 0o700); return d }, "not a regular file"},
		{"missing", func() string { return filepath.Join(t.TempDir(), "none") }, "no such file"},
	}
	if os.Geteuid() == 0 {
		refused = append(refused, struct {
			name string
			path func() string
			want string
		}{"other owner", func() string {
			p := writeKeyFile(t, secret, 0o600)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return p
		}, "owned by uid 65534"})
	}
	for _, c := range refused {
		_, err := LoadKey(c.path())
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not say %q", c.name, err, c.want)
		}
		if containsAny(err.Error(), string(secret), string(secret[:16]), hex.EncodeToString(secret[:8])) {
			t.Errorf("%s: error shows the key: %q", c.name, err)
		}
	}
}

// TestKeyNeverPrints formats a key every way a careless log line could.
func TestKeyNeverPrints(t *testing.T) {
	secret := []byte("s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t!")
	k, err := NewKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		fmt.Fprintf(&out, f+"\n", k)
	}
	fmt.Fprintf(&out, "%v %+v\n", struct{ K *Key }{k}, VerifierConfig{Key: k})
	j, _ := json.Marshal(struct{ K *Key }{k})
	out.Write(j)
	log := slog.New(slog.NewJSONHandler(&out, nil))
	log.Info("x", "key", k, "cfg", PusherConfig{Key: k})
	log = slog.New(slog.NewTextHandler(&out, nil))
	log.Info("x", "key", k, "cfg", ListenerConfig{Key: k})
	s := out.String()
	if containsAny(s, string(secret), "s3cr3t", hex.EncodeToString(secret[:6]), fmt.Sprint(secret[:6])) {
		t.Errorf("the key leaked:\n%s", s)
	}
	if !strings.Contains(s, "[redacted]") {
		t.Errorf("no redaction marker:\n%s", s)
	}
	if _, err := NewKey(secret[:31]); err == nil {
		t.Error("NewKey accepted a 31-byte key")
	}
}

// frameFor seals m with k, answering testNonce, failing the test on error.
func frameFor(t testing.TB, k *Key, m Message) []byte {
	t.Helper()
	f, err := Seal(k, m, testNonce)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// resealed recomputes both MACs of a frame that a test altered.
func resealed(k *Key, f []byte) []byte {
	f = bytes.Clone(f)
	n := fixedHeader + int(f[50]) + macLen
	copy(f[n-macLen:n], k.mac([]byte(headerMACTag), f[:n-macLen]))
	end := len(f) - macLen
	copy(f[end:], k.mac(f[:end]))
	return f
}

// TestVerifyRejections feeds one verifier a sequence of frames and checks
// each verdict and that every reason is counted under its own label.
func TestVerifyRejections(t *testing.T) {
	k := testKey(t, 1)
	other := testKey(t, 2)
	now := time.Unix(1700000000, 0)
	v, err := NewVerifier(VerifierConfig{Key: k, Self: "b", Senders: []string{"a", "c"}, MaxAge: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	msg := func(epoch, seq uint64) Message {
		return Message{Sender: "a", Epoch: epoch, Seq: seq, SentAt: now, Writer: true, Snapshot: sampleSnapshot()}
	}
	good := frameFor(t, k, msg(5, 10))
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	v3 := frameFor(t, k, msg(5, 11))
	binary.BigEndian.PutUint16(v3[4:6], 3)
	v3 = resealed(k, v3)
	v3wrongKey := resealed(other, v3)
	v1 := binary.BigEndian.AppendUint32(nil, 200)
	v1 = append(v1, "LVSY\x00\x01"...)
	v1 = append(v1, bytes.Repeat([]byte{0}, 60)...)
	badJSON, err := sealPayload(k, &Message{Version: Version, Sender: "a", Epoch: 5, Seq: 12, SentAt: now}, testNonce, []byte(`{"services":[{"svc":"nonsense","dests":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	own := frameFor(t, k, Message{Sender: "b", Epoch: 9, Seq: 1, SentAt: now})
	stranger := frameFor(t, k, Message{Sender: "x", Epoch: 9, Seq: 1, SentAt: now})
	badMagic := bytes.Clone(good)
	copy(badMagic, "HTTP")
	badMagic = resealed(k, badMagic)
	otherChallenge, err := Seal(k, msg(5, 10), Nonce{9})
	if err != nil {
		t.Fatal(err)
	}
	huge := bytes.Clone(good)
	binary.BigEndian.PutUint32(huge[46:50], MaxFrameSize)
	huge = resealed(k, huge)
	old := msg(6, 1)
	old.SentAt = now.Add(-2 * time.Minute)
	future := msg(6, 2)
	future.SentAt = now.Add(2 * time.Minute)
	ch := Challenge{Nonce: testNonce, Issued: now.Add(-time.Second)}
	stale := Challenge{Nonce: testNonce, Issued: now.Add(-DefaultChallengeLifetime - time.Second)}

	steps := []struct {
		name  string
		frame []byte
		ch    *Challenge // nil: ch
		want  error      // nil: accepted
	}{
		{"oversized", make([]byte, MaxFrameSize+1), nil, ErrTooLarge},
		{"empty", nil, nil, ErrTruncated},
		{"truncated header", good[:20], nil, ErrTruncated},
		{"header without its MAC", good[:fixedHeader+1], nil, ErrTruncated},
		{"garbage", bytes.Repeat([]byte{0xA5}, 500), nil, ErrMalformed},
		{"bad magic, valid MACs", badMagic, nil, ErrMalformed},
		{"a version 1 stream", v1, nil, ErrVersion},
		{"truncated payload", good[:len(good)-40], nil, ErrTruncated},
		{"trailing bytes", append(bytes.Clone(good), 0), nil, ErrMalformed},
		{"flipped bit", flipped, nil, ErrBadMAC},
		{"wrong key", frameFor(t, other, msg(5, 10)), nil, ErrBadMAC},
		{"version 3, wrong key: MAC first", v3wrongKey, nil, ErrBadMAC},
		{"version 3", v3, nil, ErrVersion},
		{"own id", own, nil, ErrOwnSender},
		{"unknown sender", stranger, nil, ErrUnknownSender},
		{"another connection's challenge", otherChallenge, nil, ErrChallenge},
		{"challenge too old", good, &stale, ErrExpired},
		{"announced size over the bound", huge, nil, ErrTooLarge},
		{"malformed payload, valid MACs", badJSON, nil, ErrMalformed},
		{"good", good, nil, nil},
		{"replayed", good, nil, ErrReplay},
		{"older sequence", frameFor(t, k, msg(5, 9)), nil, ErrReplay},
		{"next sequence", frameFor(t, k, msg(5, 11)), nil, nil},
		{"new epoch, sequence restarts", frameFor(t, k, msg(6, 1)), nil, nil},
		{"old epoch", frameFor(t, k, msg(5, 99)), nil, ErrStaleEpoch},
		{"too old", frameFor(t, k, old), nil, ErrReplay},
		{"sent too long ago", frameFor(t, k, func() Message { m := old; m.Seq = 5; return m }()), nil, ErrExpired},
		{"from the future", frameFor(t, k, func() Message { m := future; m.Seq = 6; return m }()), nil, ErrExpired},
		{"expiry did not advance the position", frameFor(t, k, msg(6, 3)), nil, nil},
		{"other sender has its own position", frameFor(t, k, Message{Sender: "c", Epoch: 1, Seq: 1, SentAt: now}), nil, nil},
	}
	want := map[string]uint64{}
	for _, s := range steps {
		c := ch
		if s.ch != nil {
			c = *s.ch
		}
		_, err := v.Verify(s.frame, c)
		switch {
		case s.want == nil && err != nil:
			t.Errorf("%s: rejected: %v", s.name, err)
		case s.want != nil && !errors.Is(err, s.want):
			t.Errorf("%s: err = %v, want %v", s.name, err, s.want)
		}
		label := "accepted"
		if s.want != nil {
			label = RejectReason(s.want)
			if RejectReason(err) != label {
				t.Errorf("%s: reason %q, want %q", s.name, RejectReason(err), label)
			}
		}
		want[label]++
		if err != nil && containsAny(err.Error(), string(k.b), string(other.b)) {
			t.Errorf("%s: error shows a key", s.name)
		}
	}
	got := v.Counters().Snapshot()
	for label, n := range want {
		if got[label] != n {
			t.Errorf("counter %s = %d, want %d", label, got[label], n)
		}
	}
	if len(got) != len(reasons)+1 || len(reasons) != numReasons {
		t.Errorf("counters %v: want one per reason plus accepted", got)
	}
	// Every reason is a distinct error.
	for i, a := range reasons {
		for j, b := range reasons {
			if i != j && errors.Is(a.err, b.err) {
				t.Errorf("%v is %v", a.err, b.err)
			}
		}
	}
}

// TestVerifyHeaderAlone: the header decides, before the payload is read,
// everything it can; a header that passes gives the frame's size.
func TestVerifyHeaderAlone(t *testing.T) {
	k := testKey(t, 1)
	v, _ := NewVerifier(VerifierConfig{Key: k, Self: "b"})
	good := frameFor(t, k, Message{Sender: "a", Epoch: 1, Seq: 1, Writer: true, Snapshot: sampleSnapshot()})
	n := fixedHeader + 1 + macLen
	size, err := v.VerifyHeader(good[:n], fresh())
	if err != nil || size != len(good) {
		t.Fatalf("VerifyHeader = %d, %v; want %d", size, err, len(good))
	}
	if got := v.Counters().Snapshot(); got["accepted"] != 0 {
		t.Errorf("a header that passed was counted: %v", got)
	}
	forged := bytes.Clone(good[:n])
	forged[30]++ // another sequence number, the MAC left as it was
	if _, err := v.VerifyHeader(forged, fresh()); !errors.Is(err, ErrBadMAC) {
		t.Errorf("altered header: %v", err)
	}
	if _, err := v.VerifyHeader(good[:n], Challenge{Nonce: Nonce{1}, Issued: time.Now()}); !errors.Is(err, ErrChallenge) {
		t.Errorf("header for another challenge: %v", err)
	}
	if got := v.Counters().Snapshot(); got["bad_mac"] != 1 || got["challenge"] != 1 {
		t.Errorf("rejections not counted: %v", got)
	}
}

// FuzzVerify: no input panics the verifier, and nothing but a correctly
// sealed frame answering the challenge is ever accepted.
func FuzzVerify(f *testing.F) {
	k := testKey(f, 1)
	good := frameFor(f, k, Message{Sender: "a", Epoch: 1, Seq: 1, Writer: true, Snapshot: sampleSnapshot()})
	f.Add(good)
	f.Add(good[:40])
	f.Add(good[:fixedHeader+1+macLen])
	f.Add([]byte("LVSY"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _ := NewVerifier(VerifierConfig{Key: k, Self: "b"})
		m, err := v.Verify(b, fresh())
		if err != nil {
			if RejectReason(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if !bytes.Equal(b, good) {
			// An accepted frame must carry valid MACs over its bytes.
			h, err := parseHeader(b)
			end := len(b) - macLen
			if err != nil || !k.equalMAC(h.mac, []byte(headerMACTag), h.signed) || !k.equalMAC(b[end:], b[:end]) || h.nonce != testNonce {
				t.Fatalf("accepted a frame without valid MACs: %+v", m)
			}
		}
	})
}

// FuzzPayload: with valid MACs (a peer holding the key, but buggy), no
// payload panics the parser, and whatever is accepted is a valid message
// that seals again.
func FuzzPayload(f *testing.F) {
	k := testKey(f, 1)
	m := Message{Writer: true, Snapshot: sampleSnapshot(), Edits: []replica.Edit{{Pos: replica.EditPos{Epoch: 1, ID: 2}, Key: simKeys[0], Weight: 3}}, Acks: []replica.Ack{{Peer: "b", Pos: replica.EditPos{Epoch: 1, ID: 1}}},
		Heard: []PeerEpoch{{Peer: "b", Epoch: 3}}}
	p, err := encodePayload(&m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"services":[{"svc":"fwmark:1","dests":[{"a":"10.0.0.1:0","s":"down","w":0,"c":1e308}]}]}`))
	f.Add([]byte(`{"heard":[{"peer":"","e":1}]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		hdr := Message{Version: Version, Sender: "a", Epoch: 1, Seq: 1}
		frame, err := sealPayload(k, &hdr, testNonce, payload)
		if err != nil {
			return // over the size bound
		}
		v, _ := NewVerifier(VerifierConfig{Key: k, Self: "b"})
		got, err := v.Verify(frame, fresh())
		if err != nil {
			if RejectReason(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		got.Sender, got.Seq = "a", 2
		if _, err := Seal(k, got, testNonce); err != nil {
			t.Fatalf("accepted a message that does not seal again: %v", err)
		}
	})
}

// FuzzVerifyHeader: what a listener reads before a frame authenticates
// never panics the header check, is accepted only with a valid header MAC
// for the challenge, and never announces more than MaxFrameSize.
func FuzzVerifyHeader(f *testing.F) {
	k := testKey(f, 1)
	good := frameFor(f, k, Message{Sender: "dir-a", Epoch: 1, Seq: 1, Writer: true, Snapshot: sampleSnapshot()})
	f.Add(good[:fixedHeader+5+macLen])
	f.Add(good[:fixedHeader])
	f.Add(append(binary.BigEndian.AppendUint32(nil, 100), "LVSY\x00\x01"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _ := NewVerifier(VerifierConfig{Key: k, Self: "b"})
		size, err := v.VerifyHeader(b, fresh())
		if err != nil {
			if RejectReason(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		h, err := parseHeader(b)
		if err != nil || !k.equalMAC(h.mac, []byte(headerMACTag), h.signed) || h.nonce != testNonce {
			t.Fatalf("accepted a header without a valid MAC for the challenge: %x", b)
		}
		if size > MaxFrameSize || size < h.size+macLen {
			t.Fatalf("accepted header announces %d bytes", size)
		}
	})
}

// FuzzPusherReplies: what a listener (or anyone on the peer's port) sends
// a pusher — the hello and the acknowledgements — never panics it; an
// acknowledgement is accepted only with a valid MAC, a hello only in the
// exact form this version sends.
func FuzzPusherReplies(f *testing.F) {
	k := testKey(f, 1)
	f.Add(appendHello(nil, testNonce))
	f.Add(makeAck(k, 0, 1, 2, testNonce))
	f.Add(makeAck(k, verdictCode(ErrReplay), 7, 9, Nonce{}))
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := parseHello(b); err == nil && !bytes.Equal(appendHello(nil, n), b) {
			t.Fatalf("accepted hello %x", b)
		}
		a, err := parseAck(k, b)
		if err != nil {
			return
		}
		if !bytes.Equal(makeAck(k, a.code, a.epoch, a.seq, a.next), b) {
			t.Fatalf("accepted acknowledgement %x without its MAC", b)
		}
		_ = verdictText(a.code)
	})
}
