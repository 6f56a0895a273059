package monitor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// Config is lvs-monitor's configuration, read from TOML by LoadConfig.
// docs/examples/lvs-monitor.toml documents every key.
type Config struct {
	Interval     time.Duration `toml:"interval"`
	AgentTimeout time.Duration `toml:"agent_timeout"`
	ProbeTimeout time.Duration `toml:"probe_timeout"`
	// Concurrency bounds how many agent polls and probes run at once.
	Concurrency int    `toml:"concurrency"`
	StateDir    string `toml:"state_dir"`
	// AgentPort is where agents listen when a server names no agent.
	AgentPort int `toml:"agent_port"`
	// MetricsListen is the address of the Prometheus /metrics endpoint;
	// empty disables it.
	MetricsListen string `toml:"metrics_listen"`
	// ControlSocket is the unix socket lvsctl talks to (root only).
	ControlSocket string `toml:"control_socket"`

	Coefficients policy.Coefficients `toml:"coefficients"`
	Weight       policy.WeightParams `toml:"weight"`
	Availability policy.Availability `toml:"availability"`
	Guard        policy.GuardParams  `toml:"backlog_guard"`
	Sync         SyncConfig          `toml:"sync"`
	Services     []ServiceConfig     `toml:"service"`
}

// Policy returns the settings that shape decisions.
func (c Config) Policy() policy.Params {
	return policy.Params{Coefficients: c.Coefficients, Weight: c.Weight, Availability: c.Availability, Guard: c.Guard}
}

// SyncConfig makes this director one of a synchronised group
// (docs/director-pair.md). Without an id the director runs alone.
type SyncConfig struct {
	ID      string       `toml:"id"`       // this director's id, unique in the group
	Listen  string       `toml:"listen"`   // address the sync listener binds, HOST:PORT
	KeyFile string       `toml:"key_file"` // shared HMAC key, mode 0600, ≥ 32 bytes
	Role    string       `toml:"role"`     // "vip" (follow keepalived), "active" or "standby"
	VIPs    []string     `toml:"vips"`     // role "vip": active while any is local; default: the services' VIPs
	Peers   []PeerConfig `toml:"peer"`

	VIPAddrs []netip.Addr `toml:"-"`
}

// PeerConfig is another director of the group.
type PeerConfig struct {
	ID      string `toml:"id"`
	Address string `toml:"address"` // its sync listener, HOST:PORT
}

// Enabled reports whether the director is part of a synchronised group.
func (s SyncConfig) Enabled() bool { return s.ID != "" }

// ServiceConfig is one virtual service and the real servers the daemon
// manages in it.
type ServiceConfig struct {
	Address   string         `toml:"address"` // "VIP:PORT/PROTO" or "fwmark:N[/inet6]"
	AgentPort int            `toml:"agent_port"`
	Probe     ProbeConfig    `toml:"probe"`
	Servers   []ServerConfig `toml:"server"`
	// HealthChecker names the daemon that health-checks the service's
	// servers and adds, removes, zeroes and re-enables them by itself
	// (keepalived's checker); "" when none. It changes who a weight is
	// attributed to (policy.Reconcile; docs/keepalived.md).
	HealthChecker string `toml:"health_checker"`

	Key ipvs.ServiceKey `toml:"-"`
}

// ProbeConfig describes how the director measures a real server's response
// time and decides it is reachable.
type ProbeConfig struct {
	Type         string        `toml:"type"` // "tcp" or "http"
	Path         string        `toml:"path"` // http: path to GET
	Host         string        `toml:"host"` // http: Host header, optional
	ExpectStatus int           `toml:"expect_status"`
	Port         int           `toml:"port"` // default: the real server's port
	Reference    time.Duration `toml:"reference"`
}

// ServerConfig is one real server.
type ServerConfig struct {
	Address string `toml:"address"` // RIP:PORT as in the IPVS table
	Weight  int    `toml:"weight"`  // default weight; 0 is refused (drain with ipvsadm or lvsctl)
	Agent   string `toml:"agent"`   // HOST:PORT of its agent; default RIP:agent_port

	Addr      netip.AddrPort `toml:"-"`
	AgentAddr string         `toml:"-"`
}

// DefaultConfig returns the documented defaults: the LVS web-cluster example
// coefficients {0.1, 0.3, 0.1, 0.1, 0.3, 0.1}, gain 5, target 0.95, scale 10.
func DefaultConfig() Config {
	return Config{
		Interval:      5 * time.Second,
		AgentTimeout:  2 * time.Second,
		ProbeTimeout:  2 * time.Second,
		Concurrency:   64,
		StateDir:      "/var/lib/lvs-monitor",
		AgentPort:     agent.DefaultPort,
		MetricsListen: "127.0.0.1:9772", // no authentication, and it names every server: docs/metrics.md
		ControlSocket: "/run/lvs-monitor/control.sock",
		Coefficients:  policy.Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.3, Process: 0.1},
		Weight: policy.WeightParams{Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1,
			Controller: policy.ControllerCapacity, Smoothing: 0.7, Band: 0.2, Resolution: 20, Saturation: 0.9, Anchor: 0.15, Confirm: 3},
		Availability: policy.Availability{FreezeShare: 0.5, AgentExpiry: 30 * time.Second, SlowStart: 30 * time.Second, SlowStartFloor: 0.1,
			Fall: 2, Rise: 1},
		Guard: policy.GuardParams{Check: time.Second, Trigger: 2, Release: 1.5, MinExcess: 16, Raise: true},
	}
}

func defaultProbe() ProbeConfig {
	return ProbeConfig{Type: "tcp", ExpectStatus: 200, Path: "/", Reference: 100 * time.Millisecond}
}

// ConfigError is a configuration mistake, naming the key and, where known,
// the line.
type ConfigError struct {
	File string
	Line int    // 0 when unknown
	Key  string // dotted key, e.g. "service[0].server[1].weight"
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes TOML over the defaults and checks every value. The
// error lists every mistake found, one per line (errors.Join of
// *ConfigError).
func ParseConfig(name string, data []byte) (Config, error) {
	cfg := DefaultConfig()
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Config{}, &ConfigError{File: name, Line: pe.Position.Line, Msg: pe.Message}
		}
		return Config{}, &ConfigError{File: name, Msg: err.Error()}
	}
	var errs []error
	for _, k := range md.Undecoded() {
		errs = append(errs, unknownKeyError(name, data, k))
	}
	if len(errs) > 0 {
		// Unknown keys first: a typo may explain every later complaint.
		return Config{}, errors.Join(errs...)
	}
	if err := cfg.check(name, data); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// check validates cfg and fills the derived fields (keys, addresses).
func (cfg *Config) check(name string, data []byte) error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, &ConfigError{File: name, Line: findKeyLine(data, key), Key: key, Msg: fmt.Sprintf(format, a...)})
	}
	positiveDuration := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, "must be a positive duration such as \"5s\", got %v", d)
		}
	}
	positiveDuration("interval", cfg.Interval)
	positiveDuration("agent_timeout", cfg.AgentTimeout)
	positiveDuration("probe_timeout", cfg.ProbeTimeout)
	if cfg.Interval > 0 {
		if cfg.AgentTimeout >= cfg.Interval {
			bad("agent_timeout", "must be shorter than interval (%v), got %v", cfg.Interval, cfg.AgentTimeout)
		}
		if cfg.ProbeTimeout >= cfg.Interval {
			bad("probe_timeout", "must be shorter than interval (%v), got %v", cfg.Interval, cfg.ProbeTimeout)
		}
	}
	if cfg.Concurrency < 1 {
		bad("concurrency", "must be at least 1, got %d", cfg.Concurrency)
	}
	if cfg.StateDir == "" {
		bad("state_dir", "must name a directory")
	}
	if cfg.MetricsListen != "" {
		if _, port, err := net.SplitHostPort(cfg.MetricsListen); err != nil || port == "" {
			bad("metrics_listen", "want [HOST]:PORT or \"\" to disable, got %q", cfg.MetricsListen)
		}
	}
	if cfg.ControlSocket == "" || !strings.HasPrefix(cfg.ControlSocket, "/") {
		bad("control_socket", "must be an absolute path, got %q", cfg.ControlSocket)
	}
	if cfg.AgentPort < 1 || cfg.AgentPort > 65535 {
		bad("agent_port", "must be a port from 1 to 65535, got %d", cfg.AgentPort)
	}

	c := cfg.Coefficients
	for _, f := range []struct {
		key string
		v   float64
	}{
		{"coefficients.input", c.Input}, {"coefficients.cpu", c.CPU}, {"coefficients.memory", c.Memory},
		{"coefficients.disk", c.Disk}, {"coefficients.response", c.Response}, {"coefficients.process", c.Process},
	} {
		if f.v < 0 || f.v > 1 || math.IsNaN(f.v) {
			bad(f.key, "must be between 0 and 1, got %v", f.v)
		}
	}
	if s := c.Sum(); math.Abs(s-1) > 0.001 {
		bad("coefficients", "must sum to 1 (±0.001), they sum to %.4f (input %v + cpu %v + memory %v + disk %v + response %v + process %v)",
			s, c.Input, c.CPU, c.Memory, c.Disk, c.Response, c.Process)
	}

	w := cfg.Weight
	if !(w.Gain > 0) || math.IsInf(w.Gain, 0) {
		bad("weight.gain", "must be a positive number, got %v", w.Gain)
	}
	if !(w.Target > 0) || w.Target > 10 {
		bad("weight.target", "must be a load above 0 (0.95 is the documented target), got %v", w.Target)
	}
	if !(w.Scale >= 1) || math.IsInf(w.Scale, 0) {
		bad("weight.scale", "must be at least 1, got %v", w.Scale)
	}
	if w.Min < 1 || w.Min > ipvs.MaxWeight {
		bad("weight.min", "must be from 1 to %d (only an unreachable server or an operator gets weight 0), got %d", ipvs.MaxWeight, w.Min)
	}
	if w.Threshold < 0 || w.Threshold > ipvs.MaxWeight {
		bad("weight.threshold", "must be from 0 to %d, got %d", ipvs.MaxWeight, w.Threshold)
	}

	if _, err := policy.NewController(w); err != nil {
		bad("weight.controller", "must be %q or %q, got %q", policy.ControllerCapacity, policy.ControllerLVS, w.Controller)
	}
	if !(w.Smoothing >= 0 && w.Smoothing < 1) {
		bad("weight.smoothing", "must be from 0 to below 1, got %v", w.Smoothing)
	}
	if !(w.Band >= 0 && w.Band < 1) {
		bad("weight.band", "must be from 0 to below 1 (a share of the current weight), got %v", w.Band)
	}
	if w.Confirm < 1 || w.Confirm > 100 {
		bad("weight.confirm", "must be from 1 (at once) to 100 intervals, got %d", w.Confirm)
	}
	if !(w.Anchor >= 0 && w.Anchor < 1) {
		bad("weight.anchor", "must be from 0 (off) to below 1 (a share of the median), got %v", w.Anchor)
	}
	if !(w.Saturation >= 0 && w.Saturation <= 1) {
		bad("weight.saturation", "must be from 0 (off) to 1, got %v", w.Saturation)
	}
	if w.Resolution < 1 || w.Resolution > ipvs.MaxWeight || w.Resolution < w.Min {
		bad("weight.resolution", "must be from weight.min to %d, got %d", ipvs.MaxWeight, w.Resolution)
	}

	gc := cfg.Guard
	if gc.Check < 0 {
		bad("backlog_guard.check", "must not be negative (0 disables the guard), got %v", gc.Check)
	}
	if !(gc.Trigger > 1) {
		bad("backlog_guard.trigger", "must be above 1 (a multiple of the median active connections per unit of weight), got %v", gc.Trigger)
	}
	if !(gc.Release >= 1 && gc.Release < gc.Trigger) {
		bad("backlog_guard.release", "must be from 1 to below trigger (%v), got %v", gc.Trigger, gc.Release)
	}
	if gc.MinExcess < 0 {
		bad("backlog_guard.min_excess", "must not be negative, got %d", gc.MinExcess)
	}

	av := cfg.Availability
	if !(av.FreezeShare > 0 && av.FreezeShare <= 1) {
		bad("availability.freeze_share", "must be above 0 and at most 1 (1 disables the freeze), got %v", av.FreezeShare)
	}
	if av.AgentExpiry < 0 {
		bad("availability.agent_expiry", "must not be negative, got %v", av.AgentExpiry)
	} else if cfg.Interval > 0 && av.AgentExpiry < cfg.Interval {
		bad("availability.agent_expiry", "must be at least one interval (%v), got %v", cfg.Interval, av.AgentExpiry)
	}
	if av.SlowStart < 0 {
		bad("availability.slow_start", "must not be negative (0 disables it), got %v", av.SlowStart)
	}
	if !(av.SlowStartFloor > 0 && av.SlowStartFloor <= 1) {
		bad("availability.slow_start_floor", "must be above 0 and at most 1, got %v", av.SlowStartFloor)
	}
	if av.Fall < 1 || av.Fall > 10 {
		bad("availability.fall", "must be from 1 (at the first failed probe) to 10, got %d", av.Fall)
	}
	if av.Rise < 1 || av.Rise > 10 {
		bad("availability.rise", "must be from 1 (at the first answer) to 10, got %d", av.Rise)
	}

	cfg.checkSync(bad)

	if len(cfg.Services) == 0 {
		bad("service", "no [[service]] configured: nothing to manage")
	}
	seenSvc := map[ipvs.ServiceKey]int{}
	for i := range cfg.Services {
		s := &cfg.Services[i]
		p := fmt.Sprintf("service[%d]", i)
		key, err := ipvs.ParseServiceKey(s.Address)
		if err != nil {
			bad(p+".address", "%v", err)
		} else if j, dup := seenSvc[key]; dup {
			bad(p+".address", "%s is already configured as service[%d]", key, j)
		} else {
			seenSvc[key] = i
			s.Key = key
		}
		if s.AgentPort == 0 {
			s.AgentPort = cfg.AgentPort
		} else if s.AgentPort < 0 || s.AgentPort > 65535 {
			bad(p+".agent_port", "must be a port from 1 to 65535, got %d", s.AgentPort)
		}
		s.Probe = withProbeDefaults(s.Probe)
		checkProbe(s.Probe, p+".probe", bad)
		switch s.HealthChecker {
		case "", "keepalived", "ldirectord", "other":
		default:
			bad(p+".health_checker", `want "keepalived", "ldirectord" or "other" (the daemon that adds, removes and zeroes this service's servers by its health checks), or none; got %q`, s.HealthChecker)
		}
		if len(s.Servers) == 0 {
			bad(p+".server", "service %s has no [[service.server]]", s.Address)
		}
		seenRS := map[netip.AddrPort]int{}
		for j := range s.Servers {
			rs := &s.Servers[j]
			rp := fmt.Sprintf("%s.server[%d]", p, j)
			ap, err := netip.ParseAddrPort(rs.Address)
			if err != nil {
				bad(rp+".address", "want IP:PORT of the real server as in the IPVS table: %v", err)
			} else {
				ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
				if k, dup := seenRS[ap]; dup {
					bad(rp+".address", "%s is already server[%d] of this service", ap, k)
				}
				seenRS[ap] = j
				rs.Addr = ap
				if key.IsFWMark() && ap.Port() == 0 {
					// fwmark services may use port 0; nothing to check
				} else if ap.Port() == 0 && s.Probe.Port == 0 {
					bad(rp+".address", "port 0 needs probe.port to say where to probe")
				}
			}
			if rs.Weight < 1 || rs.Weight > ipvs.MaxWeight {
				bad(rp+".weight", "default weight must be from 1 to %d, got %d (drain a server with ipvsadm -w 0, not in the config)", ipvs.MaxWeight, rs.Weight)
			} else if float64(rs.Weight)*w.Scale > ipvs.MaxWeight {
				bad(rp+".weight", "weight %d × weight.scale %v exceeds the kernel bound %d", rs.Weight, w.Scale, ipvs.MaxWeight)
			} else if rs.Weight < w.Min && w.Min >= 1 {
				bad(rp+".weight", "default weight %d is below weight.min %d", rs.Weight, w.Min)
			}
			switch {
			case rs.Agent != "":
				if _, _, err := splitHostPort(rs.Agent); err != nil {
					bad(rp+".agent", "want HOST:PORT of the agent: %v", err)
				}
				rs.AgentAddr = rs.Agent
			case rs.Addr.IsValid():
				rs.AgentAddr = netip.AddrPortFrom(rs.Addr.Addr(), uint16(s.AgentPort)).String()
			}
		}
	}
	return errors.Join(errs...)
}

// checkSync checks the [sync] section and fills VIPAddrs.
func (cfg *Config) checkSync(bad func(key, format string, a ...any)) {
	s := &cfg.Sync
	if !s.Enabled() {
		if s.Listen != "" || s.KeyFile != "" || len(s.Peers) > 0 || s.Role != "" || len(s.VIPs) > 0 {
			bad("sync.id", "the [sync] section needs this director's id")
		}
		return
	}
	if s.Listen == "" {
		bad("sync.listen", "must be HOST:PORT for the sync listener")
	} else if _, port, err := net.SplitHostPort(s.Listen); err != nil || port == "" {
		bad("sync.listen", "want HOST:PORT, got %q", s.Listen)
	}
	if !strings.HasPrefix(s.KeyFile, "/") {
		bad("sync.key_file", "must be the absolute path of the shared key file, got %q", s.KeyFile)
	}
	switch s.Role {
	case "":
		s.Role = "vip"
	case "vip", "active", "standby":
	default:
		bad("sync.role", "must be \"vip\", \"active\" or \"standby\", got %q", s.Role)
	}
	if len(s.Peers) == 0 {
		bad("sync.peer", "a synchronised director needs at least one [[sync.peer]]")
	}
	ids := map[string]bool{s.ID: true}
	for i, p := range s.Peers {
		key := fmt.Sprintf("sync.peer[%d]", i)
		if p.ID == "" || ids[p.ID] {
			bad(key+".id", "must be a non-empty id, distinct from this director's and the other peers', got %q", p.ID)
		}
		ids[p.ID] = true
		if _, port, err := net.SplitHostPort(p.Address); err != nil || port == "" {
			bad(key+".address", "want HOST:PORT of the peer's sync listener, got %q", p.Address)
		}
	}
	s.VIPAddrs = nil
	for i, v := range s.VIPs {
		a, err := netip.ParseAddr(v)
		if err != nil {
			bad(fmt.Sprintf("sync.vips[%d]", i), "%v", err)
			continue
		}
		s.VIPAddrs = append(s.VIPAddrs, a.Unmap())
	}
	if len(s.VIPs) == 0 {
		seen := map[netip.Addr]bool{}
		for _, svc := range cfg.Services {
			if k, err := ipvs.ParseServiceKey(svc.Address); err == nil && !k.IsFWMark() && !seen[k.Addr.Addr()] {
				seen[k.Addr.Addr()] = true
				s.VIPAddrs = append(s.VIPAddrs, k.Addr.Addr())
			}
		}
		if s.Role == "vip" && len(s.VIPAddrs) == 0 {
			bad("sync.vips", "role \"vip\" needs the virtual IPs to watch (the services are all fwmark services)")
		}
	}
}

// withProbeDefaults fills the probe keys the file left out with defaults.
func withProbeDefaults(p ProbeConfig) ProbeConfig {
	d := defaultProbe()
	if p.Type == "" {
		p.Type = d.Type
	}
	if p.Path == "" {
		p.Path = d.Path
	}
	if p.ExpectStatus == 0 {
		p.ExpectStatus = d.ExpectStatus
	}
	if p.Reference == 0 {
		p.Reference = d.Reference
	}
	return p
}

func checkProbe(p ProbeConfig, prefix string, bad func(key, format string, a ...any)) {
	switch p.Type {
	case "tcp":
	case "http":
		if !strings.HasPrefix(p.Path, "/") {
			bad(prefix+".path", "must start with /, got %q", p.Path)
		}
		if p.ExpectStatus < 100 || p.ExpectStatus > 599 {
			bad(prefix+".expect_status", "must be an HTTP status from 100 to 599, got %d", p.ExpectStatus)
		}
	default:
		bad(prefix+".type", "must be \"tcp\" or \"http\", got %q", p.Type)
	}
	if p.Port < 0 || p.Port > 65535 {
		bad(prefix+".port", "must be a port from 1 to 65535, got %d", p.Port)
	}
	if p.Reference <= 0 {
		bad(prefix+".reference", "must be a positive duration (the response time that counts as fully loaded), got %v", p.Reference)
	}
}

func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q has no port", s)
	}
	port, err := strconv.Atoi(s[i+1:])
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: port must be from 1 to 65535", s)
	}
	return strings.Trim(s[:i], "[]"), port, nil
}

// knownKeys lists every key the configuration accepts, per table, for the
// "did you mean" suggestion.
var knownKeys = map[string][]string{
	"":               {"interval", "agent_timeout", "probe_timeout", "concurrency", "state_dir", "agent_port", "metrics_listen", "control_socket", "coefficients", "weight", "availability", "sync", "service"},
	"coefficients":   {"input", "cpu", "memory", "disk", "response", "process"},
	"weight":         {"gain", "target", "scale", "min", "threshold", "controller", "smoothing", "band", "resolution", "saturation"},
	"availability":   {"freeze_share", "agent_expiry", "slow_start", "slow_start_floor"},
	"sync":           {"id", "listen", "key_file", "role", "vips", "peer"},
	"sync.peer":      {"id", "address"},
	"service":        {"address", "agent_port", "probe", "server", "health_checker"},
	"service.probe":  {"type", "path", "host", "expect_status", "port", "reference"},
	"service.server": {"address", "weight", "agent"},
}

func unknownKeyError(file string, data []byte, k toml.Key) error {
	parent := strings.Join(k[:len(k)-1], ".")
	last := k[len(k)-1]
	msg := "unknown key"
	if s := suggest(last, knownKeys[parent]); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else if _, isTable := knownKeys[parent]; !isTable {
		msg = "unknown table"
	}
	return &ConfigError{File: file, Line: findKeyLine(data, k.String()), Key: k.String(), Msg: msg}
}

// suggest returns the candidate closest to word by edit distance, if it is
// close enough to be a plausible typo.
func suggest(word string, candidates []string) string {
	best, bestD := "", len(word)/2+2
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(word), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// findKeyLine returns the first line that assigns the last component of a
// dotted key (or opens the table of that name), or 0. The TOML decoder does
// not report positions of keys it decoded, so this is a best effort that is
// right for every key written once in the file.
func findKeyLine(data []byte, key string) int {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		key = key[i+1:]
	}
	if i := strings.IndexByte(key, '['); i >= 0 {
		key = key[:i]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, key); ok {
			rest = strings.TrimSpace(rest)
			if strings.HasPrefix(rest, "=") {
				return n
			}
		}
		if t := strings.Trim(line, "[] "); strings.HasSuffix(t, "."+key) || t == key {
			if strings.HasPrefix(line, "[") {
				return n
			}
		}
	}
	return 0
}
