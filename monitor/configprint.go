package monitor

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/BurntSushi/toml"
)

// EffectiveConfigFile reads and checks a configuration file like
// CheckConfigFile and returns, when it is valid, the effective
// configuration as TOML (see EffectiveConfig).
func EffectiveConfigFile(path string) (string, []ConfigWarning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("read config: %w", err)
	}
	return EffectiveConfig(path, data)
}

// EffectiveConfig checks data like CheckConfig and returns, when it is
// valid, every key lvs-monitor reads with the value it runs with, as TOML
// that reads back to the same configuration: each value is followed by a
// comment saying where it came from, "NAME:LINE" of the file or "default".
func EffectiveConfig(name string, data []byte) (string, []ConfigWarning, error) {
	cfg, idx, ws, err := checkConfig(name, data)
	if err != nil {
		return "", nil, err
	}
	text, err := renderConfig(name, cfg, idx)
	if err != nil {
		return "", nil, err
	}
	return text, ws, nil
}

// renderConfig prints cfg, a checked configuration read from file, whose
// keys idx locates. It walks Config's toml tags as configKeys does, so a
// new key is printed with nothing else to change: in each table its keys
// first, then its tables, then its arrays of tables, in field order, as
// TOML needs (a key after a table header belongs to that table).
func renderConfig(file string, cfg Config, idx fileIndex) (string, error) {
	// The name goes in comments, where TOML allows no control character
	// (a newline would end the comment).
	file = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\t' {
			return '?'
		}
		return r
	}, file)
	p := configPrinter{file: file, lines: idx.lines, cfg: cfg}
	fmt.Fprintf(&p.b, "# The effective configuration of %s: every key lvs-monitor reads, with the\n"+
		"# value it runs with and where that came from (\"default\": not in the file).\n", file)
	p.table(reflect.ValueOf(cfg), "", "")
	return p.b.String(), p.err
}

type configPrinter struct {
	b     strings.Builder
	file  string
	lines map[string]int
	cfg   Config
	err   error
}

// table prints the keys of the struct v, the table at schema path schema
// ("service.server") and indexed key at ("service[0].server[1]"), then its
// sub-tables.
func (p *configPrinter) table(v reflect.Value, schema, at string) {
	type field struct {
		name string
		v    reflect.Value
		kind keyKind
	}
	var fields []field
	for i := range v.NumField() {
		name, ok := tomlName(v.Type().Field(i))
		if !ok {
			continue
		}
		fields = append(fields, field{name, v.Field(i), configKeys[joinKey(schema, name)].kind})
	}
	for _, f := range fields {
		if f.kind != kindTable && f.kind != kindTables {
			p.key(f.name, f.v, joinKey(schema, f.name), joinKey(at, f.name))
		}
	}
	for _, f := range fields {
		if f.kind != kindTable {
			continue
		}
		path, key := joinKey(schema, f.name), joinKey(at, f.name)
		if !p.printTable(path, key) {
			continue
		}
		p.b.WriteString("\n[" + path + "]" + p.headerSource(key) + "\n")
		p.table(f.v, path, key)
	}
	for _, f := range fields {
		if f.kind != kindTables {
			continue
		}
		path := joinKey(schema, f.name)
		for i := range f.v.Len() {
			key := fmt.Sprintf("%s[%d]", joinKey(at, f.name), i)
			p.b.WriteString("\n[[" + path + "]]" + p.headerSource(key) + "\n")
			p.table(f.v.Index(i), path, key)
		}
	}
}

// printTable reports whether the table at schema path path, indexed key,
// is printed: every one but [sync.etcd] always, that one when the file has
// it (a fleet's file always has: it must name endpoints), so that a
// director that runs alone or in a pair is not shown keys it never reads.
func (p *configPrinter) printTable(path, key string) bool {
	if path != "sync.etcd" {
		return true
	}
	_, inFile := p.lines[key]
	return inFile
}

// key prints one key = value line with its source.
func (p *configPrinter) key(name string, v reflect.Value, schema, at string) {
	val, err := tomlValue(v)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("print %s: %w", at, err)
	}
	src := "default"
	if line, ok := p.lines[at]; ok {
		src = fmt.Sprintf("%s:%d", p.file, line)
	}
	if only := configKeys[schema].controller; only != "" && only != p.cfg.Weight.Controller {
		src += fmt.Sprintf("; ignored by controller %q", p.cfg.Weight.Controller)
	}
	fmt.Fprintf(&p.b, "%s = %s  # %s\n", name, val, src)
}

// headerSource is the comment after a table header: the line that starts
// the table in the file, or nothing for a table the file leaves out.
func (p *configPrinter) headerSource(key string) string {
	if line, ok := p.lines[key]; ok {
		return fmt.Sprintf("  # %s:%d", p.file, line)
	}
	return ""
}

// tomlValue encodes a key's value as the configuration reads it back:
// a duration as a string with its unit, the rest by the TOML encoder
// (its quoting of strings and its floats, which always have a decimal
// point or an exponent).
func tomlValue(v reflect.Value) (string, error) {
	var x any
	switch {
	case v.Type() == durationType:
		x = time.Duration(v.Int()).String()
	case v.Kind() == reflect.Slice && v.Len() == 0:
		return "[]", nil // the encoder leaves out an empty array
	default:
		x = v.Interface()
	}
	b, err := toml.Marshal(map[string]any{"v": x})
	if err != nil {
		return "", err
	}
	s, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "v = ")
	if !ok || strings.Contains(s, "\n") {
		return "", fmt.Errorf("the TOML encoder wrote %q for %v", b, x)
	}
	return s, nil
}
