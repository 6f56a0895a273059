package tune

import (
	"os"
	"strings"
	"testing"

	"lvs-feedback/monitor"
)

// The block replaces the example configuration's [coefficients] (or is
// added to a file without one), and the result passes the monitor's
// check with exactly the new coefficients; dotted keys are refused.
func TestReplaceCoefficients(t *testing.T) {
	example, err := os.ReadFile("../docs/examples/lvs-monitor.toml")
	if err != nil {
		t.Fatal(err)
	}
	v := Vector{0.2, 0.5, 0, 0, 0.3, 0}
	for name, cfg := range map[string][]byte{
		"example": example,
		"no coefficients": []byte("[weight]\ncontroller = \"lvs\"\n[[service]]\naddress = \"192.0.2.10:80/tcp\"\n" +
			"[[service.server]]\naddress = \"198.51.100.11:80\"\nweight = 10\n"),
	} {
		out, err := ReplaceCoefficients(cfg, v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _, err := monitor.CheckConfig(name, out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if VectorOf(got.Coefficients) != v || strings.Count(string(out), "[coefficients]") != 1 {
			t.Errorf("%s: coefficients %v, want %v:\n%s", name, got.Coefficients, v, out)
		}
	}
	if _, err := ReplaceCoefficients([]byte("coefficients.cpu = 1\n"), v); err == nil {
		t.Error("dotted keys: no error")
	}
}
