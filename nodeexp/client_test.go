package nodeexp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// serve answers every request on a loopback socket with handler.
func serve(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

func textReply(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}
}

// Over a real loopback socket: the first poll measures nothing and says
// so; the second derives from the pair; a failed scrape in between keeps
// the baseline.
func TestPollBaseline(t *testing.T) {
	bodies := []string{minimal, "garbage", strings.NewReplacer(
		`{cpu="0",mode="idle"} 100`, `{cpu="0",mode="idle"} 102`,
		`{cpu="0",mode="user"} 50`, `{cpu="0",mode="user"} 53`,
		`{cpu="1",mode="idle"} 120`, `{cpu="1",mode="idle"} 124`,
		`{cpu="1",mode="user"} 30`, `{cpu="1",mode="user"} 31`,
	).Replace(minimal)}
	n := 0
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "" || !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
			t.Errorf("request headers %v", r.Header)
		}
		textReply(bodies[n])(w, r)
		n++
	})
	c := NewClient()
	var base Snapshot
	_, err := c.Poll(context.Background(), url, time.Second, time.Minute, &base)
	if !errors.Is(err, ErrNoBaseline) || !strings.HasPrefix(err.Error(), "node_exporter "+url+": first scrape") {
		t.Fatalf("first poll: %v", err)
	}
	if base.Target != url || base.CPU["0"]["idle"] != 100 {
		t.Fatalf("baseline %+v", base)
	}
	if _, err := c.Poll(context.Background(), url, time.Second, time.Minute, &base); err == nil || errors.Is(err, ErrNoBaseline) {
		t.Fatalf("garbage: %v", err)
	}
	if base.CPU["0"]["idle"] != 100 {
		t.Fatalf("a failed scrape replaced the baseline: %+v", base)
	}
	r, err := c.Poll(context.Background(), url, time.Second, time.Minute, &base)
	if err != nil {
		t.Fatal(err)
	}
	// cpu0: 3 busy, 2 idle; cpu1: 1 busy, 4 idle → 4/10.
	if !near(r.CPU, 0.4) || r.Source != SourceName || base.CPU["0"]["idle"] != 102 {
		t.Errorf("report %+v, baseline %+v", r, base)
	}
}

func TestScrapeRefuses(t *testing.T) {
	huge := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := []byte(strings.Repeat("# comment\n", 1000))
		for range 200 { // 2 MB
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		msg     string
	}{
		{"status", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "An error has occurred while serving metrics", http.StatusInternalServerError)
		}, "status 500: An error has occurred"},
		{"JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"schema":1}`))
		}, `content type "application/json", want text/plain`},
		{"OpenMetrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0")
			_, _ = w.Write([]byte(minimal))
		}, "want text/plain"},
		{"huge", huge, "larger than 1048576 bytes"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://192.0.2.1:9100/metrics", http.StatusFound)
		}, "status 302"},
		{"broken", textReply("node_cpu_seconds_total{"), "parse exposition"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := serve(t, tc.handler)
			var base Snapshot
			_, err := NewClient().Poll(context.Background(), url, 5*time.Second, time.Minute, &base)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %q", err, tc.msg)
			}
			if base.CPU != nil {
				t.Errorf("a refused scrape became the baseline")
			}
		})
	}
}

// An exporter that accepts and never answers costs the poll its timeout,
// no more.
func TestPollTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent
		}
	}()
	var base Snapshot
	start := time.Now()
	_, err = NewClient().Poll(context.Background(), "http://"+ln.Addr().String()+"/metrics", 200*time.Millisecond, time.Minute, &base)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("poll took %v with a 200ms timeout", d)
	}
}

func TestTargetURL(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.51.100.11"), netip.MustParseAddr("2001:db8::11")
	for _, tc := range []struct {
		in   string
		addr netip.Addr
		want string
		err  string
	}{
		{"", v4, "http://198.51.100.11:9100/metrics", ""},
		{"", v6, "http://[2001:db8::11]:9100/metrics", ""},
		{"", netip.Addr{}, "", ""},
		{"http://10.0.0.5:9100/metrics", v4, "http://10.0.0.5:9100/metrics", ""},
		{"https://node.example:9100/metrics", v4, "https://node.example:9100/metrics", ""},
		{"10.0.0.5:9100", v4, "", "want the node_exporter URL, e.g."},
		{"localhost:9100/metrics", v4, "", "want an http:// or https:// URL"},
		{"ftp://10.0.0.5/metrics", v4, "", "want an http:// or https:// URL"},
		{"http://:9100/metrics", v4, "", "has no host"},
		{"http://u:p@10.0.0.5:9100/metrics", v4, "", "carries credentials"},
		{"http://10.0.0.5:9100", v4, "", "has no path"},
		{"http://10.0.0.5:9100/metrics#x", v4, "", "has a fragment"},
		{"http://10.0.0.5:9100/%zz", v4, "", "want the node_exporter URL"},
	} {
		got, err := TargetURL(tc.in, tc.addr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("TargetURL(%q): %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("TargetURL(%q, %v) = %q, %v; want %q", tc.in, tc.addr, got, err, tc.want)
		}
	}
}
