// Package man holds the manual pages of lvs-feedback: each docs/man/PAGE.md
// is the source of docs/man/PAGE, rendered by `make man` (go-md2man);
// `make man-check` keeps the roff current. This test keeps the sources
// current with the programs: every flag and command a binary's -h prints
// is in its page, and every key of the example configuration is in
// lvs-monitor.toml(5). (One direction only: a page may document a flag
// before it exists.)
package man

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// flagName is a flag as usage text writes it: -name or --name.
const flagName = `(--?[a-z][a-z0-9-]*)`

var (
	// A flag the flag package lists, at the start of an indented line.
	listedFlag = regexp.MustCompile(`^\s*` + flagName)
	// A flag in a synopsis: [-name …].
	bracketFlag = regexp.MustCompile(`\[` + flagName)
)

// helpFlags returns the flags a binary's -h output names: listed by the
// flag package, in brackets in a synopsis, or right after the program's
// name ("lvsctl -version"). Flags in prose (ipvsadm's, in an example) are
// not the program's.
func helpFlags(program, help string) []string {
	afterName := regexp.MustCompile(`(?:^|\s)` + regexp.QuoteMeta(program) + `\s+` + flagName)
	seen := map[string]bool{}
	var flags []string
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			flags = append(flags, f)
		}
	}
	for line := range strings.SplitSeq(help, "\n") {
		if m := listedFlag.FindStringSubmatch(line); m != nil {
			add(m[1])
		}
		for _, m := range bracketFlag.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
		for _, m := range afterName.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
	}
	return flags
}

// helpCommands returns the command names listed under "commands:" in
// lvsctl's usage: the first word of each line indented by two spaces.
func helpCommands(help string) []string {
	var cmds []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "commands:":
			in = true
		case in && line == "":
			in = false
		case in && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   "):
			cmds = append(cmds, strings.Fields(line)[0])
		}
	}
	return cmds
}

func TestHelpFlagsAreDocumented(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in PATH: the test builds each binary to read its -h")
	}
	bin := t.TempDir()
	build := exec.Command(goBin, "build", "-o", bin+"/", "../../cmd/lvs-monitor", "../../cmd/lvs-agent", "../../cmd/lvsctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, c := range []struct{ binary, page string }{
		{"lvs-monitor", "lvs-monitor.8.md"},
		{"lvs-agent", "lvs-agent.8.md"},
		{"lvsctl", "lvsctl.8.md"},
	} {
		t.Run(c.binary, func(t *testing.T) {
			// -h exits 0 or 2 depending on the program; either way the
			// usage is printed, on stdout or stderr.
			out, err := exec.Command(filepath.Join(bin, c.binary), "-h").CombinedOutput()
			if _, exit := err.(*exec.ExitError); err != nil && !exit {
				t.Fatalf("%s -h: %v", c.binary, err)
			}
			help := string(out)
			page, err := os.ReadFile(c.page)
			if err != nil {
				t.Fatal(err)
			}
			flags := helpFlags(c.binary, help)
			if len(flags) < 3 {
				t.Fatalf("%s -h: found only %v; the usage format changed?\n%s", c.binary, flags, help)
			}
			for _, f := range flags {
				if !strings.Contains(string(page), "**"+f+"**") {
					t.Errorf("%s -h prints %s, which %s does not document (as **%s**)", c.binary, f, c.page, f)
				}
			}
			for _, cmd := range helpCommands(help) {
				if !strings.Contains(string(page), "**"+cmd+"**") {
					t.Errorf("%s -h lists the command %s, which %s does not document (as **%s**)", c.binary, cmd, c.page, cmd)
				}
			}
		})
	}
}

// exampleKey matches a key line of the example configuration, commented
// out or not: `name = VALUE`, VALUE a TOML string, number, array or
// boolean (so that a formula in a comment is not a key).
var (
	exampleKey   = regexp.MustCompile(`^#?\s*([a-z_]+)\s*=\s*(?:"|-?\d|\[|true|false)`)
	exampleTable = regexp.MustCompile(`^#?\s*\[\[?([a-z_.]+)\]\]?\s*(#.*)?$`)
)

// exampleKeys returns every key of the example configuration with its
// table: "interval", "weight.gain", "service.probe.host", ….
func exampleKeys(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	table := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := exampleTable.FindStringSubmatch(line); m != nil {
			table = m[1] + "."
			continue
		}
		if m := exampleKey.FindStringSubmatch(line); m != nil {
			keys = append(keys, table+m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestExampleKeysAreDocumented(t *testing.T) {
	page, err := os.ReadFile("lvs-monitor.toml.5.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := exampleKeys(t, "../examples/lvs-monitor.toml")
	// The example sets only what an operator usually sets, these among them.
	for _, k := range []string{"interval", "service.address", "service.probe.type", "service.server.weight"} {
		if !slices.Contains(keys, k) {
			t.Fatalf("%s not found among the keys of the example: %v", k, keys)
		}
	}
	for _, k := range keys {
		if !strings.Contains(string(page), "**"+k+"**") {
			t.Errorf("the example configuration has %s, which lvs-monitor.toml.5.md does not document (as **%s**)", k, k)
		}
	}
}

func TestHelpParsing(t *testing.T) {
	help := `usage: lvsctl [-socket PATH] COMMAND
       lvsctl -version

commands:
  status [-o table|json]                      every service
  drain SERVICE SERVER [--wait] [--timeout D] weight 0 as an operator drain;
                                              --wait shows connections
  check-config FILE                           a file (found next to lvs-monitor)

SERVICE is VIP:PORT/PROTO or fwmark:N; with -dry-run, ipvsadm -S -n output.
  -listen address
    	where (default ":9771")
`
	if got, want := strings.Join(helpFlags("lvsctl", help), " "), "-socket -version -o --wait --timeout -listen"; got != want {
		t.Errorf("helpFlags: %q, want %q", got, want)
	}
	if got, want := strings.Join(helpCommands(help), " "), "status drain check-config"; got != want {
		t.Errorf("helpCommands: %q, want %q", got, want)
	}
}
