package monitor

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"

	"lvs-feedback/policy"
)

// keyKind is the TOML type a configuration key must have.
type keyKind int

const (
	kindString   keyKind = iota + 1
	kindInteger          // a TOML integer
	kindNumber           // a TOML float; an integer is accepted too
	kindBool             //
	kindDuration         // a string with a unit: "5s", "250ms"
	kindStrings          // an array of strings
	kindTable            // [name] or name = { … }
	kindTables           // [[name]] or name = [{ … }, …]
)

func (k keyKind) String() string {
	switch k {
	case kindString:
		return "a string"
	case kindInteger:
		return "an integer"
	case kindNumber:
		return "a number"
	case kindBool:
		return "true or false"
	case kindDuration:
		return `a duration with a unit, such as "5s" or "250ms"`
	case kindStrings:
		return `an array of strings, ["…", …]`
	case kindTable:
		return "a table"
	case kindTables:
		return "an array of tables"
	}
	return "unknown kind"
}

// configKey is one key lvs-monitor reads.
type configKey struct {
	kind keyKind
	// controller, when set, is the only weight.controller that reads the
	// key: under the other one a value in the file is ignored (a warning).
	controller string
}

// controllerOnly names the keys that one weight controller reads and the
// other ignores, from their declarations (policy.Keys): a key every
// controller reads (min) is not in it.
var controllerOnly = func() map[string]string {
	only := map[string]string{}
	for _, k := range policy.Keys() {
		if k.Only != "" {
			only[k.Name] = k.Only
		}
	}
	return only
}()

// configKeys maps every key the file may set, as a dotted path without
// array indices ("service.server.weight"), to its kind. It is derived from
// Config's toml tags, so that a new field is a new key with nothing else
// to list: a time.Duration field is a duration, a slice of structs an
// array of tables.
var configKeys = keysOf(reflect.TypeFor[Config]())

var durationType = reflect.TypeFor[time.Duration]()

func keysOf(t reflect.Type) map[string]configKey {
	keys := map[string]configKey{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for f := range t.Fields() {
			name, ok := tomlName(f)
			if !ok {
				continue
			}
			path := joinKey(prefix, name)
			k := configKey{kind: kindOf(f.Type), controller: controllerOnly[path]}
			keys[path] = k
			switch k.kind {
			case kindTable:
				walk(path, f.Type)
			case kindTables:
				walk(path, f.Type.Elem())
			}
		}
	}
	walk("", t)
	return keys
}

func kindOf(t reflect.Type) keyKind {
	if t == durationType {
		return kindDuration
	}
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return kindInteger
	case reflect.Float32, reflect.Float64:
		return kindNumber
	case reflect.Bool:
		return kindBool
	case reflect.Struct:
		return kindTable
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return kindTables
		}
		if t.Elem().Kind() == reflect.String {
			return kindStrings
		}
	}
	panic(fmt.Sprintf("monitor: configuration field of type %s has no TOML kind", t))
}

// tomlName is the configuration key of a Config field: its toml tag's
// name; ok is false for a field the configuration does not read.
func tomlName(f reflect.StructField) (name string, ok bool) {
	name, _, _ = strings.Cut(f.Tag.Get("toml"), ",")
	return name, name != "" && name != "-" && f.IsExported()
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// childKeys returns the names of the keys directly under table (a schema
// path; "" for the top level), sorted, for "did you mean".
func childKeys(table string) []string {
	var names []string
	for path := range configKeys {
		parent, name := "", path
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			parent, name = path[:i], path[i+1:]
		}
		if parent == table {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// checkKeys checks every setting of the file against configKeys: unknown
// keys and tables (a misspelt table once, not once per key in it) and
// types. It reports whether every known key has the right type.
func (p *configProblems) checkKeys(idx fileIndex) bool {
	typesOK := true
	unknown := map[string]bool{} // indexed keys reported as unknown
	for _, s := range idx.settings {
		known := true
		for i := range s.path {
			if _, ok := configKeys[schemaKey(s.path[:i+1])]; ok {
				continue
			}
			known = false
			k := indexedKey(s.path[:i+1])
			if unknown[k] {
				break
			}
			unknown[k] = true
			isTable := i < len(s.path)-1 || s.kind == unstable.Table || s.kind == unstable.ArrayTable || s.kind == unstable.InlineTable
			p.list = append(p.list, &ConfigError{File: p.file, Line: idx.lines[k], Key: k,
				Msg: unknownKeyMessage(schemaKey(s.path[:i]), s.path[i].name, isTable)})
			break
		}
		if !known {
			continue
		}
		if msg := kindMismatch(configKeys[schemaKey(s.path)].kind, s); msg != "" {
			typesOK = false
			p.list = append(p.list, &ConfigError{File: p.file, Line: s.line, Key: s.key(), Msg: msg})
		}
	}
	return typesOK
}

func unknownKeyMessage(parent, name string, isTable bool) string {
	var tables, keys []string
	for _, c := range childKeys(parent) {
		switch configKeys[joinKey(parent, c)].kind {
		case kindTable, kindTables:
			tables = append(tables, c)
		default:
			keys = append(keys, c)
		}
	}
	if isTable {
		msg := fmt.Sprintf("unknown table [%s]", joinKey(parent, name))
		if s := suggest(name, tables); s != "" {
			msg += fmt.Sprintf(" (did you mean [%s]?)", joinKey(parent, s))
		}
		return msg
	}
	msg := "unknown key"
	if s := suggest(name, append(keys, tables...)); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

// kindMismatch returns why the setting s does not have kind want, or "".
func kindMismatch(want keyKind, s setting) string {
	got := s.kind
	ok := false
	switch want {
	case kindString:
		ok = got == unstable.String
	case kindInteger:
		ok = got == unstable.Integer
	case kindNumber:
		ok = got == unstable.Float || got == unstable.Integer
	case kindBool:
		ok = got == unstable.Bool
	case kindDuration:
		switch got {
		case unstable.String:
			if _, err := time.ParseDuration(s.value); err != nil {
				return fmt.Sprintf("%q is not a duration: write a number with a unit, such as %s = \"5s\" (units ns, us, ms, s, m, h)",
					s.value, s.path[len(s.path)-1].name)
			}
			return ""
		case unstable.Integer, unstable.Float:
			return fmt.Sprintf("a bare number has no unit: write %s = \"%ss\" or \"%sms\" (units ns, us, ms, s, m, h)",
				s.path[len(s.path)-1].name, s.value, s.value)
		}
	case kindStrings:
		ok = got == unstable.Array && !slices.ContainsFunc(s.elems, func(k unstable.Kind) bool { return k != unstable.String })
	case kindTable:
		ok = got == unstable.Table || got == unstable.InlineTable
		if got == unstable.ArrayTable {
			return fmt.Sprintf("must be a single table: write [%s], not [[%s]]", schemaKey(s.path), schemaKey(s.path))
		}
	case kindTables:
		ok = got == unstable.ArrayTable || got == unstable.InlineTable && s.path[len(s.path)-1].index >= 0 ||
			got == unstable.Array && len(s.elems) == 0 // name = [], no element
		if got == unstable.Table {
			return fmt.Sprintf("must be an array of tables: write [[%s]], not [%s]", schemaKey(s.path), schemaKey(s.path))
		}
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("must be %s, got %s", want, describeKind(got))
}

func describeKind(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Bool:
		return "a boolean"
	case unstable.Array:
		return "an array"
	case unstable.InlineTable, unstable.Table:
		return "a table"
	case unstable.ArrayTable:
		return "an array of tables"
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return "a date or time"
	}
	return k.String()
}

// ignoredSettings returns a warning for every key the file sets that the
// chosen weight controller does not read.
func ignoredSettings(file string, idx fileIndex, controller string) []ConfigWarning {
	var ws []ConfigWarning
	for _, s := range idx.settings {
		only := configKeys[schemaKey(s.path)].controller
		if only == "" || only == controller {
			continue
		}
		ws = append(ws, ConfigWarning{File: file, Line: s.line, Key: s.key(),
			Msg: fmt.Sprintf("ignored: only the %q controller reads it, and weight.controller is %q", only, controller)})
	}
	return ws
}
