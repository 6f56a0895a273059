package monitor

import (
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The metrics endpoint has no authentication and names every service and
// real server: by default only the director itself may scrape it. The
// code's default, a configuration that does not set it, the example file
// and the reference page must all say the same loopback address.
func TestMetricsListenDefaultsToLoopback(t *testing.T) {
	loopback := func(what, addr string) {
		t.Helper()
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("%s: metrics_listen %q: %v", what, addr, err)
			return
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
			t.Errorf("%s: metrics_listen %q listens beyond loopback", what, addr)
		}
	}
	def := DefaultConfig().MetricsListen
	loopback("DefaultConfig", def)

	cfg, err := ParseConfig("min.toml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	loopback("a configuration without metrics_listen", cfg.MetricsListen)

	ex, err := LoadConfig("../docs/examples/lvs-monitor.toml")
	if err != nil {
		t.Fatal(err)
	}
	if ex.MetricsListen != def {
		t.Errorf("docs/examples/lvs-monitor.toml: metrics_listen %q, want the default %q", ex.MetricsListen, def)
	}

	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `metrics_listen` \\|[^|]*\\| ([^|]*) \\|").FindSubmatch(doc)
	if row == nil || strings.TrimSpace(string(row[1])) != "`\""+def+"\"`" {
		t.Errorf("docs/configuration.md: metrics_listen default %q, want `\"%s\"`", row, def)
	}
}
