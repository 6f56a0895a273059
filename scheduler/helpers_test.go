package scheduler

import (
	"bytes"
	"context"
	"lvs-feedback/replica"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// testKey returns a 32-byte key filled with b.
func testKey(t testing.TB, b byte) *Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	svcWeb = ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.MustParseAddrPort("192.0.2.10:80")}
	svcDNS = ipvs.ServiceKey{Protocol: ipvs.UDP, Addr: netip.MustParseAddrPort("[2001:db8::53]:53")}
	svcFW  = ipvs.ServiceKey{FWMark: 7, Family: ipvs.IPv4}
)

func key(svc ipvs.ServiceKey, dst string) replica.DestKey {
	return replica.DestKey{Service: svc, Dest: netip.MustParseAddrPort(dst)}
}

// sampleSnapshot has one destination of every kind.
func sampleSnapshot() replica.Snapshot {
	return replica.Snapshot{Dests: []replica.DestState{
		{Key: key(svcWeb, "198.51.100.1:80"), State: replica.StateManaged, Weight: 12, DefaultWeight: 10, SetBy: policy.ByMonitor, Carried: policy.Carried{Ctrl: 12.345678901234567, CtrlSet: true}},
		{Key: key(svcWeb, "198.51.100.2:80"), State: replica.StateDrained, Weight: 0, DefaultWeight: 10, DefaultOverride: 20, OverriddenConfig: 10, SetBy: policy.ByOperator, Held: true},
		{Key: key(svcWeb, "198.51.100.3:80"), State: replica.StateDown, Weight: 0, DefaultWeight: 10, RestoreWeight: 17, SetBy: policy.ByHealthChecker, Carried: policy.Carried{Ctrl: 17, CtrlSet: true}},
		{Key: key(svcDNS, "[2001:db8::1]:53"), State: replica.StateManaged, Weight: 3, DefaultWeight: 5, Carried: policy.Carried{Ctrl: 3.25, CtrlSet: true, Ramping: true, RampElapsed: 1500 * time.Millisecond}},
		{Key: key(svcFW, "198.51.100.9:0"), State: replica.StateManaged, Weight: 65535, DefaultWeight: 65535},
	}}
}

// leakCheck records the number of goroutines and, at cleanup, waits up to
// five seconds for it to come back (within a small tolerance for runtime
// and test-framework goroutines), failing with every stack if it does not.
func leakCheck(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		const tolerance = 2
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before+tolerance {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// waitFor polls cond every millisecond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// testNonce is the challenge the unit tests' frames answer.
var testNonce = Nonce{0x6c, 0x76, 0x73, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}

// fresh returns the test challenge, issued now.
func fresh() Challenge { return Challenge{Nonce: testNonce, Issued: time.Now()} }

// runPusher starts a pusher for cfg; stop ends it and waits for it.
func runPusher(t *testing.T, cfg PusherConfig) (p *Pusher, stop func()) {
	t.Helper()
	p, err := NewPusher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	return p, func() { cancel(); <-done }
}
