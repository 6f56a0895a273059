package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const validReport = `{"schema":1,"time":"2026-01-02T03:04:05Z","source":"host",` +
	`"cpu":0.5,"memory":0.25,"disk":0.125,"processes":1.5,` +
	`"raw":{"window_seconds":1,"cpus":2,"mem_total_bytes":1000,"psi_cpu_some10":1.5}}`

// withField returns validReport with one top-level field's value replaced.
func withField(field, value string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validReport), &m); err != nil {
		panic(err)
	}
	if value == "" {
		delete(m, field)
	} else {
		m[field] = json.RawMessage(value)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestDecodeReport(t *testing.T) {
	rep, err := DecodeReport(strings.NewReader(validReport))
	if err != nil {
		t.Fatal(err)
	}
	if rep.CPU != 0.5 || rep.Memory != 0.25 || rep.Disk != 0.125 || rep.Processes != 1.5 ||
		rep.Source != "host" || !rep.Time.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) ||
		rep.Raw.CPUs != 2 || rep.Raw.PSICPUSome10 == nil || *rep.Raw.PSICPUSome10 != 1.5 {
		t.Errorf("decoded %+v", rep)
	}

	pad := func(n int) string { return validReport + strings.Repeat(" ", n-len(validReport)) }
	ok := []struct{ name, in string }{
		{"exactly MaxReportBytes", pad(MaxReportBytes)},
		{"surrounding white space", "\n\t " + validReport + "\r\n"},
		{"unknown field ignored", withField("future", `{"x":1}`)},
		{"zero loads", withField("cpu", "0")},
		{"MaxLoad", withField("processes", "100")},
		{"time with offset", withField("time", `"2026-01-02T05:04:05+02:00"`)},
		{"cpu_time", withField("cpu_time", `{"since":"2026-01-02T03:00:00Z","busy_seconds":120.5,"sampled_seconds":241}`)},
		{"cpu_time at zero", withField("cpu_time", `{"since":"2026-01-02T03:00:00Z","busy_seconds":0,"sampled_seconds":0}`)},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeReport(strings.NewReader(tt.in)); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}

	bad := []struct{ name, in, wantErr string }{
		{"wrong schema", withField("schema", "2"), "schema 2"},
		{"no schema", withField("schema", ""), "schema 0"},
		{"schema as string", withField("schema", `"1"`), "schema"},
		{"NaN as string", withField("cpu", `"NaN"`), "cpu"},
		{"Inf as string", withField("memory", `"+Inf"`), "memory"},
		{"bare NaN", strings.Replace(validReport, `"cpu":0.5`, `"cpu":NaN`, 1), "invalid character"},
		{"negative", withField("memory", "-0.1"), "memory"},
		{"tiny negative", withField("disk", "-1e-300"), "disk"},
		{"1e9", withField("disk", "1e9"), "disk"},
		{"just above MaxLoad", withField("processes", "100.0001"), "processes"},
		{"out of float range", withField("cpu", "1e999"), "cpu"},
		{"bool", withField("cpu", "true"), "cpu"},
		{"null time", withField("time", "null"), "no time"},
		{"no time", withField("time", ""), "no time"},
		{"zero time", withField("time", `"0001-01-01T00:00:00Z"`), "no time"},
		{"bad time", withField("time", `"yesterday"`), "time"},
		{"cpu_time without since", withField("cpu_time", `{"busy_seconds":1,"sampled_seconds":2}`), "no since"},
		{"cpu_time negative", withField("cpu_time", `{"since":"2026-01-02T03:00:00Z","busy_seconds":-1,"sampled_seconds":2}`), "busy_seconds"},
		{"cpu_time sampled as string", withField("cpu_time", `{"since":"2026-01-02T03:00:00Z","busy_seconds":1,"sampled_seconds":"2"}`), "sampled_seconds"},
		{"cpu_time busy above MaxLoad×sampled", withField("cpu_time", `{"since":"2026-01-02T03:00:00Z","busy_seconds":201,"sampled_seconds":2}`), "more than 100"},
		{"cpu_time out of float range", withField("cpu_time", `{"since":"2026-01-02T03:00:00Z","busy_seconds":1,"sampled_seconds":1e999}`), "sampled_seconds"},
		{"raw wrong type", withField("raw", `{"cpus":"two"}`), "cpus"},
		{"huge body", pad(MaxReportBytes + 1), "larger than"},
		{"huge garbage", strings.Repeat("x", 10*MaxReportBytes), "larger than"},
		{"trailing garbage", validReport + "x", "after top-level value"},
		{"two objects", validReport + validReport, "after top-level value"},
		{"truncated", validReport[:len(validReport)/2], "unexpected end"},
		{"empty", "", "empty"},
		{"white space only", " \n", "empty"},
		{"array", "[" + validReport + "]", "not a JSON object"},
		{"null", "null", "not a JSON object"},
		{"number", "1", "not a JSON object"},
		{"string", `"x"`, "not a JSON object"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeReport(strings.NewReader(tt.in))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestDecodeReportReadError(t *testing.T) {
	if _, err := DecodeReport(errReader{}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("err = %v", err)
	}
}

// serve starts an httptest server answering /v1/load with h.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func reply(code int, ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != LoadPath || r.Method != http.MethodGet {
			http.Error(w, "wrong request "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	for _, base := range []string{"", "/"} {
		url := serve(t, reply(200, "application/json", validReport)) + base
		rep, err := Fetch(ctx, nil, url)
		if err != nil || rep.CPU != 0.5 {
			t.Errorf("Fetch(%s) = %+v, %v", url, rep, err)
		}
	}
	if _, err := Fetch(ctx, http.DefaultClient, serve(t, reply(200, "application/json; charset=utf-8", validReport))); err != nil {
		t.Errorf("charset parameter refused: %v", err)
	}

	tests := []struct {
		name    string
		h       http.HandlerFunc
		wantErr string
		status  int
	}{
		{"wrong content type", reply(200, "text/plain", validReport), `content type "text/plain"`, 0},
		{"no content type", reply(200, "", validReport), "content type", 0},
		{"bad content type", reply(200, "application/json;;;=", validReport), "content type", 0},
		{"503 with JSON error", reply(503, "application/json", `{"schema":1,"error":"process:42: process has exited"}`),
			"status 503: process:42: process has exited", 503},
		{"500 plain", reply(500, "text/plain", "oops\n"), "status 500: oops", 500},
		{"404", reply(404, "", ""), "status 404", 404},
		{"wrong schema", reply(200, "application/json", withField("schema", "7")), "schema 7", 0},
		{"negative", reply(200, "application/json", withField("cpu", "-1")), "cpu", 0},
		{"huge body", reply(200, "application/json", validReport+strings.Repeat(" ", MaxReportBytes)), "larger than", 0},
		{"trailing garbage", reply(200, "application/json", validReport+"{}"), "after top-level value", 0},
		{"truncated body", truncatedReply, "unexpected EOF", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := serve(t, tt.h)
			_, err := Fetch(ctx, nil, url)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "agent "+url+": ") {
				t.Errorf("err = %q, want prefix %q and %q", err, "agent "+url+": ", tt.wantErr)
			}
			var se *StatusError
			if errors.As(err, &se) != (tt.status != 0) || (se != nil && se.Code != tt.status) {
				t.Errorf("StatusError = %v, want code %d", se, tt.status)
			}
		})
	}
}

// truncatedReply promises 500 bytes and sends fewer, then hangs up.
func truncatedReply(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n%s", validReport[:40])
	buf.Flush()
}

func TestFetchSlowServer(t *testing.T) {
	release := make(chan struct{})
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Fetch(ctx, nil, url)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Fetch took %v despite a 100ms deadline", d)
	}
}

// TestFetchSlowBody: headers arrive at once, the body trickles; the
// deadline still bounds the call.
func TestFetchSlowBody(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		bw := bufio.NewWriter(w)
		for i := 0; i < len(validReport); i++ {
			bw.WriteByte(validReport[i])
			bw.Flush()
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Fetch(ctx, nil, url); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
}

func TestFetchUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	_, err = Fetch(context.Background(), nil, url)
	if err == nil || !strings.HasPrefix(err.Error(), "agent "+url+": get load: ") {
		t.Errorf("err = %v", err)
	}
	var se *StatusError
	if errors.As(err, &se) {
		t.Error("connection refused reported as a StatusError")
	}
	if _, err := Fetch(context.Background(), nil, "::not a url"); err == nil {
		t.Error("bad URL accepted")
	}
}

func FuzzDecodeReport(f *testing.F) {
	f.Add([]byte(validReport))
	f.Add([]byte(withField("cpu", `"NaN"`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := DecodeReport(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		if err := validate(rep); err != nil {
			t.Fatalf("accepted an invalid report: %v", err)
		}
		// What was accepted survives a round trip unchanged.
		again, err := json.Marshal(rep)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		rep2, err := DecodeReport(strings.NewReader(string(again)))
		if err != nil {
			t.Fatalf("re-decode of %s: %v", again, err)
		}
		if rep2.CPU != rep.CPU || rep2.Memory != rep.Memory || rep2.Disk != rep.Disk ||
			rep2.Processes != rep.Processes || !rep2.Time.Equal(rep.Time) || rep2.Source != rep.Source {
			t.Fatalf("round trip changed %+v into %+v", rep, rep2)
		}
	})
}

// TestBusyBetween: the mean busy fraction between two replies' totals,
// computed by hand.
func TestBusyBetween(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(since time.Time, busy, sampled float64) *CPUTime {
		return &CPUTime{Since: since, BusySeconds: busy, SampledSeconds: sampled}
	}
	for _, tt := range []struct {
		name      string
		prev, cur *CPUTime
		want      float64
		ok        bool
	}{
		{"5 s, 3.5 s busy", at(t0, 10, 20), at(t0, 13.5, 25), 0.7, true},
		{"idle", at(t0, 10, 20), at(t0, 10, 25), 0, true},
		{"overloaded source above 1", at(t0, 0, 0), at(t0, 6, 4), 1.5, true},
		{"capped at MaxLoad", at(t0, 0, 0), at(t0, 1000, 1), MaxLoad, true},
		{"same sample twice", at(t0, 10, 20), at(t0, 10, 20), 0, false},
		{"agent restarted", at(t0, 10, 20), at(t0.Add(time.Minute), 12, 25), 0, false},
		{"busy went backwards", at(t0, 10, 20), at(t0, 9, 25), 0, false},
		{"sampled went backwards", at(t0, 10, 20), at(t0, 11, 19), 0, false},
		{"no previous", nil, at(t0, 1, 1), 0, false},
		{"old agent", at(t0, 1, 1), nil, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := BusyBetween(tt.prev, tt.cur)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("BusyBetween = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
