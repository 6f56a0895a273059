package monitor

import (
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// The example sets only services; everything else is at its default, the
// LVS document's web-cluster coefficients among them.
func TestExampleConfigParses(t *testing.T) {
	cfg, err := LoadConfig("../docs/examples/lvs-monitor.toml")
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	if cfg.Coefficients != webExample {
		t.Errorf("example coefficients %+v, want %+v", cfg.Coefficients, webExample)
	}
	want := DefaultConfig()
	want.Services = cfg.Services
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("example config outside its services\n%+v\nwant the defaults\n%+v", cfg, want)
	}
	if len(cfg.Services) != 1 || len(cfg.Services[0].Servers) != 3 {
		t.Fatalf("example config: %d services", len(cfg.Services))
	}
	s := cfg.Services[0]
	if s.Key.String() != "192.0.2.10:80/tcp" || s.Probe.Type != "http" || s.Probe.Path != "/" || s.Probe.ExpectStatus != 200 ||
		s.Probe.Reference != 100*time.Millisecond {
		t.Errorf("service parsed as %s probe %+v", s.Key, s.Probe)
	}
	for i, w := range []struct {
		addr, agent string
		weight      int
	}{{"198.51.100.11:80", "198.51.100.11:9771", 10}, {"198.51.100.12:80", "198.51.100.12:9771", 10}, {"198.51.100.13:80", "198.51.100.13:9771", 20}} {
		if rs := s.Servers[i]; rs.Addr.String() != w.addr || rs.AgentAddr != w.agent || rs.Weight != w.weight {
			t.Errorf("server %d: %s agent %q weight %d, want %s agent %q weight %d", i, rs.Addr, rs.AgentAddr, rs.Weight, w.addr, w.agent, w.weight)
		}
	}
}

const minimal = `
interval = "5s"
[[service]]
address = "192.0.2.10:80/tcp"
[[service.server]]
address = "198.51.100.11:80"
weight = 10
`

func TestMinimalConfigGetsDefaults(t *testing.T) {
	cfg, err := ParseConfig("min.toml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Coefficients != webExample || cfg.Weight.Gain != 5 || cfg.Weight.Target != 0.95 || cfg.Weight.Scale != 10 {
		t.Errorf("defaults not applied: %+v %+v", cfg.Coefficients, cfg.Weight)
	}
	p := cfg.Services[0].Probe
	if p.Type != "tcp" || p.Reference != 100*time.Millisecond {
		t.Errorf("default probe %+v", p)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want []string // substrings the error must contain
	}{
		{"misspelt key", `
intervall = "5s"
` + minimal[len("\ninterval = \"5s\"\n"):],
			[]string{"bad.toml:2", "intervall", "unknown key", `did you mean "interval"`}},
		{"misspelt coefficient", `
[coefficients]
cpuu = 0.3
` + minimal,
			[]string{"coefficients.cpuu", `did you mean "cpu"`, ":3"}},
		{"misspelt server key", minimal + "wieght = 3\n", []string{"service[0].server[0].wieght", `did you mean "weight"`}},
		{"coefficient sum", minimal + `
[coefficients]
input = 0.2
`, []string{"coefficients", "must sum to 1", "1.1000"}},
		{"negative interval", strings.Replace(minimal, `"5s"`, `"-5s"`, 1), []string{"interval", "positive duration"}},
		{"timeout not below interval", `agent_timeout = "10s"` + "\n" + minimal, []string{"agent_timeout", "shorter than interval"}},
		{"weight out of range", strings.Replace(minimal, "weight = 10", "weight = 70000", 1), []string{"service[0].server[0].weight", "1 to 65535"}},
		{"weight zero", strings.Replace(minimal, "weight = 10", "weight = 0", 1), []string{"service[0].server[0].weight", "drain"}},
		{"scale overflows kernel bound", strings.Replace(minimal, "weight = 10", "weight = 10000", 1), []string{"exceeds the kernel bound"}},
		{"negative coefficient", minimal + `
[coefficients]
input = -0.1
cpu = 0.5
`, []string{"coefficients.input", "between 0 and 1"}},
		{"bad service address", strings.Replace(minimal, "192.0.2.10:80/tcp", "192.0.2.10/tcp", 1), []string{"service[0].address"}},
		{"bad protocol", strings.Replace(minimal, "/tcp", "/icmp", 1), []string{"service[0].address", "tcp, udp or sctp"}},
		{"bad probe type", minimal + "[service.probe]\ntype = \"ping\"\n", []string{"service[0].probe.type", `"tcp" or "http"`}},
		{"min zero", minimal + "[weight]\nmin = 0\n", []string{"weight.min"}},
		{"gain negative", minimal + "[weight]\ngain = -5.0\n", []string{"weight.gain", "positive"}},
		{"no services", `interval = "5s"`, []string{"no [[service]]"}},
		{"duplicate server", minimal + "[[service.server]]\naddress = \"198.51.100.11:80\"\nweight = 5\n", []string{"already server[0]"}},
		{"toml syntax", "interval = \n", []string{"bad.toml:1"}},
		{"wrong type", strings.Replace(minimal, "weight = 10", `weight = "ten"`, 1), []string{"bad.toml"}},
		{"unknown table", minimal + "[metrics]\nlisten = \":9000\"\n", []string{"metrics", "unknown"}},
	}
	for _, tt := range tests {
		_, err := ParseConfig("bad.toml", []byte(tt.toml))
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, w)
			}
		}
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: error %T is not a *ConfigError", tt.name, err)
		}
	}
}

func TestServiceKeyForms(t *testing.T) {
	cfg, err := ParseConfig("k.toml", []byte(strings.Replace(minimal, "192.0.2.10:80/tcp", "fwmark:7", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if k := cfg.Services[0].Key; k.FWMark != 7 || k.Family != ipvs.IPv4 {
		t.Errorf("fwmark key %+v", k)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig("/nonexistent/lvs-monitor.toml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// webExample is the LVS document's web-cluster coefficient set.
var webExample = policy.Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.3, Process: 0.1}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
