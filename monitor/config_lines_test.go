package monitor

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"lvs-feedback/policy"
)

// twoServices has two services of two servers each, so that a key of an
// earlier array element is told apart from the same key of a later one.
const twoServices = `interval = "5s"
[[service]]
address = "192.0.2.10:80/tcp"
[[service.server]]
address = "198.51.100.11:80"
weight = 10
[[service.server]]
address = "198.51.100.12:80"
weight = 10
[[service]]
address = "192.0.2.20:80/tcp"
[[service.server]]
address = "198.51.100.21:80"
weight = 10
[[service.server]]
address = "198.51.100.22:80"
weight = 10
`

// mark replaces the first old in base by repl and marks the line the error
// must name with the comment "#<": the first line of repl, unless repl
// marks a line itself.
func mark(base, old, repl string) string {
	i := strings.Index(base, old)
	if i < 0 {
		panic("mark: " + old + " not in the base text")
	}
	s := base[:i] + repl + base[i+len(old):]
	if strings.Contains(repl, "#<") {
		return s
	}
	return markAt(s, i)
}

// markAt appends "#<" to the line holding offset i.
func markAt(s string, i int) string {
	end := len(s)
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		end = i + j
	}
	return s[:end] + " #<" + s[end:]
}

// markedLine returns the line holding "#<", 0 for none.
func markedLine(s string) int {
	for n, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "#<") {
			return n + 1
		}
	}
	return 0
}

// configErrors returns the *ConfigErrors of a ParseConfig error.
func configErrors(t *testing.T, err error) []*ConfigError {
	t.Helper()
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	var ces []*ConfigError
	for _, e := range list {
		var ce *ConfigError
		if errors.As(e, &ce) {
			ces = append(ces, ce)
		}
	}
	return ces
}

// Every mistake ParseConfig reports names the line of the key at fault:
// the marked line, or none (0) when the file does not hold the key or its
// table.
func TestConfigErrorLines(t *testing.T) {
	svc := twoServices
	// add puts text before the services, marking the line holding want.
	// Tables go after the services, top-level keys before them.
	add := func(text, want string) string {
		s := text + "\n" + svc
		if strings.HasPrefix(text, "[") {
			s = svc + text + "\n"
		}
		if want == "#<" {
			return s
		}
		i := strings.Index(s, want)
		if i < 0 {
			panic("add: " + want + " not in the text")
		}
		return markAt(s, i)
	}
	tests := []struct {
		name, toml, want string
	}{
		// syntax and keys
		{"syntax", mark(svc, "weight = 10\n[[service]]", "weight = \n[[service]]"), "expected value"},
		{"unknown key", mark(svc, `interval = "5s"`, `intervall = "5s"`), `unknown key (did you mean "interval"?)`},
		{"unknown key in 2nd server", mark(svc, `address = "198.51.100.12:80"`, `adress = "198.51.100.12:80"`), `service[0].server[1].adress: unknown key (did you mean "address"?)`},
		{"misspelt table", add("[weights] #<\ngain = 5.0\nmin = 1", "#<"), "unknown table [weights] (did you mean [weight]?)"},
		{"misspelt sub-table", mark(svc, "weight = 10\n[[service]]", "weight = 10\n[service.probes] #<\n[[service]]"), "unknown table [service.probes] (did you mean [service.probe]?)"},
		{"unknown dotted table", add("weights.gain = 5.0", "weights.gain"), "unknown table [weights]"},
		{"wrong type", mark(svc, "weight = 10\n[[service]]", "weight = \"ten\"\n[[service]]"), "service[0].server[1].weight: must be an integer, got a string"},
		{"float for integer", add("concurrency = 1.5", "concurrency"), "must be an integer, got a float"},
		{"table as array", add("[[weight]]\nmin = 1", "[[weight]]"), "write [weight], not [[weight]]"},
		{"array as table", mark("[service]\naddress = \"192.0.2.10:80/tcp\"\n", "[service]", "[service]"), "write [[service]], not [service]"},
		{"vips not strings", add("[sync]\nid = \"a\"\nvips = [1]", "vips"), "must be an array of strings"},

		// durations
		{"bare interval", mark(svc, `interval = "5s"`, "interval = 5"), `a bare number has no unit: write interval = "5s"`},
		{"bare float", add("agent_timeout = 0.5", "agent_timeout"), `agent_timeout = "0.5s"`},
		{"bare probe reference", mark(svc, "weight = 10\n[[service]]", "weight = 10\n[service.probe]\nreference = 100 #<\n[[service]]"), `service[0].probe.reference: a bare number has no unit`},
		{"bare agent_expiry", add("[availability]\nagent_expiry = 30", "agent_expiry"), "availability.agent_expiry: a bare number"},
		{"bare guard check", add("[backlog_guard]\ncheck = 1", "check"), "backlog_guard.check: a bare number"},
		{"bad duration string", add("[availability]\nslow_start = \"30 seconds\"", "slow_start"), `"30 seconds" is not a duration`},

		// top level
		{"negative interval", mark(svc, `interval = "5s"`, `interval = "-5s"`), "interval: must be a positive duration"},
		{"agent_timeout not positive", add(`agent_timeout = "0s"`, "agent_timeout"), "agent_timeout: must be a positive duration"},
		{"probe_timeout not positive", add(`probe_timeout = "-1s"`, "probe_timeout"), "probe_timeout: must be a positive duration"},
		{"agent_timeout ≥ interval", add(`agent_timeout = "10s"`, "agent_timeout"), "agent_timeout: must be shorter than interval"},
		{"default agent_timeout ≥ short interval", mark(svc, `interval = "5s"`, `interval = "1s"`), "agent_timeout: must be shorter than interval"},
		{"probe_timeout ≥ interval", add(`probe_timeout = "5s"`, "probe_timeout"), "probe_timeout: must be shorter than interval"},
		{"concurrency", add("concurrency = 0", "concurrency"), "concurrency: must be at least 1"},
		{"state_dir", add(`state_dir = ""`, "state_dir"), "state_dir: must name a directory"},
		{"metrics_listen", add(`metrics_listen = "localhost"`, "metrics_listen"), "metrics_listen: want [HOST]:PORT"},
		{"control_socket", add(`control_socket = "ctl.sock"`, "control_socket"), "control_socket: must be an absolute path"},
		{"agent_port", add("agent_port = 70000", "agent_port"), "agent_port: must be a port"},

		// [coefficients]
		{"coefficient range", add("[coefficients]\ninput = -0.1\ncpu = 0.5", "input"), "coefficients.input: must be between 0 and 1"},
		{"coefficient sum", add("[coefficients]\ninput = 0.2", "[coefficients]"), "coefficients: must sum to 1"},
		{"coefficient sum, dotted", add("coefficients.input = 0.2", "coefficients.input"), "coefficients: must sum to 1"},

		// [weight]
		{"gain", add("[weight]\ncontroller = \"lvs\"\ngain = -5.0", "gain"), "weight.gain: must be a positive number"},
		{"target", add("[weight]\ntarget = 0.0", "target"), "weight.target: must be a load above 0"},
		{"scale", add("[weight]\nscale = 0.5", "scale"), "weight.scale: must be at least 1"},
		{"min", add("[weight]\nmin = 0", "min"), "weight.min: must be from 1"},
		{"threshold", add("[weight]\nthreshold = -1", "threshold"), "weight.threshold: must be from 0"},
		{"controller", add("[weight]\ncontroller = \"pid\"", "controller"), `weight.controller: must be "capacity" or "lvs"`},
		{"smoothing", add("[weight]\nsmoothing = 1.0", "smoothing"), "weight.smoothing: must be from 0 to below 1"},
		{"band", add("[weight]\nband = 1.5", "band"), "weight.band: must be from 0 to below 1"},
		{"confirm", add("[weight]\nconfirm = 0", "confirm"), "weight.confirm: must be from 1"},
		{"anchor", add("[weight]\nanchor = -0.1", "anchor"), "weight.anchor: must be from 0"},
		{"light 0", add("[weight]\nlight = 0.0", "light"), "weight.light: must be above 0 and below 1"},
		{"light 1", add("[weight]\nlight = 1.0", "light"), "weight.light: must be above 0 and below 1"},
		{"saturation", add("[weight]\nsaturation = 2.0", "saturation"), "weight.saturation: must be from 0"},
		{"resolution", add("[weight]\nresolution = 0", "resolution"), "weight.resolution: must be from weight.min"},
		{"resolution below a set min", add("[weight]\nmin = 30", "min"), "weight.resolution: must be from weight.min"},

		// [backlog_guard]
		{"guard check", add("[backlog_guard]\ncheck = \"-1s\"", "check"), "backlog_guard.check: must not be negative"},
		{"guard trigger", add("[backlog_guard]\ntrigger = 1.0\nrelease = 1.0", "trigger"), "backlog_guard.trigger: must be above 1"},
		{"guard release", add("[backlog_guard]\nrelease = 3.0", "release"), "backlog_guard.release: must be from 1 to below trigger"},
		{"guard release after a trigger", add("[backlog_guard]\ntrigger = 1.2", "trigger"), "backlog_guard.release: must be from 1 to below trigger"},
		{"guard min_excess", add("[backlog_guard]\nmin_excess = -1", "min_excess"), "backlog_guard.min_excess: must not be negative"},

		// [availability]
		{"freeze_share", add("[availability]\nfreeze_share = 0.0", "freeze_share"), "availability.freeze_share: must be above 0"},
		{"agent_expiry negative", add("[availability]\nagent_expiry = \"-1s\"", "agent_expiry"), "availability.agent_expiry: must not be negative"},
		{"agent_expiry < interval", add("[availability]\nagent_expiry = \"1s\"", "agent_expiry"), "availability.agent_expiry: must be at least one interval"},
		{"slow_start", add("[availability]\nslow_start = \"-1s\"", "slow_start"), "availability.slow_start: must not be negative"},
		{"slow_start_floor", add("[availability]\nslow_start_floor = 0.0", "slow_start_floor"), "availability.slow_start_floor: must be above 0"},
		{"fall", add("[availability]\nfall = 11", "fall"), "availability.fall: must be from 1"},
		{"rise", add("[availability]\nrise = 0", "rise"), "availability.rise: must be from 1"},

		// [sync]
		{"sync without id", add("[sync]\nlisten = \"127.0.0.1:9773\"", "[sync]"), "sync.id: the [sync] section needs"},
		{"sync listen missing", add("[sync]\nid = \"a\"\nkey_file = \"/k\"\n[[sync.peer]]\nid = \"b\"\naddress = \"127.0.0.2:9773\"", "[sync]"), "sync.listen: must be HOST:PORT"},
		{"sync listen bad", add("[sync]\nid = \"a\"\nlisten = \"x\"", "listen"), "sync.listen: want HOST:PORT"},
		{"sync key_file", add("[sync]\nid = \"a\"\nkey_file = \"k\"", "key_file"), "sync.key_file: must be the absolute path"},
		{"sync role", add("[sync]\nid = \"a\"\nrole = \"boss\"", "role"), "sync.role: must be"},
		{"sync no peer", add("[sync]\nid = \"a\"", "[sync]"), "sync.peer: a synchronised director needs"},
		{"sync peer id", add("[sync]\nid = \"a\"\n[[sync.peer]]\nid = \"b\"\naddress = \"127.0.0.2:9773\"\n[[sync.peer]]\nid = \"a\"\naddress = \"127.0.0.3:9773\"", "id = \"a\"\naddress = \"127.0.0.3"),
			"sync.peer[1].id: must be a non-empty id"},
		{"sync peer = []", add("[sync]\nid = \"a\"\npeer = []", "peer"), "sync.peer: a synchronised director needs"},
		{"sync peer address", add("[sync]\nid = \"a\"\n[[sync.peer]]\nid = \"b\"\naddress = \"nowhere\"", "nowhere"), "sync.peer[0].address: want HOST:PORT"},
		{"sync vips element", add("[sync]\nid = \"a\"\nvips = [\"192.0.2.10\", \"x\"]", "vips"), "sync.vips[1]:"},
		{"sync vips needed", mark("[sync] #<\nid = \"a\"\n[[service]]\naddress = \"fwmark:1\"\n[[service.server]]\naddress = \"198.51.100.11:80\"\nweight = 1\n", "#<", "#<"),
			`sync.vips: role "vip" needs the virtual IPs`},

		// [history]
		{"history file_mib", add("[history]\nfile_mib = 0", "file_mib"), "history.file_mib: must be from 1 to 1024 (MiB per file), got 0"},
		{"history file_mib too big", add("[history]\nfile_mib = 2048", "file_mib"), "history.file_mib: must be from 1 to 1024 (MiB per file), got 2048"},
		{"history files", add("[history]\nfiles = 1", "files"), "history.files: must be from 2 (the current file and one rotated) to 100, got 1"},
		{"history size as a string", add("[history]\nfile_mib = \"8MiB\"", "file_mib"), "history.file_mib: must be an integer, got a string"},

		// services and servers
		{"no service", `interval = "5s"`, "no [[service]] configured"},
		{"service address", mark(svc, `address = "192.0.2.20:80/tcp"`, `address = "192.0.2.20/tcp"`), "service[1].address:"},
		{"duplicate service", mark(svc, `address = "192.0.2.20:80/tcp"`, `address = "192.0.2.10:80/tcp"`), "service[1].address: 192.0.2.10:80/tcp is already configured as service[0]"},
		{"service agent_port", mark(svc, "address = \"192.0.2.20:80/tcp\"", "address = \"192.0.2.20:80/tcp\"\nagent_port = -1 #<"), "service[1].agent_port: must be a port"},
		{"service health_checker", mark(svc, "address = \"192.0.2.20:80/tcp\"", "address = \"192.0.2.20:80/tcp\"\nhealth_checker = \"consul\" #<"), `service[1].health_checker: want "keepalived", "ldirectord" or "other"`},
		{"probe path", mark(svc, "weight = 10\n[[service]]", "weight = 10\n[service.probe]\ntype = \"http\"\npath = \"health\" #<\n[[service]]"), "service[0].probe.path: must start with /"},
		{"probe expect_status", mark(svc, "weight = 10\n[[service]]", "weight = 10\n[service.probe]\ntype = \"http\"\nexpect_status = 700 #<\n[[service]]"), "service[0].probe.expect_status: must be an HTTP status"},
		{"probe type", mark(svc, "weight = 10\n[[service]]", "weight = 10\n[service.probe]\ntype = \"ping\" #<\n[[service]]"), `service[0].probe.type: must be "tcp" or "http"`},
		{"probe port", mark(svc, "weight = 10\n[[service]]", "weight = 10\n[service.probe]\nport = 70000 #<\n[[service]]"), "service[0].probe.port: must be a port"},
		{"probe reference", mark(svc, "weight = 10\n[[service]]", "weight = 10\n[service.probe]\nreference = \"-1ms\" #<\n[[service]]"), "service[0].probe.reference: must be a positive duration"},
		{"service without servers", mark("[[service]]\naddress = \"192.0.2.10:80/tcp\"\n", "[[service]]", "[[service]]"), "service[0].server: service 192.0.2.10:80/tcp has no [[service.server]]"},
		{"server address, 2nd of 1st service", mark(svc, `address = "198.51.100.12:80"`, `address = "198.51.100.12"`), "service[0].server[1].address: want IP:PORT"},
		{"server address, 1st of 2nd service", mark(svc, `address = "198.51.100.21:80"`, `address = "198.51.100.21"`), "service[1].server[0].address: want IP:PORT"},
		{"duplicate server", mark(svc, `address = "198.51.100.22:80"`, `address = "198.51.100.21:80"`), "service[1].server[1].address: 198.51.100.21:80 is already server[0]"},
		{"port 0 without probe.port", mark(svc, `address = "198.51.100.22:80"`, `address = "198.51.100.22:0"`), "port 0 needs probe.port"},
		{"weight 70000, 2nd server", mark(svc, "weight = 10\n[[service]]", "weight = 70000\n[[service]]"), "service[0].server[1].weight: default weight must be from 1 to 65535, got 70000"},
		{"weight × scale", mark(svc, "weight = 10\n[[service]]", "weight = 10000\n[[service]]"), "service[0].server[1].weight: weight 10000 × weight.scale 10 exceeds"},
		{"weight below min", add("[weight]\nmin = 15", "weight = 10"), "service[0].server[0].weight: default weight 10 is below weight.min 15"},
		{"server agent", mark(svc, `address = "198.51.100.22:80"`, "address = \"198.51.100.22:80\"\nagent = \"host\" #<"), "service[1].server[1].agent: want HOST:PORT"},
		{"inline array of tables", mark(`interval = "5s"
service = [{address = "192.0.2.10:80/tcp", server = [{address = "198.51.100.11:80", weight = 1}]},
  {address = "192.0.2.20:80/tcp", server = [{address = "198.51.100.21", weight = 1}]}]
`, `{address = "192.0.2.20:80/tcp"`, `{address = "192.0.2.20:80/tcp"`), "service[1].server[0].address: want IP:PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("bad.toml", []byte(tt.toml))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.toml)
			}
			wantLine := markedLine(tt.toml)
			for _, ce := range configErrors(t, err) {
				if strings.Contains(ce.Error(), tt.want) {
					if ce.Line != wantLine {
						t.Errorf("%q at line %d, want line %d\n%s", tt.want, ce.Line, wantLine, numbered(tt.toml))
					}
					if ce.Line > 0 && !strings.HasPrefix(ce.Error(), fmt.Sprintf("bad.toml:%d: ", ce.Line)) {
						t.Errorf("error %q does not start with its file and line", ce)
					}
					return
				}
			}
			t.Errorf("no error contains %q; got:\n%v", tt.want, err)
		})
	}
}

func numbered(s string) string {
	var b strings.Builder
	for n, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", n+1, l)
	}
	return b.String()
}

// One run reports every mistake, each on its own line with its own line
// number, in file order; a misspelt table is one mistake, not one per key.
func TestConfigAllMistakesAtOnce(t *testing.T) {
	conf := twoServices + `[weights]
gain = 5.0
target = 0.95
scale = 10
[coefficients]
cpuu = 0.3
[availability]
fall = 0
`
	conf = strings.Replace(conf, `address = "198.51.100.12:80"`, `address = "198.51.100.12"`, 1)
	_, err := ParseConfig("all.toml", []byte(conf))
	if err == nil {
		t.Fatal("accepted")
	}
	want := []string{
		"all.toml:8: service[0].server[1].address: want IP:PORT",
		"all.toml:18: weights: unknown table [weights] (did you mean [weight]?)",
		`all.toml:23: coefficients.cpuu: unknown key (did you mean "cpu"?)`,
		"all.toml:25: availability.fall: must be from 1",
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start with %q", i+1, lines[i], w)
		}
	}
}

// A type mistake stops the value checks (a bare duration must not also be
// "shorter than" something), but not the key checks.
func TestConfigTypeMistakesFirst(t *testing.T) {
	conf := strings.Replace(twoServices, `interval = "5s"`, "interval = 5\nconcurrency = 0\nintervall = 3", 1)
	_, err := ParseConfig("t.toml", []byte(conf))
	want := "t.toml:1: interval: a bare number has no unit: write interval = \"5s\" or \"5ms\" (units ns, us, ms, s, m, h)\n" +
		"t.toml:3: intervall: unknown key (did you mean \"interval\"?)"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

func TestConfigMistakesCapped(t *testing.T) {
	var b strings.Builder
	for i := range maxConfigErrors + 5 {
		fmt.Fprintf(&b, "unknown%d = 1\n", i)
	}
	_, err := ParseConfig("many.toml", []byte(b.String()+twoServices))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxConfigErrors+1 || lines[maxConfigErrors] != "many.toml: and 5 more mistakes" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
	if !strings.HasPrefix(lines[0], "many.toml:1: unknown0:") || !strings.HasPrefix(lines[maxConfigErrors-1], fmt.Sprintf("many.toml:%d: ", maxConfigErrors)) {
		t.Errorf("not in file order: %q … %q", lines[0], lines[maxConfigErrors-1])
	}
}

// Keys the chosen controller does not read are accepted with a warning at
// their line; keys it reads, and keys left out, give none.
func TestConfigIgnoredSettingsWarn(t *testing.T) {
	tests := []struct {
		name  string
		conf  string
		wants []string
	}{
		{"capacity ignores the formula's keys", twoServices + "[weight]\ngain = 5.0\nmin = 2\ntarget = 0.9\nscale = 10\nthreshold = 2\nband = 0.3\n",
			[]string{
				`w.toml:19: warning: weight.gain: ignored: only the "lvs" controller reads it, and weight.controller is "capacity"`,
				`w.toml:21: warning: weight.target: ignored`,
				`w.toml:23: warning: weight.threshold: ignored`,
			}},
		{"lvs ignores the capacity keys", "weight.controller = \"lvs\"\nweight.anchor = 0.1\nweight.gain = 4.0\n" + twoServices,
			[]string{`w.toml:2: warning: weight.anchor: ignored: only the "capacity" controller reads it, and weight.controller is "lvs"`}},
		{"explicit capacity keys", twoServices + "[weight]\ncontroller = \"capacity\"\nsmoothing = 0.5\nmin = 1\n", nil},
		{"nothing set", twoServices, nil},
	}
	for _, tt := range tests {
		_, warnings, err := CheckConfig("w.toml", []byte(tt.conf))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(warnings) != len(tt.wants) {
			t.Errorf("%s: %d warnings %v, want %d", tt.name, len(warnings), warnings, len(tt.wants))
			continue
		}
		for i, w := range tt.wants {
			if !strings.HasPrefix(warnings[i].String(), w) {
				t.Errorf("%s: warning %q, want it to start with %q", tt.name, warnings[i], w)
			}
		}
	}
}

// The example is the installed starting configuration and must check
// clean: no error, no warning.
func TestExampleConfigHasNoWarnings(t *testing.T) {
	_, warnings, err := CheckConfigFile("../docs/examples/lvs-monitor.toml")
	if err != nil || len(warnings) > 0 {
		t.Errorf("example: error %v, warnings %v", err, warnings)
	}
}

// Every key of Config is known with its TOML kind, durations included, and
// every controller-only key is a key.
func TestConfigKeys(t *testing.T) {
	for key, kind := range map[string]keyKind{
		"interval": kindDuration, "agent_timeout": kindDuration, "probe_timeout": kindDuration,
		"availability.agent_expiry": kindDuration, "availability.slow_start": kindDuration,
		"backlog_guard.check": kindDuration, "service.probe.reference": kindDuration,
		"weight.gain": kindNumber, "weight.min": kindInteger, "backlog_guard.raise": kindBool, "backlog_guard.predict": kindBool,
		"sync.vips": kindStrings, "sync.peer": kindTables, "sync.peer.address": kindString,
		"service": kindTables, "service.server": kindTables, "service.probe": kindTable,
	} {
		if got := configKeys[key].kind; got != kind {
			t.Errorf("%s: kind %v, want %v", key, got, kind)
		}
	}
	for key := range controllerOnly {
		if _, ok := configKeys[key]; !ok {
			t.Errorf("controllerOnly names %q, which is not a key", key)
		}
	}
	for _, derived := range []string{"service.key", "service.server.addr", "sync.vipaddrs"} {
		if _, ok := configKeys[derived]; ok {
			t.Errorf("derived field %q is a key", derived)
		}
	}
}

// The README's configuration snippet is a valid file that draws no
// warning: it shows the default controller with the keys it reads.
func TestReadmeConfigChecksClean(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "\n## Configuration\n")
	_, block, ok2 := strings.Cut(after, "```toml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md: no ```toml block under ## Configuration")
	}
	cfg, warnings, err := CheckConfig("README.md", []byte(block))
	if err != nil || len(warnings) > 0 {
		t.Fatalf("README snippet: error %v, warnings %v", err, warnings)
	}
	if cfg.Weight.Controller != policy.ControllerCapacity || DefaultConfig().Weight.Controller != policy.ControllerCapacity {
		t.Errorf("README shows controller %q; the default is %q", cfg.Weight.Controller, DefaultConfig().Weight.Controller)
	}
}
