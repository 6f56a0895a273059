package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"lvs-feedback/control/api"
	"lvs-feedback/internal/buildinfo"
	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
)

// Monitor is what the control server needs of lvs-monitor.
// *monitor.Monitor implements it.
type Monitor interface {
	Status() monitor.Status
	// DrainConfirmed and UndrainConfirmed return when the request holds
	// here and the director pair's peer holds it too, or cannot.
	DrainConfirmed(ctx context.Context, svc ipvs.ServiceKey, dst netip.AddrPort) (monitor.Replication, error)
	UndrainConfirmed(ctx context.Context, svc ipvs.ServiceKey, dst netip.AddrPort) (monitor.Replication, error)
	Explain(svc ipvs.ServiceKey, dst netip.AddrPort) (monitor.Explanation, error)
}

var _ Monitor = (*monitor.Monitor)(nil)

// ReloadFunc re-reads the configuration file and either applies it
// (monitor.Monitor.Reload) or records the failure
// (monitor.Monitor.ReloadFailed) and returns it. notes are for the operator
// (keys that need a restart, …).
type ReloadFunc func() (notes []string, err error)

// ConnReader reads the IPVS table now, for live connection counts while a
// drain waits. ipvs.Table implements it.
type ConnReader interface {
	Destinations(svc ipvs.ServiceKey) ([]ipvs.Destination, error)
}

// Options configure a Server. Path and Monitor are required.
type Options struct {
	Path    string // the socket, e.g. /run/lvs-monitor/control.sock
	Monitor Monitor
	// Reload serves POST /v1/reload; nil answers "unavailable".
	Reload ReloadFunc
	// Conns, if set, gives live figures to GET /v1/connections; without it
	// they come from the last cycle.
	Conns  ConnReader
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Server serves the control protocol on a unix socket.
type Server struct {
	opts  Options
	log   *slog.Logger
	build api.Build // this binary's, in every status reply
	ln    net.Listener
	srv   *http.Server

	mu         sync.Mutex
	closedPath bool
}

// Listen creates the control socket (see the package documentation for its
// rules) and returns a Server ready to Serve.
func Listen(opts Options) (*Server, error) {
	if opts.Monitor == nil || opts.Path == "" {
		return nil, errors.New("control: Path and Monitor are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ln, err := listenSocket(opts.Path, opts.Logger)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:  opts,
		log:   opts.Logger,
		build: apiBuild(buildinfo.Read()),
		ln:    peerListener{UnixListener: ln, uid: os.Geteuid(), log: opts.Logger},
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// A drain waits for a running cycle (probes and polls bounded by
		// their timeouts, which are shorter than the interval).
		WriteTimeout:   2 * time.Minute,
		IdleTimeout:    30 * time.Second,
		MaxHeaderBytes: 8 << 10,
		ErrorLog:       slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.opts.Path }

// Serve answers requests until Shutdown; it then returns nil.
func (s *Server) Serve() error {
	err := s.srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting requests, waits for the running ones until ctx
// ends, and removes the socket.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closedPath {
		s.closedPath = true
		if rmErr := os.Remove(s.opts.Path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
			err = rmErr
		}
	}
	return err
}

// Handler returns the protocol's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("GET /v1/explain", s.handleExplain)
	mux.HandleFunc("GET /v1/connections", s.handleConnections)
	mux.HandleFunc("POST /v1/drain", s.handleDrain)
	mux.HandleFunc("POST /v1/undrain", s.handleUndrain)
	mux.HandleFunc("POST /v1/reload", s.handleReload)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeBadRequest, fmt.Sprintf("no such request: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, &api.Error{Code: code, Message: msg})
}

// writeMonitorError maps the monitor's errors to codes.
func writeMonitorError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, monitor.ErrNotManaged):
		writeError(w, http.StatusNotFound, api.CodeNotManaged, err.Error()+"; lvs-monitor does not own its weight (use ipvsadm)")
	case errors.Is(err, ipvs.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeNotFound, err.Error())
	case errors.Is(err, ipvs.ErrWeightChanged):
		writeError(w, http.StatusConflict, api.CodeConflict, err.Error()+"; another tool changed the weight, try again")
	case errors.Is(err, monitor.ErrDryRun):
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

// ParseTarget parses a service ("VIP:PORT/proto", "fwmark:N") and a real
// server ("RIP:PORT"; a bare RIP takes the service's port, as ipvsadm
// does). api.CheckTarget is its copy for clients, which may not import
// ipvs; agree_test.go keeps the two in step.
func ParseTarget(service, server string) (ipvs.ServiceKey, netip.AddrPort, error) {
	svc, err := ipvs.ParseServiceKey(strings.TrimSpace(service))
	if err != nil {
		return ipvs.ServiceKey{}, netip.AddrPort{}, err
	}
	server = strings.TrimSpace(server)
	dst, err := netip.ParseAddrPort(server)
	if err != nil {
		a, aerr := netip.ParseAddr(strings.Trim(server, "[]"))
		if aerr != nil {
			return ipvs.ServiceKey{}, netip.AddrPort{}, fmt.Errorf("server %q: want RIP:PORT as in ipvsadm -L -n", server)
		}
		dst = netip.AddrPortFrom(a, svc.Addr.Port())
	}
	return svc, netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port()), nil
}

func (s *Server) target(w http.ResponseWriter, service, server string) (monitor.DestKey, bool) {
	svc, dst, err := ParseTarget(service, server)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return monitor.DestKey{}, false
	}
	return monitor.DestKey{Service: svc, Dest: dst}, true
}

func (s *Server) bodyTarget(w http.ResponseWriter, r *http.Request) (monitor.DestKey, bool) {
	var t api.Target
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "request body: "+err.Error())
		return monitor.DestKey{}, false
	}
	return s.target(w, t.Service, t.Server)
}

func (s *Server) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.status(s.opts.Monitor.Status()))
}

func (s *Server) handleExplain(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r.URL.Query().Get("service"), r.URL.Query().Get("server"))
	if !ok {
		return
	}
	st := s.opts.Monitor.Status()
	if st.LastCycle.Start.IsZero() {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "no cycle has completed yet; try again in one interval")
		return
	}
	if _, configured := configuredServer(st.Config, k); !configured {
		writeMonitorError(w, fmt.Errorf("%s %s: %w", k.Service, k.Dest, monitor.ErrNotManaged))
		return
	}
	e, err := s.opts.Monitor.Explain(k.Service, k.Dest)
	if errors.Is(err, monitor.ErrNotManaged) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("%s %s: configured, but not in the IPVS table at the last cycle", k.Service, k.Dest))
		return
	}
	if err != nil {
		writeMonitorError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.explanation(st, e))
}

func (s *Server) handleConnections(w http.ResponseWriter, r *http.Request) {
	k, ok := s.target(w, r.URL.Query().Get("service"), r.URL.Query().Get("server"))
	if !ok {
		return
	}
	c, err := s.connections(k)
	if err != nil {
		writeMonitorError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) connections(k monitor.DestKey) (api.Connections, error) {
	c := api.Connections{Service: k.Service.String(), Server: k.Dest.String(), At: s.opts.Now()}
	if s.opts.Conns != nil {
		dests, err := s.opts.Conns.Destinations(k.Service)
		if err != nil {
			return c, err
		}
		for _, d := range dests {
			if d.Addr == k.Dest {
				c.Weight, c.ActiveConns, c.InactiveConns, c.Live = d.Weight, d.ActiveConns, d.InactiveConns, true
				return c, s.persistence(k, &c)
			}
		}
		return c, fmt.Errorf("%s %s: %w", k.Service, k.Dest, ipvs.ErrNotFound)
	}
	last := s.opts.Monitor.Status().LastCycle
	for _, d := range last.Dests {
		if d.Key == k {
			c.Weight, c.ActiveConns, c.InactiveConns, c.At = d.KernelWeight, d.ActiveConns, d.InactiveConns, last.Start
			return c, nil
		}
	}
	return c, fmt.Errorf("%s %s: %w (at the last cycle)", k.Service, k.Dest, ipvs.ErrNotFound)
}

// persistence adds the server's persistence templates to c when the
// table can count them. They are read after the connection counts: a
// template does not expire while it holds a connection, so no template
// here after no connection there means the server is empty.
func (s *Server) persistence(k monitor.DestKey, c *api.Connections) error {
	tr, ok := s.opts.Conns.(ipvs.TemplateReader)
	if !ok {
		return nil
	}
	p, err := tr.Persistence(k.Service)
	if err != nil {
		return err
	}
	n := p.Templates[k.Dest]
	c.PersistConns, c.PersistTimeoutSeconds = &n, int(p.Timeout/time.Second)
	return nil
}

func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request) {
	k, ok := s.bodyTarget(w, r)
	if !ok {
		return
	}
	rep, err := s.opts.Monitor.DrainConfirmed(r.Context(), k.Service, k.Dest)
	if err != nil {
		writeMonitorError(w, err)
		return
	}
	s.log.Info("control: drain", "service", k.Service, "server", k.Dest, "directors", rep.String())
	ack := api.Ack{Service: k.Service.String(), Server: k.Dest.String(), Weight: 0, LocalOnly: !rep.Everywhere(),
		Message: reply(rep, "weight 0, existing connections finish, no new ones; kept across restarts and table rebuilds until lvsctl undrain")}
	if srv, ok := configuredServer(s.opts.Monitor.Status().Config, k); ok {
		ack.DefaultWeight = srv.Weight
	}
	writeJSON(w, http.StatusOK, ack)
}

func (s *Server) handleUndrain(w http.ResponseWriter, r *http.Request) {
	k, ok := s.bodyTarget(w, r)
	if !ok {
		return
	}
	rep, err := s.opts.Monitor.UndrainConfirmed(r.Context(), k.Service, k.Dest)
	if err != nil {
		writeMonitorError(w, err)
		return
	}
	s.log.Info("control: undrain", "service", k.Service, "server", k.Dest, "directors", rep.String())
	st := s.opts.Monitor.Status()
	ack := api.Ack{Service: k.Service.String(), Server: k.Dest.String(), LocalOnly: !rep.Everywhere()}
	if srv, ok := configuredServer(st.Config, k); ok {
		ack.DefaultWeight = srv.Weight
	}
	for _, d := range st.LastCycle.Dests {
		if d.Key == k && d.DefaultWeight > 0 {
			ack.DefaultWeight = d.DefaultWeight // an operator's override, if any
		}
	}
	if c, err := s.connections(k); err == nil && c.Live {
		ack.Weight = c.Weight
	}
	if ss := st.Config.Availability.SlowStart; ss > 0 && ack.Weight != ack.DefaultWeight {
		ack.Message = reply(rep, fmt.Sprintf("weight %d now, ramping to about %d over %v (slow start), then managed", ack.Weight, ack.DefaultWeight, ss))
	} else {
		ack.Message = reply(rep, fmt.Sprintf("weight %d, managed again", ack.Weight))
	}
	writeJSON(w, http.StatusOK, ack)
}

// reply is an operator request's answer: where it holds ("drained on both
// directors", "drained here only: peer unreachable (…)"), then what it did
// here.
func reply(rep monitor.Replication, here string) string {
	if rep.Everywhere() {
		return rep.String() + ": " + here
	}
	return rep.String() + ". Here: " + here
}

func (s *Server) handleReload(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Reload == nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "this lvs-monitor cannot reload")
		return
	}
	notes, err := s.opts.Reload()
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, api.CodeReloadFailed, err.Error()+"\nthe running configuration stays")
		return
	}
	writeJSON(w, http.StatusOK, api.Reload{OK: true, Notes: notes})
}

// configuredServer finds a configured real server.
func configuredServer(cfg monitor.Config, k monitor.DestKey) (monitor.ServerConfig, bool) {
	for _, svc := range cfg.Services {
		if svc.Key != k.Service {
			continue
		}
		for _, srv := range svc.Servers {
			if srv.Addr == k.Dest {
				return srv, true
			}
		}
	}
	return monitor.ServerConfig{}, false
}
