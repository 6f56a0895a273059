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
	"lvs-feedback/policy",
}

// TestLean checks that lvsctl links none of the daemon: the wire format
// and client it needs are in control/api, which imports the standard
// library only; it reads control_socket with the TOML library alone,
// check-config runs lvs-monitor -check, and top drives the terminal with
// golang.org/x/term (raw mode, size) and plain ANSI sequences.
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

	// Walk the imports from lvsctl, breadth first (shortest chains).
	via := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := via[q]; seen {
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
}

func isDaemon(p string) bool {
	for _, d := range daemonPackages {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
