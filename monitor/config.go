package monitor

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"lvs-feedback/agent"
	"lvs-feedback/ipvs"
	"lvs-feedback/nodeexp"
	"lvs-feedback/policy"
	"lvs-feedback/replica"
)

// Config is lvs-monitor's configuration, read from TOML by LoadConfig.
// docs/configuration.md documents every key with its default.
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
	History      HistoryConfig       `toml:"history"`
	Services     []ServiceConfig     `toml:"service"`
}

// Policy returns the settings that shape decisions.
func (c Config) Policy() policy.Params {
	return policy.Params{Coefficients: c.Coefficients, Weight: c.Weight, Availability: c.Availability, Guard: c.Guard}
}

// SyncConfig makes this director one of a synchronised group: a pair
// (docs/director-pair.md) or, with backend "etcd", a fleet of active
// directors (docs/fleet.md). Without an id the director runs alone.
type SyncConfig struct {
	ID      string       `toml:"id"`      // this director's id, unique in the group
	Backend string       `toml:"backend"` // "pair" (default) or "etcd"
	Etcd    EtcdConfig   `toml:"etcd"`
	Listen  string       `toml:"listen"`   // address the sync listener binds, HOST:PORT
	KeyFile string       `toml:"key_file"` // shared HMAC key, mode 0600, ≥ 32 bytes
	Role    string       `toml:"role"`     // "vip" (follow keepalived), "active" or "standby"
	VIPs    []string     `toml:"vips"`     // role "vip": active while any is local; default: the services' VIPs
	Peers   []PeerConfig `toml:"peer"`

	VIPAddrs []netip.Addr `toml:"-"`
}

// EtcdConfig is how a fleet director reaches etcd (backend "etcd").
type EtcdConfig struct {
	Endpoints    []string      `toml:"endpoints"`
	Prefix       string        `toml:"prefix"`    // key prefix, default "/lvs-feedback/"
	LeaseTTL     time.Duration `toml:"lease_ttl"` // default 3 × interval
	DialTimeout  time.Duration `toml:"dial_timeout"`
	CAFile       string        `toml:"ca_file"`
	CertFile     string        `toml:"cert_file"`
	KeyFile      string        `toml:"key_file"`
	Username     string        `toml:"username"`
	PasswordFile string        `toml:"password_file"` // mode 0600
	// Directors lists every director id of the fleet: the leader believes
	// the counters of these only.
	Directors []string `toml:"directors"`
}

// Fleet reports whether the director is one of an etcd fleet.
func (s SyncConfig) Fleet() bool { return s.Enabled() && s.Backend == "etcd" }

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
	Source  string `toml:"source"`  // "lvs-agent" (default) or "node_exporter": agent is then its URL (docs/node-exporter.md)

	Addr      netip.AddrPort `toml:"-"`
	AgentAddr string         `toml:"-"`
}

// DefaultConfig returns the documented defaults. Those of the keys policy
// owns ([coefficients], [weight], [backlog_guard]) are declared beside the
// code that reads them (policy.Keys).
func DefaultConfig() Config {
	pp := policy.DefaultParams()
	return Config{
		Interval:      5 * time.Second,
		AgentTimeout:  2 * time.Second,
		ProbeTimeout:  2 * time.Second,
		Concurrency:   64,
		StateDir:      "/var/lib/lvs-monitor",
		AgentPort:     agent.DefaultPort,
		MetricsListen: "127.0.0.1:9772", // no authentication, and it names every server: docs/metrics.md
		ControlSocket: "/run/lvs-monitor/control.sock",
		Coefficients:  pp.Coefficients,
		Weight:        pp.Weight,
		Availability: policy.Availability{FreezeShare: 0.5, AgentExpiry: 30 * time.Second, SlowStart: 30 * time.Second, SlowStartFloor: 0.1,
			Fall: 2, Rise: 1},
		Guard: pp.Guard,

		History: defaultHistory(),
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

func (e *ConfigError) Error() string { return located(e.File, e.Line, "", e.Key, e.Msg) }

// ConfigWarning is a setting that is valid but has no effect, such as a
// key the chosen weight controller does not read.
type ConfigWarning struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (w ConfigWarning) String() string { return located(w.File, w.Line, "warning: ", w.Key, w.Msg) }

func located(file string, line int, prefix, key, msg string) string {
	var b strings.Builder
	b.WriteString(file)
	if line > 0 {
		fmt.Fprintf(&b, ":%d", line)
	}
	b.WriteString(": ")
	b.WriteString(prefix)
	if key != "" {
		b.WriteString(key)
		b.WriteString(": ")
	}
	b.WriteString(msg)
	return b.String()
}

// maxConfigErrors bounds the mistakes reported at once; the rest are
// counted.
const maxConfigErrors = 20

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (Config, error) {
	cfg, _, err := CheckConfigFile(path)
	return cfg, err
}

// CheckConfigFile reads and checks a configuration file, and returns the
// warnings too.
func CheckConfigFile(path string) (Config, []ConfigWarning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, nil, fmt.Errorf("read config: %w", err)
	}
	return CheckConfig(path, data)
}

// ParseConfig decodes TOML over the defaults and checks every value; see
// CheckConfig.
func ParseConfig(name string, data []byte) (Config, error) {
	cfg, _, err := CheckConfig(name, data)
	return cfg, err
}

// CheckConfig decodes TOML over the defaults and checks every value. The
// error lists every mistake found (up to maxConfigErrors), one per line in
// file order, each a *ConfigError with its line (errors.Join). The
// warnings are settings that are valid but ignored.
//
// The checks run in order: TOML syntax (one error), then every key against
// the keys Config has (unknown keys and tables, wrong types: a duration
// must be a string with a unit), then the values. Values are checked only
// when every type is right, so that a mistyped key does not also show up
// as a wrong value.
func CheckConfig(name string, data []byte) (Config, []ConfigWarning, error) {
	cfg, _, ws, err := checkConfig(name, data)
	return cfg, ws, err
}

// checkConfig is CheckConfig, returning the file's index too.
func checkConfig(name string, data []byte) (Config, fileIndex, []ConfigWarning, error) {
	// BurntSushi first for syntax: its messages and positions are the
	// product's; decoding into a map cannot fail past the syntax.
	var syntax map[string]any
	if _, err := toml.Decode(string(data), &syntax); err != nil {
		return Config{}, fileIndex{}, nil, tomlError(name, err)
	}
	idx, line, err := indexTOML(data)
	if err != nil {
		return Config{}, fileIndex{}, nil, &ConfigError{File: name, Line: line, Msg: err.Error()}
	}
	p := &configProblems{file: name, lines: idx.lines}
	typesOK := p.checkKeys(idx)
	if !typesOK {
		return Config{}, fileIndex{}, nil, p.err()
	}
	cfg := DefaultConfig()
	if _, err := toml.Decode(string(data), &cfg); err != nil {
		// Every type was checked above: this is a disagreement between the
		// check and the decoder, reported as the decoder says.
		p.list = append(p.list, tomlError(name, err))
		return Config{}, fileIndex{}, nil, p.err()
	}
	cfg.check(p)
	if len(p.list) > 0 {
		return Config{}, fileIndex{}, nil, p.err()
	}
	ws := append(ignoredSettings(name, idx, cfg.Weight.Controller), ignoredCoefficients(name, idx, cfg)...)
	slices.SortStableFunc(ws, func(a, b ConfigWarning) int { return a.Line - b.Line })
	return cfg, idx, ws, nil
}

// ignoredCoefficients warns, under the capacity controller, about each of
// input, response and process that the file sets above 0 but below its
// default: that controller counts them only above their defaults
// (policy.DirectorSensitivity; docs/developer/design.md, "Capacity against the
// bottleneck"), so such a value acts as 0 there and only the displayed load
// reads it. At 0 (out) and from their defaults up they mean what they
// say, and are not warned about.
func ignoredCoefficients(file string, idx fileIndex, cfg Config) []ConfigWarning {
	if cfg.Weight.Controller != policy.ControllerCapacity {
		return nil
	}
	c, def := cfg.Coefficients, DefaultConfig().Coefficients
	ignored := map[string]struct{ v, def float64 }{
		"coefficients.input":    {c.Input, def.Input},
		"coefficients.response": {c.Response, def.Response},
		"coefficients.process":  {c.Process, def.Process},
	}
	var ws []ConfigWarning
	if policy.NoResource(c) {
		ws = append(ws, ConfigWarning{File: file, Line: idx.lines["coefficients"], Key: "coefficients",
			Msg: fmt.Sprintf("cpu, disk and memory are all 0: the %q controller has no resource enabled to measure capacity against, and measures it per unit of CPU busy as if cpu were at its default",
				policy.ControllerCapacity)})
	}
	for _, s := range idx.settings {
		k, ok := ignored[schemaKey(s.path)]
		if !ok || !(k.v > 0 && k.v < k.def) {
			continue
		}
		ws = append(ws, ConfigWarning{File: file, Line: s.line, Key: s.key(),
			Msg: fmt.Sprintf("%g is below its default %g: the %q controller counts it only above %g, so its weights are as with 0; only the displayed load reads %g",
				k.v, k.def, policy.ControllerCapacity, k.def, k.v)})
	}
	return ws
}

func tomlError(name string, err error) *ConfigError {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &ConfigError{File: name, Line: pe.Position.Line, Msg: pe.Message}
	}
	return &ConfigError{File: name, Msg: err.Error()}
}

// configProblems collects the mistakes of one file.
type configProblems struct {
	file  string
	lines map[string]int // indexed key → line (fileIndex.lines)
	list  []*ConfigError
}

// add records a mistake in key, at the line that sets key, else at the
// first of also that the file sets (the other key of a comparison), else
// at key's nearest enclosing table in the file.
func (p *configProblems) add(key string, also []string, format string, a ...any) {
	p.list = append(p.list, &ConfigError{File: p.file, Line: p.lineOf(key, also), Key: key, Msg: fmt.Sprintf(format, a...)})
}

func (p *configProblems) lineOf(key string, also []string) int {
	for _, k := range append([]string{key}, also...) {
		if l, ok := p.lines[k]; ok {
			return l
		}
	}
	for k := parentKey(key); k != ""; k = parentKey(k) {
		if l, ok := p.lines[k]; ok {
			return l
		}
	}
	return 0
}

// parentKey returns what holds key: "service[0].server[1].weight" →
// "service[0].server[1]" → "service[0].server" → "service[0]".
func parentKey(key string) string {
	if strings.HasSuffix(key, "]") {
		return key[:strings.LastIndexByte(key, '[')]
	}
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i]
	}
	return ""
}

// err returns the mistakes in file order (those without a line last), at
// most maxConfigErrors of them, or nil.
func (p *configProblems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	list := slices.Clone(p.list)
	slices.SortStableFunc(list, func(a, b *ConfigError) int {
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line - a.Line // a line before none
		}
		return a.Line - b.Line
	})
	var errs []error
	for _, e := range list[:min(len(list), maxConfigErrors)] {
		errs = append(errs, e)
	}
	if n := len(list) - maxConfigErrors; n > 0 {
		errs = append(errs, fmt.Errorf("%s: and %d more mistakes", p.file, n))
	}
	return errors.Join(errs...)
}

// check validates cfg and fills the derived fields (keys, addresses).
func (cfg *Config) check(probs *configProblems) {
	bad := func(key, format string, a ...any) { probs.add(key, nil, format, a...) }
	// near: a mistake that may lie in either key, such as a default
	// agent_timeout after a shorter interval: at key's line, else also's.
	near := func(key string, also string, format string, a ...any) {
		probs.add(key, []string{also}, format, a...)
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
			near("agent_timeout", "interval", "must be shorter than interval (%v), got %v", cfg.Interval, cfg.AgentTimeout)
		}
		if cfg.ProbeTimeout >= cfg.Interval {
			near("probe_timeout", "interval", "must be shorter than interval (%v), got %v", cfg.Interval, cfg.ProbeTimeout)
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

	// The keys policy owns are checked by their declarations (policy.Keys).
	for _, pr := range cfg.Policy().Problems() {
		var also []string
		if pr.Near != "" {
			also = []string{pr.Near}
		}
		probs.add(pr.Key, also, "%s", pr.Msg)
	}
	w := cfg.Weight

	av := cfg.Availability
	if !(av.FreezeShare > 0 && av.FreezeShare <= 1) {
		bad("availability.freeze_share", "must be above 0 and at most 1 (1 disables the freeze), got %v", av.FreezeShare)
	}
	if av.AgentExpiry < 0 {
		bad("availability.agent_expiry", "must not be negative, got %v", av.AgentExpiry)
	} else if cfg.Interval > 0 && av.AgentExpiry < cfg.Interval {
		near("availability.agent_expiry", "interval", "must be at least one interval (%v), got %v", cfg.Interval, av.AgentExpiry)
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
	cfg.History.check(bad)

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
					near(rp+".address", p+".probe.port", "port 0 needs probe.port to say where to probe")
				}
			}
			if rs.Weight < 1 || rs.Weight > ipvs.MaxWeight {
				bad(rp+".weight", "default weight must be from 1 to %d, got %d (drain a server with ipvsadm -w 0, not in the config)", ipvs.MaxWeight, rs.Weight)
			} else if float64(rs.Weight)*w.Scale > ipvs.MaxWeight {
				near(rp+".weight", "weight.scale", "weight %d × weight.scale %v exceeds the kernel bound %d", rs.Weight, w.Scale, ipvs.MaxWeight)
			} else if rs.Weight < w.Min && w.Min >= 1 {
				near(rp+".weight", "weight.min", "default weight %d is below weight.min %d", rs.Weight, w.Min)
			}
			if rs.Source == nodeexp.SourceName { // agent is node_exporter's URL, default http://RIP:9100/metrics
				var err error
				if rs.AgentAddr, err = nodeexp.TargetURL(rs.Agent, rs.Addr.Addr()); err != nil {
					bad(rp+".agent", "%v", err)
				}
				continue
			} else if rs.Source != "" && rs.Source != "lvs-agent" {
				bad(rp+".source", "must be \"lvs-agent\" (the default) or %q, got %q", nodeexp.SourceName, rs.Source)
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
}

// checkSync checks the [sync] section and fills VIPAddrs.
func (cfg *Config) checkSync(bad func(key, format string, a ...any)) {
	s := &cfg.Sync
	if !s.Enabled() {
		if s.Listen != "" || s.KeyFile != "" || len(s.Peers) > 0 || s.Role != "" || len(s.VIPs) > 0 || s.Backend != "" || len(s.Etcd.Endpoints) > 0 {
			bad("sync.id", "the [sync] section needs this director's id")
		}
		return
	}
	switch s.Backend {
	case "":
		s.Backend = "pair"
	case "pair":
	case "etcd":
		cfg.checkFleet(bad)
		return
	default:
		bad("sync.backend", "must be \"pair\" or \"etcd\", got %q", s.Backend)
	}
	if len(s.Etcd.Endpoints) > 0 {
		bad("sync.etcd.endpoints", "only with backend = \"etcd\"")
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

// checkFleet checks [sync] with backend "etcd" and fills its defaults.
func (cfg *Config) checkFleet(bad func(key, format string, a ...any)) {
	s := &cfg.Sync
	if !replica.ValidSender(s.ID) {
		bad("sync.id", "must be 1 to %d letters, digits, '.', '_' or '-', got %q", replica.MaxSenderLen, s.ID)
	}
	for key, set := range map[string]bool{"listen": s.Listen != "", "key_file": s.KeyFile != "", "role": s.Role != "", "vips": len(s.VIPs) > 0, "peer": len(s.Peers) > 0} {
		if set {
			bad("sync."+key, "a pair key: not with backend = \"etcd\" (the fleet meets through etcd)")
		}
	}
	e := &s.Etcd
	if !slices.Contains(e.Directors, s.ID) {
		bad("sync.etcd.directors", "must list every director id of the fleet, this one (%q) included; got %q", s.ID, e.Directors)
	}
	for i, id := range e.Directors {
		if !replica.ValidSender(id) {
			bad(fmt.Sprintf("sync.etcd.directors[%d]", i), "must be 1 to %d letters, digits, '.', '_' or '-', got %q", replica.MaxSenderLen, id)
		} else if slices.Index(e.Directors, id) != i {
			bad(fmt.Sprintf("sync.etcd.directors[%d]", i), "%q listed twice", id)
		}
	}
	if len(e.Endpoints) == 0 {
		bad("sync.etcd.endpoints", "backend \"etcd\" needs at least one etcd endpoint URL")
	}
	for i, ep := range e.Endpoints {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(fmt.Sprintf("sync.etcd.endpoints[%d]", i), "want an http:// or https:// URL, got %q", ep)
		}
	}
	if e.Prefix == "" {
		e.Prefix = "/lvs-feedback/"
	} else if !strings.HasSuffix(e.Prefix, "/") {
		bad("sync.etcd.prefix", "must end with '/', got %q", e.Prefix)
	}
	if e.LeaseTTL == 0 {
		e.LeaseTTL = max(3*cfg.Interval, 2*time.Second)
	}
	if e.LeaseTTL < 2*time.Second || e.LeaseTTL%time.Second != 0 {
		bad("sync.etcd.lease_ttl", "must be whole seconds, at least 2 s (etcd leases count seconds), got %v", e.LeaseTTL)
	} else if cfg.Interval > 0 && e.LeaseTTL < 2*cfg.Interval {
		bad("sync.etcd.lease_ttl", "must be at least 2 intervals (%v): a director publishes once a cycle, got %v", 2*cfg.Interval, e.LeaseTTL)
	}
	if e.DialTimeout == 0 {
		e.DialTimeout = 5 * time.Second
	} else if e.DialTimeout < 0 {
		bad("sync.etcd.dial_timeout", "must be positive, got %v", e.DialTimeout)
	}
	for key, path := range map[string]string{"ca_file": e.CAFile, "cert_file": e.CertFile, "key_file": e.KeyFile, "password_file": e.PasswordFile} {
		if path != "" && !strings.HasPrefix(path, "/") {
			bad("sync.etcd."+key, "must be an absolute path, got %q", path)
		}
	}
	if (e.CertFile == "") != (e.KeyFile == "") {
		bad("sync.etcd.cert_file", "cert_file and key_file go together")
	}
	if (e.Username == "") != (e.PasswordFile == "") {
		bad("sync.etcd.username", "username and password_file go together")
	} else if e.PasswordFile != "" {
		if fi, err := os.Stat(e.PasswordFile); err != nil {
			bad("sync.etcd.password_file", "%v", err)
		} else if fi.Mode().Perm()&0o077 != 0 {
			bad("sync.etcd.password_file", "must not be readable by group or others (mode 0600), got %v", fi.Mode().Perm())
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
