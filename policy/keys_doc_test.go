package policy

import (
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The reference texts of the keys policy declares are rendered from the
// declarations: a row of docs/configuration.md's key table and an entry of
// lvs-monitor.toml(5) per key. TestReferenceDocs fails when either file
// differs from what the declarations render to; -update rewrites them
// (then run make man for the roff).
var update = flag.Bool("update", false, "rewrite the keys' rows of docs/configuration.md and their entries of docs/man/lvs-monitor.toml.5.md from the declarations")

const (
	referencePath = "../docs/configuration.md"
	manPath       = "../docs/man/lvs-monitor.toml.5.md"
)

// policyTables are the tables policy owns, as the reference orders them.
func policyTables() []struct {
	name string
	keys []Key
} {
	return []struct {
		name string
		keys []Key
	}{
		{"coefficients", CoefficientsTable().Keys()},
		{"weight", WeightTable().Keys()},
		{"backlog_guard", GuardTable().Keys()},
	}
}

// tomlValue writes a default as the file would: a float64 always with a
// fraction or exponent, so that it reads as a number, not an integer.
func tomlValue(v any) string {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case string:
		return strconv.Quote(v)
	case time.Duration:
		return strconv.Quote(v.String())
	}
	panic(fmt.Sprintf("no TOML form for the default %#v", v))
}

// referenceRow is k's row of the key table of docs/configuration.md. A
// table cell may hold no bare |.
func referenceRow(k Key) string {
	cell := strings.NewReplacer("|", `\|`).Replace
	return fmt.Sprintf("| `%s` | %s | `%s` | %s | %s |", k.Name, cell(k.Values), tomlValue(k.Default), k.Reload, cell(k.Doc))
}

var (
	mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	mdCode = regexp.MustCompile("`([^`]*)`")
)

// manText is Markdown text as the manual page writes it: a link is its
// text (the pages are named), code is bold, and a < is escaped (go-md2man
// drops "<1" as the start of an HTML tag).
func manText(s string) string {
	s = mdCode.ReplaceAllString(mdLink.ReplaceAllString(s, "$1"), "**$1**")
	return strings.ReplaceAll(s, "<", `\<`)
}

// manEntry is k's entry of lvs-monitor.toml.5.md.
func manEntry(k Key) string {
	return fmt.Sprintf("**%s** (%s; default **%s**; on reload: %s)\n:   %s\n", k.Name, manText(k.Values), tomlValue(k.Default), k.Reload, manText(k.Doc))
}

// replaceRows returns doc with the rows of table's keys, which must be
// consecutive, replaced by rows.
func replaceRows(doc, table string, rows []string) (string, error) {
	lines := strings.Split(doc, "\n")
	first, last := -1, -1
	for i, l := range lines {
		if strings.HasPrefix(l, "| `"+table+".") {
			if first < 0 {
				first = i
			} else if last != i-1 {
				return "", fmt.Errorf("the rows of [%s] are not consecutive (line %d)", table, i+1)
			}
			last = i
		}
	}
	if first < 0 {
		return "", fmt.Errorf("no row of [%s] in the key table", table)
	}
	return strings.Join(append(append(lines[:first:first], rows...), lines[last+1:]...), "\n"), nil
}

// replaceSection returns page with the body of the section "## [table]"
// replaced by body.
func replaceSection(page, table, body string) (string, error) {
	head := "## [" + table + "]\n\n"
	i := strings.Index(page, head)
	if i < 0 {
		return "", fmt.Errorf("no section %q", strings.TrimSpace(head))
	}
	start := i + len(head)
	end := strings.Index(page[start:], "\n## ")
	if end < 0 {
		end = strings.Index(page[start:], "\n# ")
	}
	if end < 0 {
		return "", fmt.Errorf("section [%s] has no end", table)
	}
	return page[:start] + body + page[start+end:], nil
}

// TestReferenceDocs fails when a key's default, values, reload or text in
// docs/configuration.md or lvs-monitor.toml(5) differs from its
// declaration, or a declared key is missing there.
func TestReferenceDocs(t *testing.T) {
	for _, f := range []struct {
		path   string
		render func(doc string) (string, error)
	}{
		{referencePath, func(doc string) (string, error) {
			for _, tb := range policyTables() {
				var rows []string
				for _, k := range tb.keys {
					rows = append(rows, referenceRow(k))
				}
				var err error
				if doc, err = replaceRows(doc, tb.name, rows); err != nil {
					return "", err
				}
			}
			return doc, nil
		}},
		{manPath, func(page string) (string, error) {
			for _, tb := range policyTables() {
				var entries []string
				for _, k := range tb.keys {
					entries = append(entries, manEntry(k))
				}
				var err error
				if page, err = replaceSection(page, tb.name, strings.Join(entries, "\n")); err != nil {
					return "", err
				}
			}
			return page, nil
		}},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.render(string(b))
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		if want == string(b) {
			continue
		}
		if *update {
			if err := os.WriteFile(f.path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s rewritten from the declarations", f.path)
			continue
		}
		got, wantLines := strings.Split(string(b), "\n"), strings.Split(want, "\n")
		for i := range min(len(got), len(wantLines)) {
			if got[i] != wantLines[i] {
				t.Errorf("%s:%d differs from the declarations (policy.Keys):\n got: %s\nwant: %s\n(go test ./policy -run TestReferenceDocs -update rewrites it; then make man)", f.path, i+1, got[i], wantLines[i])
				break
			}
		}
		if len(got) != len(wantLines) {
			t.Errorf("%s: %d lines, the declarations render %d", f.path, len(got), len(wantLines))
		}
	}
}

// The table of "What the check warns about" in docs/configuration.md
// lists, for each controller, the keys only it reads and those only the
// other reads, as the declarations mark them.
func TestReferenceWarnTable(t *testing.T) {
	b, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string][]string{}
	for _, k := range WeightTable().Params {
		if k.Only != "" {
			own[k.Only] = append(own[k.Only], "`"+k.Key+"`")
		}
	}
	for c, other := range map[string]string{ControllerCapacity: ControllerLVS, ControllerLVS: ControllerCapacity} {
		row := regexp.MustCompile("(?m)^\\| `\"" + c + "\"`[^|]*\\| ([^|]*) \\| ([^|]*) \\|$").FindStringSubmatch(string(b))
		if row == nil {
			t.Errorf("%s: no row for %q in the table of what the check warns about", referencePath, c)
			continue
		}
		if want := strings.Join(own[c], ", "); row[1] != want {
			t.Errorf("%s: %q reads %s, the declarations say %s", referencePath, c, row[1], want)
		}
		if want := strings.Join(own[other], ", "); row[2] != want {
			t.Errorf("%s: %q ignores %s, the declarations say %s", referencePath, c, row[2], want)
		}
	}
}

// lvs-monitor.toml(5)'s DESCRIPTION names the keys each controller ignores
// (the other one's own keys), as the declarations mark them.
func TestManNamesIgnoredKeys(t *testing.T) {
	b, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Join(strings.Fields(string(b)), " ")
	m := regexp.MustCompile(`\(([^()]*) under "capacity"; ([^()]*) under "lvs"\)`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("%s: no list of the keys each controller ignores", manPath)
	}
	own := map[string][]string{}
	for _, k := range WeightTable().Params {
		if k.Only != "" {
			own[k.Only] = append(own[k.Only], "**"+k.Key+"**")
		}
	}
	for i, c := range []string{ControllerLVS, ControllerCapacity} { // ignored under the other one
		if got, want := m[i+1], strings.Join(own[c], ", "); got != want {
			t.Errorf("%s: ignored under the other controller: %s, the declarations say %s", manPath, got, want)
		}
	}
}
