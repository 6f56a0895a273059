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

// Sampler reads a Source every interval in its own goroutine (Run) and keeps
// the latest result, so that readers (the HTTP handler) never touch /proc.
// Latest and Body are safe for concurrent use.
type Sampler struct {
	src      Source
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time
	maxGap   time.Duration // a baseline older than this is not averaged over

	latest   atomic.Pointer[sample]
	started  time.Time
	progress atomic.Int64 // ns after started of the last finished Read
}

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
	s := &Sampler{src: src, interval: interval, log: log, now: time.Now, maxGap: 5 * interval}
	s.started = s.now()
	return s, nil
}

// Interval returns the sampling interval.
func (s *Sampler) Interval() time.Duration { return s.interval }

// staleAfter is how old the latest sample may get before it is refused: a
// Read blocked on a hung mount must not leave an old number on display.
func (s *Sampler) staleAfter() time.Duration {
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
	var prevAt time.Time
	totals := CPUTime{Since: s.started.UTC()}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := s.read()
		now := s.now()
		switch {
		case err != nil:
			s.publish(Report{}, err)
			if prev != nil && now.Sub(prevAt) > s.maxGap {
				prev = nil // too old to average over: start a fresh window
			}
		case prev == nil:
			// First reading, or first after a long outage: a baseline only.
			prev, prevAt = cur, now
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
		t.Reset(s.interval)
	}
}

// read reads the source on a locked OS thread, so that a source can
// recognise (and not count) the reading thread as runnable.
func (s *Sampler) read() (Reading, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := s.src.Read()
	s.progress.Store(int64(s.now().Sub(s.started)))
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
	l, err := s.current()
	if err != nil {
		return Report{}, err
	}
	return l.report, nil
}

// body returns the latest report's JSON, or Latest's error.
func (s *Sampler) body() ([]byte, error) {
	l, err := s.current()
	if err != nil {
		return nil, err
	}
	return l.body, nil
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
// (or has just started). It is false when a Read hangs, for example on a
// hung mount.
func (s *Sampler) Alive() bool {
	last := time.Duration(s.progress.Load())
	return s.now().Sub(s.started)-last <= s.staleAfter()
}
