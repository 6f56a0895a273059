package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Param is one key of a configuration table whose settings are a P
// (Coefficients, WeightParams, GuardParams), declared once beside the code
// that reads it: its name, default, check and reference text. The
// configuration reader (package monitor) applies the defaults, runs the
// checks and warns about the keys a controller ignores from it;
// docs/configuration.md's row and the manual page's entry are rendered
// from it (keys_doc_test.go), and lvsctl status shows the values of the
// keys the controller in use reads (Settings).
type Param[P any] struct {
	// Key is the name within its table: the toml tag of P's field.
	Key string
	// Default is the value when the file does not set the key, of the
	// field's type (5.0, not 5, for a float64).
	Default any
	// Values says which values the key takes, in the reference's words
	// ("0…65535"); Reload, when a new value applies after a reload
	// ("next cycle").
	Values string
	Reload string
	// Doc is the reference's text for the key: one line of Markdown.
	Doc string
	// Check returns why p's value of the key is refused, or "". Nil: every
	// value of the type is valid.
	Check func(p P) string
	// Near is the key of the same table that a refused value may lie in
	// instead, the other side of a comparison: the mistake is reported at
	// its line when the file does not set Key.
	Near string
	// Only is the one weight.controller that reads the key; "" when it is
	// read whichever controller runs. Set where a controller's keys are
	// composed into the [weight] table (WeightTable).
	Only string
}

// refuse is a Param's Check result: the message of format and a when bad,
// "" (accepted) otherwise.
func refuse(bad bool, format string, a ...any) string {
	if !bad {
		return ""
	}
	return fmt.Sprintf(format, a...)
}

// Table is one table of the configuration whose keys policy owns.
type Table[P any] struct {
	Name   string // "weight"
	Params []Param[P]
	// Check, when set, checks the keys together (the coefficients' sum);
	// its mistake is the table's.
	Check func(p P) string
}

// Defaults returns P with every key at its default. A Default that names
// no field of P or has another type than its field panics: that is a
// mistake in a declaration, which every test that reads a configuration
// meets (TestParamsAreDeclared names it).
func (t Table[P]) Defaults() P {
	var p P
	v := reflect.ValueOf(&p).Elem()
	for _, k := range t.Params {
		f := field(v, k.Key)
		if !f.IsValid() {
			panic(fmt.Sprintf("policy: [%s] key %q names no field of %s", t.Name, k.Key, v.Type()))
		}
		f.Set(reflect.ValueOf(k.Default))
	}
	return p
}

// Problems returns the mistakes in p, one per refused key, in the
// table's order, the table's own check last.
func (t Table[P]) Problems(p P) []Problem {
	var out []Problem
	for _, k := range t.Params {
		if k.Check == nil {
			continue
		}
		if msg := k.Check(p); msg != "" {
			pr := Problem{Key: t.Name + "." + k.Key, Msg: msg}
			if k.Near != "" {
				pr.Near = t.Name + "." + k.Near
			}
			out = append(out, pr)
		}
	}
	if t.Check != nil {
		if msg := t.Check(p); msg != "" {
			out = append(out, Problem{Key: t.Name, Msg: msg})
		}
	}
	return out
}

// Keys returns the table's keys named in full ("weight.threshold"),
// without their checks.
func (t Table[P]) Keys() []Key {
	out := make([]Key, len(t.Params))
	for i, k := range t.Params {
		out[i] = Key{Name: t.Name + "." + k.Key, Default: k.Default, Values: k.Values, Reload: k.Reload, Doc: k.Doc, Only: k.Only}
	}
	return out
}

// field returns the field of the struct v whose toml tag is key, or the
// zero Value.
func field(v reflect.Value, key string) reflect.Value {
	for i := range v.NumField() {
		if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ","); tag == key {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// Key is a Param of any table, named in full, as the configuration
// reader's warnings and the documentation read it.
type Key struct {
	Name    string // "weight.threshold"
	Default any
	Values  string
	Reload  string
	Doc     string
	Only    string
}

// Problem is a value a check refuses: Key's (a table's, for a check of
// the table), or possibly Near's when the file does not set Key.
type Problem struct {
	Key  string
	Near string // "" when the check compares with no other key
	Msg  string
}

// Keys returns every key policy owns, in the order of the reference
// (docs/configuration.md): [coefficients], [weight], [backlog_guard].
func Keys() []Key {
	return slices.Concat(CoefficientsTable().Keys(), WeightTable().Keys(), GuardTable().Keys())
}

// DefaultParams returns the defaults of every key policy owns;
// Availability, which the configuration reader declares and checks
// against its interval, is left zero.
func DefaultParams() Params {
	return Params{Coefficients: CoefficientsTable().Defaults(), Weight: WeightTable().Defaults(), Guard: GuardTable().Defaults()}
}

// Problems checks every key policy owns (not Availability), table by
// table.
func (p Params) Problems() []Problem {
	return slices.Concat(CoefficientsTable().Problems(p.Coefficients), WeightTable().Problems(p.Weight), GuardTable().Problems(p.Guard))
}

// WeightTable is the [weight] table: the keys every controller reads
// (controller, min), then each controller's own keys, marked as only its
// own.
func WeightTable() Table[WeightParams] {
	params := sharedWeightKeys()
	for _, c := range []struct {
		name   string
		params []Param[WeightParams]
	}{{ControllerLVS, lvsKeys()}, {ControllerCapacity, capacityKeys()}} {
		for _, k := range c.params {
			k.Only = c.name
			params = append(params, k)
		}
	}
	return Table[WeightParams]{Name: "weight", Params: params}
}
