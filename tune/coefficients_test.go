package tune

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"lvs-feedback/monitor"
)

// The block replaces a file's [coefficients], the rest of the file kept,
// or is added to a file without one (the example configuration, which
// leaves them at their defaults), and the result passes the monitor's
// check with exactly the new coefficients; dotted keys are refused.
func TestReplaceCoefficients(t *testing.T) {
	example, err := os.ReadFile("../docs/examples/lvs-monitor.toml")
	if err != nil {
		t.Fatal(err)
	}
	v := Vector{0.2, 0.5, 0, 0, 0.3, 0}
	for name, cfg := range map[string][]byte{
		"example": example,
		"with coefficients": []byte("interval = \"10s\"\n[coefficients]  # the web example\ninput = 0.1\ncpu = 0.3\nmemory = 0.1\n" +
			"disk = 0.1\nresponse = 0.3\nprocess = 0.1\n[weight]\ncontroller = \"lvs\"\n[[service]]\naddress = \"192.0.2.10:80/tcp\"\n" +
			"[[service.server]]\naddress = \"198.51.100.11:80\"\nweight = 10\n"),
		"no coefficients": []byte("[weight]\ncontroller = \"lvs\"\n[[service]]\naddress = \"192.0.2.10:80/tcp\"\n" +
			"[[service.server]]\naddress = \"198.51.100.11:80\"\nweight = 10\n"),
	} {
		before, _, err := monitor.CheckConfig(name, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
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
		got.Coefficients = before.Coefficients
		if !reflect.DeepEqual(got, before) {
			t.Errorf("%s: with the block, more than the coefficients changed:\n%s", name, out)
		}
	}
	if _, err := ReplaceCoefficients([]byte("coefficients.cpu = 1\n"), v); err == nil {
		t.Error("dotted keys: no error")
	}
}
