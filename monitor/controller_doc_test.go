package monitor

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"lvs-feedback/policy"
)

const controllerPage = "../docs/controller.md"

// ruleKeys are the keys outside policy's tables and [availability] that a
// rule of the default controller reads: the cycle's period, the probe's
// and the agent poll's bounds (what counts as unreachable, and when a
// load is missing), RESPONSE's reference, a server's default weight (the
// anchor) and the health checker (who owns a 0).
var ruleKeys = []string{"interval", "probe_timeout", "agent_timeout", "service.probe.reference",
	"service.server.weight", "service.health_checker"}

// defaultControllerKeys returns every key a rule of the default controller
// reads: the keys policy declares for every controller or for the default
// one alone, every [availability] key, and ruleKeys.
func defaultControllerKeys() []string {
	ctrl := policy.DefaultParams().Weight.Controller
	var keys []string
	for _, k := range policy.Keys() {
		if k.Only == "" || k.Only == ctrl {
			keys = append(keys, k.Name)
		}
	}
	for k, ck := range configKeys {
		if strings.HasPrefix(k, "availability.") && ck.kind != kindTable {
			keys = append(keys, k)
		}
	}
	keys = append(keys, ruleKeys...)
	slices.Sort(keys)
	return keys
}

// ruleRow is one row of the page's table of rules.
type ruleRow struct {
	line        int
	name        string
	keys, tests []string // the code spans of the keys and tests columns
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

func spans(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// ruleTable parses the table whose header is "| rule | watches | acts
// when (defaults) | keys | test |".
func ruleTable(t *testing.T, page string) []ruleRow {
	t.Helper()
	lines := strings.Split(page, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| rule | watches |") })
	if start < 0 || start+1 >= len(lines) || !strings.HasPrefix(lines[start+1], "|---") {
		t.Fatalf("%s: no table of rules (a header \"| rule | watches | … | keys | test |\" and its separator)", controllerPage)
	}
	var rows []ruleRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := strings.Split(strings.Trim(lines[i], "|"), "|")
		if len(cells) != 5 {
			t.Errorf("%s:%d: %d cells, want 5 (rule, watches, acts when, keys, test; no | inside a cell)", controllerPage, i+1, len(cells))
			continue
		}
		rows = append(rows, ruleRow{line: i + 1, name: strings.TrimSpace(cells[0]), keys: spans(cells[3]), tests: spans(cells[4])})
	}
	return rows
}

// repoTests returns the name of every test function in the module's
// _test.go files.
func repoTests(t *testing.T) map[string]bool {
	t.Helper()
	if _, err := os.Stat("../go.mod"); err != nil {
		t.Fatalf("the module's root is not ..: %v", err)
	}
	decl := regexp.MustCompile(`(?m)^func (Test\w*)\(`)
	tests := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			tests[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tests
}

// TestControllerPage keeps docs/controller.md's table of rules true to the
// code: every key a rule of the default controller reads is named in some
// row's keys, every key named there is a key of the configuration, and
// every test named exists (func TestName( in a _test.go file of the
// module); every row names a test; design.md and tuning.md link the page
// (docs/links_test.go checks that every link reaches its heading).
func TestControllerPage(t *testing.T) {
	b, err := os.ReadFile(controllerPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	rows := ruleTable(t, page)
	if len(rows) < 30 {
		t.Fatalf("%s: %d rows in the table of rules; every rule of the default controller has one", controllerPage, len(rows))
	}
	tests := repoTests(t)
	named := map[string]bool{}
	for _, r := range rows {
		for _, k := range r.keys {
			named[k] = true
			if ck, ok := configKeys[k]; !ok || ck.kind == kindTable || ck.kind == kindTables {
				t.Errorf("%s:%d: rule %q names %q in its keys, which is no key of the configuration", controllerPage, r.line, r.name, k)
			}
		}
		if len(r.tests) == 0 {
			t.Errorf("%s:%d: rule %q names no test", controllerPage, r.line, r.name)
		}
		for _, name := range r.tests {
			if !tests[name] {
				t.Errorf("%s:%d: rule %q names test %s, which no _test.go file of the module declares", controllerPage, r.line, r.name, name)
			}
		}
	}
	for _, k := range defaultControllerKeys() {
		if !named[k] {
			t.Errorf("%s: the default controller reads %s, and no rule names it in its keys", controllerPage, k)
		}
	}

	for _, from := range []string{"developer/design.md", "tuning.md"} {
		b, err := os.ReadFile(filepath.Join("../docs", from))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "controller.md)") {
			t.Errorf("docs/%s does not link controller.md", from)
		}
	}
}
