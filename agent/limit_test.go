package agent

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// limitRig serves h on loopback through LimitConns(max). Its server's own
// timeouts are a minute, so that only the limiter closes connections
// while a test runs. It counts every ConnState change after the limiter
// has seen it; await takes them one by one, per state, since changes of
// different connections may come in any order.
type limitRig struct {
	t    *testing.T
	addr string
	lim  *ConnLimiter

	mu     sync.Mutex
	cond   *sync.Cond
	seen   map[http.ConnState]int
	waited map[http.ConnState]int
}

func newLimitRig(t *testing.T, max int, h http.Handler) *limitRig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &limitRig{t: t, addr: ln.Addr().String(), seen: map[http.ConnState]int{}, waited: map[http.ConnState]int{}}
	r.cond = sync.NewCond(&r.mu)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute}
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		r.mu.Lock()
		r.seen[s]++
		r.mu.Unlock()
		r.cond.Broadcast()
	}
	r.lim = LimitConns(srv, ln, max, nil)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(r.lim) }()
	t.Cleanup(func() { srv.Close(); <-served })
	return r
}

// dial opens a connection from 127.0.0.1 and waits until the server has
// accepted it.
func (r *limitRig) dial() net.Conn {
	r.t.Helper()
	return r.dialFrom("127.0.0.1")
}

// dialFrom is dial from another loopback address.
func (r *limitRig) dialFrom(src string) net.Conn {
	r.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	r.await(http.StateNew)
	return c
}

// await waits for one more change to state want than it has waited for
// so far.
func (r *limitRig) await(want http.ConnState) {
	r.t.Helper()
	timer := time.AfterFunc(30*time.Second, r.cond.Broadcast)
	defer timer.Stop()
	start := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.seen[want] <= r.waited[want] {
		if time.Since(start) >= 30*time.Second {
			r.t.Fatalf("no connection state %v (%d seen, %d waited for)", want, r.seen[want], r.waited[want])
		}
		r.cond.Wait()
	}
	r.waited[want]++
}

// get sends a keep-alive GET on c and reads the reply's status line.
func (r *limitRig) get(c net.Conn, br *bufio.Reader) string {
	r.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/load HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		r.t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		r.t.Fatalf("reply: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Status
}

// closedByServer reports whether the server has closed c: a read gets EOF
// (or a reset) rather than waiting.
func closedByServer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

// At the limit, the connection waiting longest without a request in
// progress is closed: a new one counts from its accept, an idle
// keep-alive one from the end of its last request.
func TestLimitConnsClosesLongestWaiting(t *testing.T) {
	r := newLimitRig(t, 3, okHandler)
	a := r.dial() // waits from its accept: oldest
	k := r.dial()
	if st := r.get(k, bufio.NewReader(k)); st != "200 OK" {
		t.Fatalf("keep-alive request: %s", st)
	}
	r.await(http.StateActive)
	r.await(http.StateIdle) // k waits from now: after a
	b := r.dial()           // after k

	d := r.dial() // the fourth: a goes
	if !closedByServer(a, 30*time.Second) {
		t.Fatal("the longest-waiting connection was not closed")
	}
	r.await(http.StateClosed)
	if s := r.lim.Stats(); s.Open != 3 || s.Accepted != 4 || s.Evicted != 1 || s.Refused != 0 {
		t.Errorf("after the fourth connection: %+v", s)
	}
	// The new connection is served, and then waits too, from now.
	if st := r.get(d, bufio.NewReader(d)); st != "200 OK" {
		t.Fatalf("the new connection: %s", st)
	}
	r.await(http.StateActive)
	r.await(http.StateIdle)

	e := r.dial() // k, idle since before b was accepted, goes next; not d
	if !closedByServer(k, 30*time.Second) {
		t.Fatal("the idle keep-alive connection was not closed")
	}
	r.await(http.StateClosed)
	for name, c := range map[string]net.Conn{"b": b, "d": d, "e": e} {
		if closedByServer(c, 50*time.Millisecond) {
			t.Errorf("%s was closed; only the longest-waiting should be", name)
		}
	}
	if s := r.lim.Stats(); s.Open != 3 || s.Accepted != 5 || s.Evicted != 2 || s.Refused != 0 {
		t.Errorf("at the end: %+v", s)
	}
}

// A flood from one address closes its own connections, not those of
// another address, even when the other's has waited longer: a director
// polls with one connection at a time.
func TestLimitConnsSparesOtherSources(t *testing.T) {
	r := newLimitRig(t, 3, okHandler)
	director := r.dialFrom("127.0.0.2") // the longest waiting
	a := r.dial()
	b := r.dial()
	for i := range 5 {
		c := r.dial()
		if !closedByServer(a, 30*time.Second) {
			t.Fatalf("flood connection %d: the flood's oldest was not closed", i)
		}
		r.await(http.StateClosed)
		a, b = b, c
	}
	if closedByServer(director, 50*time.Millisecond) {
		t.Fatal("the other address's connection was closed")
	}
	// The director's next connection makes room from the flood too.
	director2 := r.dialFrom("127.0.0.2")
	if !closedByServer(a, 30*time.Second) {
		t.Fatal("the director's second connection did not close the flood's oldest")
	}
	r.await(http.StateClosed)
	for _, c := range []net.Conn{director, director2} {
		if st := r.get(c, bufio.NewReader(c)); st != "200 OK" {
			t.Errorf("director's connection: %s", st)
		}
	}
	if s := r.lim.Stats(); s.Open != 3 || s.Accepted != 9 || s.Evicted != 6 || s.Refused != 0 {
		t.Errorf("stats %+v", s)
	}
}

// When every open connection is in the middle of a request, a new one is
// closed at once and the requests in progress finish.
func TestLimitConnsRefusesWhenAllBusy(t *testing.T) {
	entered, release := make(chan struct{}, 2), make(chan struct{})
	r := newLimitRig(t, 2, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "done")
	}))
	var busy []net.Conn
	for range 2 {
		c := r.dial()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r.await(http.StateActive)
		<-entered
		busy = append(busy, c)
	}
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closedByServer(c, 30*time.Second) {
		t.Fatal("a third connection was kept while two requests were in progress")
	}
	if s := r.lim.Stats(); s.Open != 2 || s.Refused != 1 || s.Evicted != 0 {
		t.Errorf("stats %+v", s)
	}
	close(release)
	for _, c := range busy {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request in progress: %v %v", resp, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 16))
		if !strings.Contains(string(body), "done") {
			t.Errorf("body %q", body)
		}
	}
}
