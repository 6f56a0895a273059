package agent

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// The agent's HTTP paths.
const (
	LoadPath   = "/v1/load" // GET: the latest Report
	HealthPath = "/healthz" // GET: 200 while the sampler makes progress
)

// Server timeouts and limits. A reply is a few hundred bytes and is served
// from memory, so every bound can be tight. A poller sends its whole
// request at once and lvs-monitor opens a connection per poll, so a
// connection that has sent no complete header after a second, or sits idle
// for five, is not a poller's and only holds a slot.
const (
	readHeaderTimeout = 1 * time.Second
	readTimeout       = 5 * time.Second
	writeTimeout      = 5 * time.Second
	idleTimeout       = 5 * time.Second
	maxHeaderBytes    = 4 << 10
	maxErrorLen       = 512
)

// errorReply is the body of every non-200 reply.
type errorReply struct {
	Schema int    `json:"schema"`
	Source string `json:"source,omitempty"`
	Error  string `json:"error"`
}

type handler struct{ s *Sampler }

// NewHandler serves the agent's API from s:
//
//	GET /v1/load  200 and the latest Report as JSON; 503 and a JSON error
//	              before the first sample, when sampling failed or stalled
//	GET /healthz  200 {"status":"ok"} while the sampler makes progress,
//	              503 when it is stuck (sampling errors do not count)
//
// HEAD is accepted wherever GET is; other methods get 405, other paths 404.
// A request body is never read.
func NewHandler(s *Sampler) http.Handler { return handler{s: s} }

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if r.ContentLength != 0 {
		// Do not let net/http drain a body we will never read.
		hdr.Set("Connection", "close")
	}
	if r.URL.Path != LoadPath && r.URL.Path != HealthPath {
		h.error(w, http.StatusNotFound, "not found")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		h.error(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	if r.URL.Path == HealthPath {
		if !h.s.Alive() {
			h.error(w, http.StatusServiceUnavailable, "sampler stalled")
			return
		}
		writeJSON(w, http.StatusOK, []byte("{\"status\":\"ok\"}\n"))
		return
	}
	body, err := h.s.body()
	if err != nil {
		h.error(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (h handler) error(w http.ResponseWriter, code int, msg string) {
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
	}
	b, err := json.Marshal(errorReply{Schema: SchemaVersion, Source: h.s.src.Name(), Error: msg})
	if err != nil { // cannot happen: strings always marshal
		b = []byte(`{"error":"internal"}`)
	}
	writeJSON(w, code, append(b, '\n'))
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// NewServer returns an http.Server for h on addr with every timeout set and
// small header limits; serve it on a listener from [LimitConns] to bound
// its connections too. Errors net/http logs (bad requests, panics) go to log
// at warning level; a nil log discards them.
func NewServer(addr string, h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
