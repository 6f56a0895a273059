package monitor

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// hostileAgents are agent replies a broken or hostile agent might send.
var hostileAgents = []struct {
	name    string
	handler http.HandlerFunc
}{
	{"malformed JSON", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"schema":1,"cpu":`))
	}},
	{"wrong schema", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"schema":2,"time":%q,"cpu":0.1}`, time.Now().Format(time.RFC3339))
	}},
	{"NaN as a string", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"schema":1,"time":%q,"cpu":"NaN"}`, time.Now().Format(time.RFC3339))
	}},
	{"negative", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"schema":1,"time":%q,"cpu":-0.5}`, time.Now().Format(time.RFC3339))
	}},
	{"huge number", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"schema":1,"time":%q,"cpu":1e308}`, time.Now().Format(time.RFC3339))
	}},
	{"10 MB body", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"schema":1,"pad":"`))
		w.Write(bytes.Repeat([]byte("x"), 10<<20))
		w.Write([]byte(`"}`))
	}},
	{"slow drip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for _, c := range []byte(`{"schema":1,"cpu":0.1}`) {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			w.Write([]byte{c})
			w.(http.Flusher).Flush()
		}
	}},
	{"never ends", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"schema":1,`))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}},
	{"reset connection", func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	}},
	{"wrong content type", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `{"schema":1,"time":%q,"cpu":0.1}`, time.Now().Format(time.RFC3339))
	}},
	{"500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }},
}

// TestHostileAgentReplies: every broken reply is an agent failure — the
// weight is kept, nothing is written from bad data, the failure is counted —
// and nothing leaks (goroutines, descriptors).
func TestHostileAgentReplies(t *testing.T) {
	goroutines0, fds0 := runtime.NumGoroutine(), openFDs(t)
	var conf strings.Builder
	fmt.Fprintf(&conf, "interval = \"2s\"\nagent_timeout = \"700ms\"\nprobe_timeout = \"700ms\"\nstate_dir = %q\n[[service]]\naddress = \"192.0.2.1:80/tcp\"\n", t.TempDir())
	table := ipvs.NewMem()
	svc := ipvs.ServiceKey{Protocol: ipvs.TCP, Addr: netip.MustParseAddrPort("192.0.2.1:80")}
	must(t, table.AddService(svc, "wrr"))
	var servers []*http.Server
	for i, h := range hostileAgents {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		srv := &http.Server{Handler: h.handler, ReadHeaderTimeout: time.Second}
		go srv.Serve(ln)
		servers = append(servers, srv)
		rs := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}), 80)
		must(t, table.AddDestination(svc, rs, 10))
		fmt.Fprintf(&conf, "[[service.server]]\naddress = %q\nweight = 10\nagent = %q\n", rs, ln.Addr().String())
	}
	cfg, err := ParseConfig("hostile.toml", []byte(conf.String()))
	must(t, err)
	store, err := NewFileStore(cfg.StateDir)
	must(t, err)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	client := NewHTTPAgentClient()
	m, err := New(cfg, Deps{Table: table, Agents: client, Prober: &stubProber{down: map[netip.AddrPort]bool{}}, Store: store, Metrics: metrics}, false)
	must(t, err)

	start := time.Now()
	rep := cycle(t, m)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a cycle with hostile agents took %v; each poll is bounded by agent_timeout", d)
	}
	if rep.Writes != 0 {
		t.Errorf("%d weights written from bad agent replies", rep.Writes)
	}
	for i, h := range hostileAgents {
		s := rep.Dests[i]
		if s.AgentErr == nil || s.KernelWeight != 10 || s.State != policy.Managed {
			t.Errorf("%s: agent error %v, weight %d, state %s; want an error, 10, managed", h.name, s.AgentErr, s.KernelWeight, s.State)
		}
		if got := testutil.ToFloat64(metrics.agentErrors.WithLabelValues(svc.String(), s.Key.Dest.String())); got != 1 {
			t.Errorf("%s: agent_poll_errors_total %v, want 1", h.name, got)
		}
	}

	for _, srv := range servers {
		srv.Close()
	}
	client.Client.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines0+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > goroutines0+2 {
		t.Errorf("goroutines: %d before, %d after", goroutines0, g)
	}
	if f := openFDs(t); f > fds0+2 {
		t.Errorf("open descriptors: %d before, %d after", fds0, f)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	return len(ents)
}
