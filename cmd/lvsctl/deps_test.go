package main

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// daemonPackages are what lvsctl must not link: the daemon's packages and
// the heavy libraries they bring (netlink, the IPVS library, Prometheus).
// A path also stands for the packages under it.
var daemonPackages = []string{
	"github.com/vishvananda/netlink",
	"github.com/moby/ipvs",
	"github.com/prometheus/client_golang",
	"lvs-feedback/monitor",
	"lvs-feedback/ipvs",
	"lvs-feedback/scheduler",
}

// configImport is the one exception, until the configuration leaves
// package monitor: lvsctl imports monitor for check-config
// (monitor.LoadConfig) and to find control_socket (monitor.ParseConfig),
// and monitor brings the rest of daemonPackages. TestLean checks
// everything lvsctl links other than through that import, and fails once
// the import is gone so that the exception is removed with it.
const configImport = "lvs-feedback/monitor"

// TestLean checks that lvsctl links none of the daemon: the wire format
// and client it needs are in control/api, which imports the standard
// library only.
func TestLean(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	root := ""
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		imports[f[0]] = f[1:]
		root = f[0] // go list -deps prints the package itself last
	}
	if root != "lvs-feedback/cmd/lvsctl" {
		t.Fatalf("go list -deps ended with %q, want lvs-feedback/cmd/lvsctl", root)
	}

	// Walk the imports from lvsctl, breadth first (shortest chains), past
	// everything but lvsctl's own import of configImport.
	via := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := via[q]; seen || (p == root && q == configImport) {
				continue
			}
			via[q] = p
			queue = append(queue, q)
		}
	}
	chain := func(p string) string {
		var c []string
		for ; p != ""; p = via[p] {
			c = append([]string{p}, c...)
		}
		return strings.Join(c, " → ")
	}
	linked := make([]string, 0, len(via))
	for p := range via {
		linked = append(linked, p)
	}
	sort.Strings(linked)
	for _, p := range linked {
		if isDaemon(p) {
			t.Errorf("lvsctl links %s: %s", p, chain(p))
		}
	}

	direct := false
	for _, q := range imports[root] {
		direct = direct || q == configImport
	}
	if !direct {
		t.Errorf("lvsctl no longer imports %s: remove configImport, and TestLean checks everything", configImport)
		return
	}
	var all []string
	for p := range imports {
		if isDaemon(p) {
			all = append(all, p)
		}
	}
	sort.Strings(all)
	t.Logf("still linked through lvsctl's import of %s (configuration): %s", configImport, strings.Join(all, " "))
}

func isDaemon(p string) bool {
	for _, d := range daemonPackages {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
