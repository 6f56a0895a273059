package agent

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseSource(t *testing.T) {
	o := fixtureOptions("t0")
	abs := func(p string) string {
		t.Helper()
		s, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := map[string]string{
		"host":           "host",
		"process:4242":   "process:4242",
		"pidfile:/x.pid": "pidfile:/x.pid",
		"cgroup:" + abs("testdata/t0/cgroup/slice/app"): "cgroup:" + abs("testdata/t0/cgroup/slice/app"),
	}
	for spec, name := range good {
		s, err := ParseSource(spec, o)
		if err != nil {
			t.Errorf("ParseSource(%q): %v", spec, err)
			continue
		}
		if s.Name() != name {
			t.Errorf("ParseSource(%q).Name() = %q", spec, s.Name())
		}
	}
	for _, spec := range []string{"", "hosts", "host:x", "process:", "process:abc", "process:-1", "process:0",
		"cgroup:", "cgroup:relative", "pidfile:", "nfs:/x", "process:999"} {
		if _, err := ParseSource(spec, o); err == nil {
			t.Errorf("ParseSource(%q) accepted", spec)
		}
	}
}

// fakeSource returns readings whose Report yields a report with CPU = the
// reading's sequence number / 100 over a window of (n − prev.n) seconds, or
// the queued error.
type fakeSource struct {
	mu        sync.Mutex
	n         int
	errs      map[int]error // read number -> error
	block     chan struct{} // when not nil, Read waits on it
	blockFrom int           // from this read on (0: every read)
}

func (f *fakeSource) reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

type fakeReading struct{ n int }

func (r fakeReading) Report(prev Reading) (Report, error) {
	p := prev.(fakeReading)
	return finish(Report{Time: time.Now(), Source: "fake", CPU: float64(r.n) / 100,
		Raw: Raw{RunnableTasks: p.n, WindowSeconds: float64(r.n - p.n)}})
}

func (f *fakeSource) Name() string { return "fake" }
func (f *fakeSource) Read() (Reading, error) {
	f.mu.Lock()
	f.n++
	n, err, block := f.n, f.errs[f.n], f.block
	f.mu.Unlock()
	if block != nil && n >= f.blockFrom {
		<-block
	}
	if err != nil {
		return nil, err
	}
	return fakeReading{n}, nil
}

// TestSamplerStates runs a sampler on a fake source: not ready, a report,
// an error served as such, recovery.
func TestSamplerStates(t *testing.T) {
	src := &fakeSource{errs: map[int]error{3: errors.New("boom"), 4: errors.New("boom")}}
	s, err := NewSampler(src, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.maxGap = time.Hour // a loaded test machine must not turn read 5 into a baseline
	if _, err := s.Latest(); !errors.Is(err, ErrNotReady) {
		t.Fatalf("before Run: %v, want ErrNotReady", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, ok func(Report, error) bool) (Report, error) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r, err := s.Latest()
			if ok(r, err) {
				return r, err
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: last %+v, %v", what, r, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Read 1 is the baseline; read 2 gives CPU 0.02 over [1, 2].
	r, _ := waitFor("first report", func(r Report, err error) bool { return err == nil })
	if r.CPU != 0.02 || r.Raw.RunnableTasks != 1 || r.Schema != SchemaVersion {
		t.Errorf("first report %+v", r)
	}
	// The running totals: 0.02 × 1 s busy over 1 s sampled.
	if c := r.CPUTime; c == nil || c.BusySeconds != 0.02 || c.SampledSeconds != 1 || !c.Since.Equal(s.started) {
		t.Errorf("first report's cpu_time %+v, want busy 0.02 of 1 s since %v", c, s.started)
	}
	first := r.CPUTime
	// Reads 3 and 4 fail: the error is served, not the old report.
	_, err = waitFor("error", func(r Report, err error) bool { return err != nil })
	if err.Error() != "boom" {
		t.Errorf("err = %v", err)
	}
	// Read 5 recovers, over the window from read 2 (the last good one).
	r, _ = waitFor("recovery", func(r Report, err error) bool { return err == nil && r.CPU >= 0.05 })
	if r.CPU != 0.05 || r.Raw.RunnableTasks != 2 {
		t.Errorf("after recovery %+v, want cpu 0.05 over [2, 5]", r)
	}
	// The failed reads add nothing; the recovery window [2, 5] adds
	// 0.05 × 3 s: 0.17 busy over 4 s, and 0.15/3 = 0.05 between the two.
	if c := r.CPUTime; c == nil || math.Abs(c.BusySeconds-0.17) > 1e-12 || c.SampledSeconds != 4 {
		t.Errorf("cpu_time after recovery %+v, want busy 0.17 of 4 s", c)
	}
	if b, ok := BusyBetween(first, r.CPUTime); !ok || math.Abs(b-0.05) > 1e-12 {
		t.Errorf("BusyBetween(first, after recovery) = %v, %v; want 0.05", b, ok)
	}
	body, err := s.body()
	if err != nil || !strings.HasSuffix(string(body), "}\n") || !strings.Contains(string(body), `"source":"fake"`) {
		t.Errorf("body %q, %v", body, err)
	}
}

// TestSamplerRebase: after an outage longer than maxGap, the next good
// read is a new baseline, not the end of a long window.
func TestSamplerRebase(t *testing.T) {
	src := &fakeSource{errs: map[int]error{3: errors.New("boom")}}
	s, err := NewSampler(src, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.maxGap = time.Nanosecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := s.Latest()
		if err == nil && r.CPU > 0.02 {
			// Read 4 is the new baseline: the report is over [4, 5].
			if r.CPU != 0.05 || r.Raw.RunnableTasks != 4 {
				t.Errorf("after rebase %+v, want cpu 0.05 over [4, 5]", r)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report after the outage: %+v, %v", r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSamplerStale(t *testing.T) {
	src := &fakeSource{}
	s, err := NewSampler(src, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.now = func() time.Time { return now }
	s.started = now
	s.publish(Report{Schema: 1, Time: now, Source: "fake"}, nil)
	if _, err := s.Latest(); err != nil || !s.Alive() {
		t.Fatalf("fresh: %v alive %v", err, s.Alive())
	}
	now = now.Add(s.staleAfter() + time.Millisecond)
	if _, err := s.Latest(); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("stale sample served: %v", err)
	}
	if s.Alive() {
		t.Error("alive with no progress")
	}
}

func TestSamplerHungRead(t *testing.T) {
	src := &fakeSource{block: make(chan struct{})}
	s, err := NewSampler(src, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	// The read hangs: nothing to serve, but the server must not block.
	start := time.Now()
	if _, err := s.Latest(); !errors.Is(err, ErrNotReady) || time.Since(start) > time.Second {
		t.Errorf("Latest during hung read: %v after %v", err, time.Since(start))
	}
	cancel()
	close(src.block)
	<-done
}

func TestNewSamplerRefuses(t *testing.T) {
	if _, err := NewSampler(nil, time.Second, nil); err == nil {
		t.Error("nil source accepted")
	}
	if _, err := NewSampler(&fakeSource{}, time.Millisecond, nil); err == nil {
		t.Error("1ms interval accepted")
	}
}

func TestCapLoad(t *testing.T) {
	for _, bad := range []float64{-0.1, nan(), inf()} {
		if _, err := capLoad("cpu", bad); err == nil {
			t.Errorf("capLoad(%v) accepted", bad)
		}
	}
	if v, err := capLoad("cpu", 1e9); err != nil || v != MaxLoad {
		t.Errorf("capLoad(1e9) = %v, %v", v, err)
	}
	if _, err := finish(Report{Memory: nan()}); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("finish(NaN memory) = %v", err)
	}
}

// fakeClock is a sampler's clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// onPollSampler starts a sampler of src that samples on poll, on a clock
// that moves only when told and with no reads when no one asks, and
// waits for its first report (reads 1 and 2).
func onPollSampler(t *testing.T, src *fakeSource) (*Sampler, *fakeClock) {
	t.Helper()
	s, err := NewSampler(src, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SampleOnPoll()
	clock := &fakeClock{t: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	s.now, s.started = clock.now, clock.now()
	s.idle = time.Hour // no reads but those asked for (and the first report's)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := s.current(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no first report")
		}
	}
	return s, clock
}

// On poll, the sampler reads when a reader finds the latest sample an
// interval old, at most once an interval however many ask, and not at all
// when no one asks; the report covers the time since the previous read.
func TestSamplerOnPoll(t *testing.T) {
	src := &fakeSource{}
	s, clock := onPollSampler(t, src)
	s.wait = time.Minute // the read always comes in time here
	for range 5 {
		r, err := s.Latest()
		if err != nil || r.CPU != 0.02 {
			t.Fatalf("Latest within the interval: %+v, %v; want read 2's report (CPU 0.02)", r, err)
		}
	}
	if n := src.reads(); n != 2 {
		t.Fatalf("%d reads after five polls within the interval, want 2 (the baseline and the first report)", n)
	}
	clock.advance(100 * time.Millisecond)
	r, err := s.Latest()
	// Read 3, over the window since read 2.
	if err != nil || r.CPU != 0.03 || r.Raw.RunnableTasks != 2 || r.Raw.WindowSeconds != 1 {
		t.Fatalf("Latest an interval later: %+v, %v; want read 3's report over [2, 3]", r, err)
	}
	for range 5 {
		body, err := s.body()
		if err != nil || !strings.Contains(string(body), `"cpu":0.03`) {
			t.Fatalf("body within the interval: %s, %v; want read 3's", body, err)
		}
	}
	clock.advance(10 * time.Minute) // no one asks: nothing read
	if n := src.reads(); n != 3 {
		t.Fatalf("%d reads, want 3", n)
	}
	r, err = s.Latest()
	if err != nil || r.CPU != 0.04 || r.Raw.RunnableTasks != 3 {
		t.Fatalf("Latest after a long quiet: %+v, %v; want read 4's report over [3, 4]", r, err)
	}
	if c := r.CPUTime; c == nil || math.Abs(c.BusySeconds-0.09) > 1e-12 || c.SampledSeconds != 3 {
		t.Errorf("cpu_time %+v, want busy 0.02+0.03+0.04 over 3 s", c)
	}
	// A flood of polls at once, an interval later: one read serves them all.
	clock.advance(100 * time.Millisecond)
	var wg sync.WaitGroup
	got := make([]float64, 50)
	for i := range got {
		wg.Go(func() {
			if r, err := s.Latest(); err == nil {
				got[i] = r.CPU
			}
		})
	}
	wg.Wait()
	if n := src.reads(); n != 5 {
		t.Errorf("%d reads after 50 polls at once, want 5: one more", n)
	}
	for i, cpu := range got {
		if cpu != 0.05 {
			t.Errorf("poll %d of the flood: CPU %g, want read 5's 0.05", i, cpu)
			break
		}
	}
	if !s.Alive() {
		t.Error("not alive")
	}
}

// A read asked for that hangs holds no reply up: the poll gets the latest
// sample after the wait, until that sample is too old, and the sampler is
// then reported stalled.
func TestSamplerOnPollHungRead(t *testing.T) {
	src := &fakeSource{block: make(chan struct{}), blockFrom: 3}
	s, clock := onPollSampler(t, src)
	defer close(src.block)
	s.wait = 10 * time.Millisecond
	clock.advance(time.Second)
	start := time.Now()
	r, err := s.Latest() // asks for read 3, which hangs
	if err != nil || r.CPU != 0.02 {
		t.Fatalf("Latest with the read hung: %+v, %v; want read 2's report", r, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Latest took %v with the read hung", d)
	}
	if !s.Alive() {
		t.Error("not alive a second into the read")
	}
	clock.advance(s.staleAfter())
	if _, err := s.Latest(); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("Latest past the stale bound: %v, want stale", err)
	}
	if s.Alive() {
		t.Error("alive with a read hung past the stale bound")
	}
	if n := src.reads(); n != 3 {
		t.Errorf("%d reads, want 3: a hung read is not asked for again", n)
	}
}
