package scheduler

import (
	"bytes"
	"context"
	"io"
	"lvs-feedback/monitor"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"lvs-feedback/policy"
)

// syncRelay is a TCP proxy on the sync link, as an attacker would run one:
// it records what one director sends another, connection by connection,
// and can cut the link.
type syncRelay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	recs  []*syncRecorder
}

func newSyncRelay(t *testing.T, target string) *syncRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	r := &syncRelay{ln: ln, target: target}
	r.wg.Go(r.run)
	t.Cleanup(r.close)
	return r
}

func (r *syncRelay) addr() string { return r.ln.Addr().String() }

func (r *syncRelay) run() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		cut := r.cut
		r.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", r.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		rec := &syncRecorder{}
		r.mu.Lock()
		r.conns = append(r.conns, c, s)
		r.recs = append(r.recs, rec)
		r.mu.Unlock()
		r.wg.Go(func() { io.Copy(c, s); c.Close() })
		r.wg.Go(func() { io.Copy(io.MultiWriter(s, rec), c); s.Close() })
	}
}

// syncRecorder is a buffer that a relay goroutine writes while the test
// reads it.
type syncRecorder struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// setCut cuts the link (closing its connections) or restores it.
func (r *syncRelay) setCut(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = on
	if on {
		for _, c := range r.conns {
			c.Close()
		}
		r.conns = nil
	}
}

// captures returns what went through the relay so far, per connection.
func (r *syncRelay) captures() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]byte, 0, len(r.recs))
	for _, rec := range r.recs {
		rec.mu.Lock()
		out = append(out, bytes.Clone(rec.b.Bytes()))
		rec.mu.Unlock()
	}
	return out
}

func (r *syncRelay) close() {
	r.ln.Close()
	r.setCut(true)
	r.wg.Wait()
}

// replaySync sends a capture on a fresh connection to addr and reads what
// comes back until the listener closes the connection or a few seconds
// pass.
func replaySync(t *testing.T, addr string, data []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	go c.Write(data)
	io.Copy(io.Discard, c)
}

// run starts d's monitor with its state in dir, which outlives a restart,
// synchronised with the peers at the given addresses (id, address).
func (d *director) run(t *testing.T, keyFile, dir string, peers ...[2]string) {
	t.Helper()
	conf := strings.Replace(cpuOnlyConfig, `interval = "1s"`, `interval = "200ms"`, 1)
	if d.weight != "" {
		conf = strings.Replace(conf, "controller = \"lvs\"\n", d.weight, 1)
	}
	conf = strings.Replace(conf, `agent_timeout = "500ms"`, `agent_timeout = "100ms"`, 1)
	conf = strings.Replace(conf, `probe_timeout = "500ms"`, `probe_timeout = "100ms"`, 1)
	conf = strings.Replace(conf, "[availability]\n", "[availability]\nslow_start = \"0s\"\nagent_expiry = \"10s\"\n", 1)
	conf += d.extra
	conf += "[sync]\nid = \"" + d.id + "\"\nlisten = \"" + d.ln.Addr().String() + "\"\nkey_file = \"" + keyFile + "\"\nrole = \"active\"\n"
	for _, p := range peers {
		conf += "[[sync.peer]]\nid = \"" + p[0] + "\"\naddress = \"" + p[1] + "\"\n"
	}
	cfg, err := monitor.ParseConfig(d.id+".toml", []byte(conf))
	must(t, err)
	cfg.StateDir = dir
	store, err := monitor.NewFileStore(dir)
	must(t, err)
	d.m, err = monitor.New(cfg, monitor.Deps{Table: d.table, Agents: d.agents, Prober: newStubProber(), Store: store}, false)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		if err := Run(ctx, d.m, Config{Monitor: cfg, Roles: d.role, SyncListener: d.ln}); err != nil {
			t.Errorf("%s: Run: %v", d.id, err)
		}
	}()
	t.Cleanup(d.stop)
}

// restart stops d and runs it again on the same address, table and state.
func (d *director) restart(t *testing.T, keyFile, dir string, peers ...[2]string) {
	t.Helper()
	d.stop()
	addr := d.ln.Addr().String()
	var err error
	for range 100 { // the old socket may take a moment to go
		if d.ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, err)
	t.Cleanup(func() { d.ln.Close() })
	d.run(t, keyFile, dir, peers...)
}

// cycles waits until d has run n more cycles.
func (d *director) cycles(t *testing.T, n int) {
	t.Helper()
	last := d.m.Status().LastCycle.Start
	for i := 0; i < n; i++ {
		eventually(t, 10*time.Second, "a cycle of "+d.id, func() bool {
			s := d.m.Status().LastCycle.Start
			if s.After(last) {
				last = s
				return true
			}
			return false
		})
	}
}

// stateOf returns d's ownership of C and its weight of C.
func (d *director) stateOf(t *testing.T, rs netip.AddrPort) (policy.Ownership, int) {
	t.Helper()
	for _, s := range d.m.Status().LastCycle.Dests {
		if s.Key.Dest == rs {
			return s.State, d.weights(t)[rs]
		}
	}
	return "", d.weights(t)[rs]
}

func (d *director) addr() [2]string { return [2]string{d.id, d.ln.Addr().String()} }

// TestDirectorPairReplayAfterRestart: a relay on the sync link records the
// standby's frames while an operator drains C there, and later undrains
// it. Replaying the capture to the running writer, to the writer after it
// restarted, and after the standby restarted never drains C again.
func TestDirectorPairReplayAfterRestart(t *testing.T) {
	key := writeKey(t, 1)
	a, b := newPair(t, key)
	dirA, dirB := t.TempDir(), t.TempDir()
	rel := newSyncRelay(t, a.ln.Addr().String()) // b → a goes through it
	a.run(t, key, dirA, b.addr())
	b.run(t, key, dirB, [2]string{a.id, rel.addr()})
	eventually(t, 10*time.Second, "a writes, b mirrors", func() bool { return a.writer() && sameWeights(a.weights(t), b.weights(t)) })

	must(t, b.table.SetWeight(svcKey, rsC, b.weights(t)[rsC], 0))
	eventually(t, 10*time.Second, "the drain on b reaches a", func() bool {
		st, w := a.stateOf(t, rsC)
		return st == policy.DrainedByOperator && w == 0
	})
	captured := rel.captures()
	must(t, b.table.SetWeight(svcKey, rsC, 0, 10))
	eventually(t, 10*time.Second, "the undrain on b reaches a", func() bool {
		st, w := a.stateOf(t, rsC)
		return st != policy.DrainedByOperator && w == 10
	})
	check := func(when string) {
		t.Helper()
		a.cycles(t, 3)
		if st, w := a.stateOf(t, rsC); st == policy.DrainedByOperator || w != 10 {
			t.Errorf("%s: replaying the capture left C %s at weight %d on the writer, want undrained at 10", when, st, w)
		}
	}
	replay := func() {
		for _, c := range captured {
			replaySync(t, a.ln.Addr().String(), c)
		}
	}

	replay()
	check("writer running")

	// The writer restarts while b cannot reach it (the relay cuts the link).
	rel.setCut(true)
	a.restart(t, key, dirA, b.addr())
	eventually(t, 10*time.Second, "a writes again", a.writer)
	replay()
	check("writer restarted")

	// The standby restarts (a new epoch) and is heard again.
	accepted := a.m.Status().Sync.Frames["accepted"]
	b.restart(t, key, dirB, [2]string{a.id, rel.addr()})
	rel.setCut(false)
	eventually(t, 10*time.Second, "a hears the restarted b", func() bool { return a.m.Status().Sync.Frames["accepted"] > accepted })
	replay()
	check("standby restarted")
	t.Logf("frames the restarted writer received: %v", a.m.Status().Sync.Frames)
}
