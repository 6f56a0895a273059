// Command diskserver is the test VM's disk-bound real server and its client
// (vmtest/guest/e2e-disk.sh; docs/developer/testing-kernel.md). It is a test tool, not
// part of the product.
//
//	diskserver serve -listen :80 -disk /dev/nullb0 -name rs1 [-reads 1] [-log FILE]
//	diskserver client -url http://10.0.1.100/ -workers 8 -rate 40 -stop FILE -counts FILE
//
// serve answers GET / with its -name after -reads random 4 KiB reads of
// -disk opened with O_DIRECT (no page cache: every read reaches the device),
// so its throughput is bounded by the device while it uses little CPU.
// GET /health answers at once without I/O, for the monitor's probe, and is
// logged as "ADDRESS:PORT: GET /health" (the start of a busybox httpd log
// line, which vmtest/guest/lib.sh's probe_counts counts).
//
// client runs -workers closed loops, each fetching -url on a new connection
// (so IPVS schedules every request), together at most -rate requests a
// second, until -stop exists or SIGTERM; it rewrites -counts every second
// with "NAME N" per answering server and "fail N". The rate keeps the fast
// servers from taking every CPU of a slow test VM; the loops keep a slow
// server's queue full: a loop waiting on it sends nothing else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// blockSize is one read: the page size, a multiple of every logical block
// size O_DIRECT may require.
const blockSize = 4096

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: diskserver serve|client [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "client":
		err = client(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q: want serve or client", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "diskserver:", err)
		os.Exit(1)
	}
}

// disk reads random blocks of one device or file, bypassing the page cache.
type disk struct {
	f      *os.File
	blocks int64 // whole blockSize blocks in the device
	bufs   sync.Pool
}

func openDisk(path string) (*disk, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s with O_DIRECT: %w", path, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	if size < blockSize {
		f.Close()
		return nil, fmt.Errorf("%s: %d bytes, want at least %d", path, size, blockSize)
	}
	d := &disk{f: f, blocks: size / blockSize}
	// O_DIRECT wants an aligned buffer: a block-aligned window of a
	// larger slice (Go's heap does not move objects).
	d.bufs.New = func() any {
		b := make([]byte, 2*blockSize)
		off := (blockSize - int(uintptr(unsafe.Pointer(&b[0]))%blockSize)) % blockSize
		b = b[off : off+blockSize]
		return &b
	}
	return d, nil
}

// read reads n random blocks, one after the other.
func (d *disk) read(n int) error {
	buf := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(buf)
	for range n {
		if _, err := d.f.ReadAt(*buf, rand.Int64N(d.blocks)*blockSize); err != nil {
			return fmt.Errorf("read %s: %w", d.f.Name(), err)
		}
	}
	return nil
}

func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", ":80", "`address` to serve on")
	path := fs.String("disk", "", "block `device` (or file) to read with O_DIRECT")
	name := fs.String("name", "", "`name` to answer with")
	reads := fs.Int("reads", 1, "random 4 KiB `reads` per request")
	logPath := fs.String("log", "", "append probe lines to this `file` (default stderr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || *name == "" || *reads < 1 {
		return errors.New("serve needs -disk, -name and -reads ≥ 1")
	}
	d, err := openDisk(*path)
	if err != nil {
		return err
	}
	defer d.f.Close()
	logw := io.Writer(os.Stderr)
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("log: %w", err)
		}
		defer f.Close()
		logw = f
	}
	srv := &http.Server{Addr: *listen, Handler: handler(d, *name, *reads, logw), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func handler(d *disk, name string, reads int, logw io.Writer) http.Handler {
	var logMu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		logMu.Lock()
		fmt.Fprintf(logw, "%s: GET /health\n", r.RemoteAddr)
		logMu.Unlock()
		fmt.Fprintln(w, name)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if err := d.read(reads); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, name)
	})
	return mux
}

func client(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	url := fs.String("url", "", "`URL` to fetch")
	workers := fs.Int("workers", 8, "concurrent closed loops")
	rate := fs.Float64("rate", 40, "at most this many `requests` a second, all loops together")
	stopFile := fs.String("stop", "", "stop once this `file` exists")
	countsPath := fs.String("counts", "", "rewrite this `file` every second with the answers per server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || *countsPath == "" || *workers < 1 || !(*rate > 0 && *rate <= 1e6) {
		return errors.New("client needs -url, -counts, -workers ≥ 1 and 0 < -rate ≤ 1e6")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pace := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer pace.Stop()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-pace.C:
				}
				who := fetch(ctx, hc, *url)
				if ctx.Err() != nil {
					return // cut short by the stop, not a failure
				}
				mu.Lock()
				counts[who]++
				mu.Unlock()
			}
		}()
	}
	write := func() error {
		mu.Lock()
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			fmt.Fprintf(&b, "%s %d\n", k, counts[k])
		}
		mu.Unlock()
		tmp := *countsPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, *countsPath)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if _, err := os.Stat(*stopFile); *stopFile != "" && err == nil {
			cancel()
		}
		if err := write(); err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("counts: %w", err)
		}
	}
	wg.Wait()
	return write()
}

// fetch returns the answering server's name, or "fail".
func fetch(ctx context.Context, hc *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "fail"
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // no busy loop on a refused connection
		}
		return "fail"
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "fail"
	}
	return strings.TrimSpace(string(b))
}
