package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lvs-feedback/agent"
)

// slowlorisEnv makes the test binary a slowloris client of the address it
// names (see slowloris): the attack runs in another process, so that the
// agent's descriptors can be counted in this one.
const slowlorisEnv = "LVS_AGENT_TEST_SLOWLORIS"

func TestMain(m *testing.M) {
	if addr := os.Getenv(slowlorisEnv); addr != "" {
		os.Exit(slowloris(addr, 500, os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// slowloris keeps n connections to addr open, each sending an HTTP request
// header that never ends, one header line every 100 ms; a connection the
// server closes is opened again at once. It prints "ready" once n
// connections have been opened, and when stop reaches EOF (the test closed
// it, or died) it prints "opened N closed-by-server M" and returns. It stops
// by itself after two minutes whatever happens.
func slowloris(addr string, n int, stop io.Reader, out io.Writer) int {
	deadline := time.Now().Add(2 * time.Minute)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stop)
		close(done)
	}()
	var opened, dropped atomic.Int64
	var ready sync.WaitGroup
	ready.Add(n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for time.Now().Before(deadline) {
				select {
				case <-done:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				opened.Add(1)
				if first {
					first = false
					ready.Done()
				}
				if hold(c, done, deadline) {
					dropped.Add(1)
				}
				c.Close()
			}
		}()
	}
	go func() {
		ready.Wait()
		fmt.Fprintln(out, "ready")
	}()
	wg.Wait()
	fmt.Fprintf(out, "opened %d closed-by-server %d\n", opened.Load(), dropped.Load())
	return 0
}

// hold drips an endless request header into c until the server closes it
// (true) or the attack ends (false).
func hold(c net.Conn, done <-chan struct{}, deadline time.Time) bool {
	if _, err := io.WriteString(c, "GET /v1/load HTTP/1.1\r\nHost: agent\r\n"); err != nil {
		return true
	}
	buf := make([]byte, 512)
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case <-done:
			return false
		default:
		}
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return true // closed (or answered 408/400) by the server
			}
		}
		if _, err := fmt.Fprintf(c, "X-Drip-%d: x\r\n", i); err != nil {
			return true
		}
	}
	return false
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count descriptors: %v", err)
	}
	return len(ents)
}

// TestSlowlorisBounded runs the agent as lvs-agent runs it, with its
// default flags, under 500 slowloris connections from another process
// (reconnecting as soon as the agent closes one), and polls it meanwhile
// from another loopback address as lvs-monitor does (a new connection per
// poll, the monitor's default agent_timeout). Every poll must answer in
// time, and the agent's descriptors must stay within -max-conns of where
// they were.
func TestSlowlorisBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 500 connections")
	}
	const (
		polls       = 20
		pollTimeout = 2 * time.Second // lvs-monitor's default agent_timeout
		maxConns    = 64              // lvs-agent's default -max-conns
		slack       = 16              // the attacker's pipes, the poller's socket, one accepted before another is closed
	)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	addr, exit := startRun(t, ctx, []string{"-listen", "127.0.0.1:0", "-interval", "100ms"}, &stderr)
	t.Cleanup(func() {
		cancel()
		select {
		case <-exit:
		case <-time.After(30 * time.Second):
			t.Error("the agent did not stop")
		}
	})
	url := "http://" + addr
	// The poller has an address of its own, as a director has; the attack
	// comes from 127.0.0.1.
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: dialer.DialContext}}
	poll := func() (time.Duration, error) {
		pctx, done := context.WithTimeout(ctx, pollTimeout)
		defer done()
		start := time.Now()
		_, err := agent.Fetch(pctx, client, url)
		return time.Since(start), err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := poll()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := openFDs(t)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slowlorisEnv+"="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("slowloris did not open its connections: %q %v", lines.Text(), lines.Err())
	}

	// Descriptors are sampled all along, not only between polls.
	var peak atomic.Int64
	peak.Store(int64(openFDs(t)))
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
				if n := int64(len(ents)); n > peak.Load() {
					peak.Store(n)
				}
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var lat []time.Duration
	var failed []string
	for i := range polls {
		d, err := poll()
		if err != nil {
			failed = append(failed, fmt.Sprintf("poll %d after %v: %v", i, d.Round(time.Millisecond), err))
		} else {
			lat = append(lat, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stopSampling)
	<-sampled
	stdin.Close()
	var summary string
	if lines.Scan() {
		summary = lines.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("slowloris: %v", err)
	}

	slices.Sort(lat)
	t.Logf("slowloris: %s", summary)
	t.Logf("descriptors: %d before the attack, at most %d during it", base, peak.Load())
	if len(lat) > 0 {
		t.Logf("%d polls answered: p50 %v max %v", len(lat), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	}
	for _, f := range failed {
		t.Error(f)
	}
	if got := int(peak.Load()) - base; got > maxConns+slack {
		t.Errorf("%d descriptors more under the attack, want at most %d (-max-conns %d)", got, maxConns+slack, maxConns)
	}
	// The attack was real: 500 connections, more than the limit, so the
	// agent had to close some, and said so once (the line is rate-limited).
	var opened, closed int
	if _, err := fmt.Sscanf(summary, "opened %d closed-by-server %d", &opened, &closed); err != nil || opened < 500 || closed < 1 {
		t.Errorf("slowloris summary %q: want at least 500 connections opened and some closed by the agent", summary)
	}
	if n := strings.Count(stderr.String(), "connection limit reached"); n < 1 || n > 2 {
		t.Errorf("%d log lines about the connection limit, want 1 (2 if the test took over a minute):\n%s", n, stderr.String())
	}
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("agent log:\n%s", stderr.String())
	}
}
