package monitor

import (
	"os"
	"testing"
)

// FuzzParseConfig: no input panics the loader, and whatever it accepts
// satisfies the invariants the rest of the monitor relies on.
func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile("../docs/examples/lvs-monitor.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(minimal))
	f.Add([]byte(cpuOnlyConfig))
	f.Add([]byte("interval = \"1ns\"\n[[service]]\naddress = \"fwmark:1/inet6\"\n[[service.server]]\naddress = \"[::1]:0\"\nweight = 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("fuzz.toml", data)
		if err != nil {
			return
		}
		if cfg.Interval <= 0 || cfg.AgentTimeout >= cfg.Interval || cfg.ProbeTimeout >= cfg.Interval {
			t.Fatalf("accepted bad timing: %+v", cfg)
		}
		if s := cfg.Coefficients.Sum(); s < 0.999 || s > 1.001 {
			t.Fatalf("accepted coefficients summing to %v", s)
		}
		if cfg.Weight.Min < 1 || !(cfg.Weight.Gain > 0) || len(cfg.Services) == 0 {
			t.Fatalf("accepted weight params %+v", cfg.Weight)
		}
		for _, s := range cfg.Services {
			for _, rs := range s.Servers {
				if rs.Weight < 1 || float64(rs.Weight)*cfg.Weight.Scale > 65535 || !rs.Addr.IsValid() || rs.AgentAddr == "" {
					t.Fatalf("accepted server %+v", rs)
				}
			}
		}
	})
}
