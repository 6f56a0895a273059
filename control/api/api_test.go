package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly holds the package to its rule (see the package
// documentation): it imports the standard library only.
func TestStandardLibraryOnly(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "lvs-feedback/control/api" {
			t.Errorf("control/api depends on %s, outside the standard library", p)
		}
	}
}
