package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"
)

// MinInterval is the shortest sampling interval a Sampler accepts. Shorter
// windows make /proc's 10 ms tick counters too coarse.
const MinInterval = 100 * time.Millisecond

// ErrNotReady is returned by Sampler.Latest before the first window has
// passed.
var ErrNotReady = errors.New("no sample yet")

// Sampler reads a Source in its own goroutine (Run) and keeps the latest
// result, so that readers (the HTTP handler) never touch /proc. It reads
// every interval, or, after SampleOnPoll, when a reader finds the latest
// sample an interval old or older. Latest and Body are safe for
// concurrent use.
type Sampler struct {
	src      Source
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time
	maxGap   time.Duration // a baseline older than this is not averaged over

	// onPoll: read when asked (wake), at most once an interval, and
	// otherwise every idle; next is closed by the next publish.
	onPoll bool
	idle   time.Duration
	wait   time.Duration // onPollWait
	wake   chan struct{}
	next   atomic.Pointer[chan struct{}]

	latest   atomic.Pointer[sample]
	started  time.Time
	progress atomic.Int64 // ns after started of the last finished Read
	reading  atomic.Int64 // ns after started at which the Read under way began, +1; 0: none
}

// onPollIdle is how often a sampler that samples on poll reads when no
// one asks: often enough that a baseline is at hand and a hung read is
// seen, seldom enough that a monitor polling every 5 s (its default) is
// what sets the reads.
const onPollIdle = 10 * time.Second

// onPollWait is how long a reader waits for the read it asked for before
// it is served the latest sample: well inside the agent's 50 ms answer
// target, and a read takes under a millisecond on an idle host.
const onPollWait = 40 * time.Millisecond

// sample is one published result: a report and its JSON, or an error.
type sample struct {
	report Report
	body   []byte // JSON of report and a newline, marshalled once per sample
	err    error
	at     time.Time // when published (monotonic)
}

// NewSampler returns a sampler of src every interval (≥ MinInterval). A nil
// log discards logging.
func NewSampler(src Source, interval time.Duration, log *slog.Logger) (*Sampler, error) {
	if src == nil {
		return nil, errors.New("sampler: nil source")
	}
	if interval < MinInterval {
		return nil, fmt.Errorf("sampler: interval %v is shorter than %v", interval, MinInterval)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sampler{src: src, interval: interval, log: log, now: time.Now, maxGap: 5 * interval, wake: make(chan struct{}, 1)}
	s.started = s.now()
	next := make(chan struct{})
	s.next.Store(&next)
	return s, nil
}

// SampleOnPoll makes s read its source when a reader (a poll, an
// agent-check) finds the latest sample at least an interval old, waiting
// for that read at most onPollWait, instead of every interval; with no
// reader it reads every onPollIdle (or interval, if longer). A report
// then covers the time since the previous read — a poller's own interval
// when one poller sets the pace — and is at most an interval old when
// served. Call it before Run.
func (s *Sampler) SampleOnPoll() {
	s.onPoll = true
	s.idle, s.wait = max(onPollIdle, s.interval), onPollWait
	s.maxGap = max(s.maxGap, 2*s.idle)
}

// Interval returns the sampling interval.
func (s *Sampler) Interval() time.Duration { return s.interval }

// staleAfter is how old the latest sample may get before it is refused: a
// Read blocked on a hung mount must not leave an old number on display.
func (s *Sampler) staleAfter() time.Duration {
	if s.onPoll {
		// With no reader the latest is up to idle old, and a poll that
		// finds the read it asked for late gets it.
		return s.idle + 5*time.Second
	}
	return max(3*s.interval, s.interval+5*time.Second)
}

// Run samples until ctx is done. The first report is published one interval
// after Run starts; a failed read or computation is published as an error
// until the next success. Run must be called once.
//
// The next read is scheduled one interval after the previous one finished,
// so a goroutine delayed by a CPU hog never reads twice in a row with no
// time between (which would leave /proc's 10 ms counters unchanged).
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	var prev Reading
	var prevAt, lastRead time.Time
	totals := CPUTime{Since: s.started.UTC()}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
			if !lastRead.IsZero() && s.now().Sub(lastRead) < s.interval {
				continue // read less than an interval ago: that one serves
			}
		}
		cur, err := s.read()
		now := s.now()
		lastRead = now
		next := s.interval
		if s.onPoll {
			next = s.idle
		}
		switch {
		case err != nil:
			s.publish(Report{}, err)
			if prev != nil && now.Sub(prevAt) > s.maxGap {
				prev = nil // too old to average over: start a fresh window
			}
		case prev == nil:
			// First reading, or first after a long outage: a baseline
			// only; the report comes one interval later.
			prev, prevAt = cur, now
			next = s.interval
		default:
			rep, rerr := cur.Report(prev)
			if rerr == nil {
				totals.Add(rep.CPU, rep.Raw.WindowSeconds)
				t := totals
				rep.CPUTime = &t
			}
			s.publish(rep, rerr)
			prev, prevAt = cur, now
		}
		t.Reset(next)
	}
}

// read reads the source on a locked OS thread, so that a source can
// recognise (and not count) the reading thread as runnable.
func (s *Sampler) read() (Reading, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s.reading.Store(int64(s.now().Sub(s.started)) + 1)
	r, err := s.src.Read()
	s.progress.Store(int64(s.now().Sub(s.started)))
	s.reading.Store(0)
	return r, err
}

func (s *Sampler) publish(rep Report, err error) {
	n := &sample{report: rep, err: err, at: s.now()}
	if err == nil {
		n.body, err = json.Marshal(rep)
		n.body = append(n.body, '\n')
		if err == nil && len(n.body) > MaxReportBytes {
			err = fmt.Errorf("report is %d bytes, more than %d", len(n.body), MaxReportBytes)
		}
		if err != nil {
			n = &sample{err: fmt.Errorf("encode report: %w", err), at: n.at}
		}
	}
	old := s.latest.Swap(n)
	next := make(chan struct{})
	close(*s.next.Swap(&next)) // readers waiting for a sample
	switch {
	case n.err != nil && (old == nil || old.err == nil || old.err.Error() != n.err.Error()):
		s.log.Error("sampling failed", "source", s.src.Name(), "err", n.err)
	case n.err == nil && old != nil && old.err != nil:
		s.log.Info("sampling recovered", "source", s.src.Name())
	case n.err == nil:
		s.log.Debug("sample", "source", s.src.Name(), "cpu", rep.CPU, "memory", rep.Memory,
			"disk", rep.Disk, "processes", rep.Processes)
	}
}

// Latest returns the latest report. It fails with ErrNotReady before the
// first window has passed, with the sampling error if the latest sample
// failed, and with a "stale" error if sampling has stalled.
func (s *Sampler) Latest() (Report, error) {
	l, err := s.fresh()
	if err != nil {
		return Report{}, err
	}
	return l.report, nil
}

// body returns the latest report's JSON, or Latest's error.
func (s *Sampler) body() ([]byte, error) {
	l, err := s.fresh()
	if err != nil {
		return nil, err
	}
	return l.body, nil
}

// fresh is current, but when s samples on poll and the latest sample is
// an interval old or older, it first asks Run for a read and waits for
// it at most s.wait: a read that hangs or is slow does not hold the
// reply up, which then carries the latest sample as it is.
func (s *Sampler) fresh() (*sample, error) {
	if s.onPoll {
		next := *s.next.Load() // before latest: a publish in between closes it
		if l := s.latest.Load(); l != nil && s.now().Sub(l.at) >= s.interval {
			select {
			case s.wake <- struct{}{}:
			default: // asked already
			}
			t := time.NewTimer(s.wait)
			select {
			case <-next:
			case <-t.C:
			}
			t.Stop()
		}
	}
	return s.current()
}

func (s *Sampler) current() (*sample, error) {
	l := s.latest.Load()
	if l == nil {
		return nil, ErrNotReady
	}
	if age := s.now().Sub(l.at); age > s.staleAfter() {
		return nil, fmt.Errorf("stale: last sample %v ago (sampling stalled?)", age.Round(time.Millisecond))
	}
	if l.err != nil {
		return nil, l.err
	}
	return l, nil
}

// Alive reports whether the sampling goroutine has finished a Read recently
// (or has just started) and no Read has been under way for longer than a
// sample may be old. It is false when a Read hangs, for example on a hung
// mount.
func (s *Sampler) Alive() bool {
	since := s.now().Sub(s.started)
	if r := s.reading.Load(); r != 0 && since-time.Duration(r-1) > s.staleAfter() {
		return false
	}
	return since-time.Duration(s.progress.Load()) <= s.staleAfter()
}
