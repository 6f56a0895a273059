package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"lvs-feedback/internal/cmdline"
)

// maxHog bounds POST /hog?for=: a background job that never ends is not a
// demo.
const maxHog = 10 * time.Minute

// backendBanner starts every GET / reply; the director checks it (and the
// PID after it) to know the process it started is the one answering.
const backendBanner = "lvs-demo backend pid "

// runBackend is the backend role: a small real HTTP server standing in for
// a real server. GET / does a little real CPU work (hashing, about
// -work long on an idle machine) and answers 200; POST /hog?for=12s makes
// this process burn every CPU for that long.
func runBackend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lvs-demo backend", flag.ContinueOnError)
	listen := fs.String("listen", "", "`address` to serve on, e.g. 127.0.0.1:8081")
	work := fs.Duration("work", 1500*time.Microsecond, "CPU work per GET / on an idle machine")
	if code, done := cmdline.Parse(fs, args, stdout, stderr); done {
		return code
	}
	if *listen == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "lvs-demo backend: want -listen ADDRESS and no arguments")
		return 2
	}
	if *work <= 0 || *work > time.Second {
		fmt.Fprintf(stderr, "lvs-demo backend: -work %v: want 1ns to 1s\n", *work)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "lvs-demo backend: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := newBackend(ctx, calibrate(*work))
	srv := &http.Server{
		Handler:           b.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "lvs-demo backend pid %d listening on %s (%d hash rounds per request)\n", os.Getpid(), ln.Addr(), b.rounds)
	code := 0
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintf(stderr, "lvs-demo backend: %v\n", err)
		code = 1
	}
	cancel() // stops a running hog too
	shutdownCtx, done := context.WithTimeout(context.Background(), 3*time.Second)
	defer done()
	if err := srv.Shutdown(shutdownCtx); err != nil && code == 0 {
		fmt.Fprintf(stderr, "lvs-demo backend: shutdown: %v\n", err)
		code = 1
	}
	return code
}

// backend is one stand-in real server.
type backend struct {
	ctx    context.Context // the server's lifetime: a hog stops with it
	rounds int             // hash rounds per GET /
	pid    int

	mu       sync.Mutex
	hogUntil time.Time // zero or past: no hog running
}

func newBackend(ctx context.Context, rounds int) *backend {
	return &backend{ctx: ctx, rounds: rounds, pid: os.Getpid()}
}

// hashBlock is what each hash round digests.
const hashBlock = 1024

// burn runs n rounds of SHA-256 over a 1 KiB block and returns the digest,
// so the work cannot be optimised away.
func burn(n int) [sha256.Size]byte {
	var buf [hashBlock]byte
	var sum [sha256.Size]byte
	for range n {
		sum = sha256.Sum256(buf[:])
		copy(buf[:], sum[:])
	}
	return sum
}

// calibrate returns the number of hash rounds that take about d on this
// machine now (the fastest of a few trials, so a busy moment does not
// shrink the work). The count is fixed afterwards: when the server is
// starved of CPU, the same work takes longer, as it would on a real server.
func calibrate(d time.Duration) int {
	const trial = 2000
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		burn(trial)
		best = min(best, time.Since(start))
	}
	return max(1, int(float64(trial)*float64(d)/float64(max(best, time.Microsecond))))
}

func (b *backend) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		sum := burn(b.rounds)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s%d %x\n", backendBanner, b.pid, sum[:8])
	})
	mux.HandleFunc("POST /hog", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("for"))
		if err != nil || d <= 0 || d > maxHog {
			http.Error(w, fmt.Sprintf("want ?for=DURATION from 1ns to %v", maxHog), http.StatusBadRequest)
			return
		}
		n := runtime.NumCPU()
		until, ok := b.startHog(n, d)
		if !ok {
			http.Error(w, fmt.Sprintf("a hog is already running until %s", until.Format(time.RFC3339Nano)), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "hogging %d CPUs for %v\n", n, d)
	})
	return mux
}

// startHog starts n goroutines that burn CPU for d, unless a hog is already
// running (then it returns the running hog's end and false). The hog
// outlives the request that started it but stops with the server.
func (b *backend) startHog(n int, d time.Duration) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if now.Before(b.hogUntil) {
		return b.hogUntil, false
	}
	until := now.Add(d)
	b.hogUntil = until
	ctx, cancel := context.WithDeadline(b.ctx, until)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				burn(200) // a fraction of a millisecond; then look at the clock again
			}
		})
	}
	go func() {
		wg.Wait()
		cancel()
	}()
	return until, true
}
