package policy

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// tableFields returns the toml tags of P's fields.
func tableFields[P any]() []string {
	var tags []string
	for f := range reflect.TypeFor[P]().Fields() {
		if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag != "" && tag != "-" {
			tags = append(tags, tag)
		}
	}
	return tags
}

// checkTable fails for a key declared without its doc line, values or
// reload, a default of another type than its field, a field of P with no
// declaration or with two, and a Near or Only that names nothing.
func checkTable[P any](t *testing.T, tb Table[P]) {
	t.Helper()
	v := reflect.ValueOf(new(P)).Elem()
	seen := map[string]bool{}
	for _, k := range tb.Params {
		name := tb.Name + "." + k.Key
		if seen[k.Key] {
			t.Errorf("%s is declared twice", name)
		}
		seen[k.Key] = true
		f := field(v, k.Key)
		switch {
		case !f.IsValid():
			t.Errorf("%s names no field of %s (its toml tag)", name, v.Type())
		case reflect.TypeOf(k.Default) != f.Type():
			t.Errorf("%s: default %#v is a %T, its field a %s", name, k.Default, k.Default, f.Type())
		}
		if strings.TrimSpace(k.Doc) == "" || strings.Contains(k.Doc, "\n") {
			t.Errorf("%s: Doc %q: want one line of text", name, k.Doc)
		}
		if k.Values == "" || k.Reload == "" {
			t.Errorf("%s: Values %q, Reload %q: want both", name, k.Values, k.Reload)
		}
		if k.Near != "" && !slices.ContainsFunc(tb.Params, func(o Param[P]) bool { return o.Key == k.Near }) {
			t.Errorf("%s: Near %q is no key of [%s]", name, k.Near, tb.Name)
		}
		if k.Only != "" && k.Only != ControllerLVS && k.Only != ControllerCapacity {
			t.Errorf("%s: Only %q is no controller", name, k.Only)
		}
	}
	for _, tag := range tableFields[P]() {
		if !seen[tag] {
			t.Errorf("%s.%s: a field of %s with no declaration (a key without its doc line, default and check)", tb.Name, tag, v.Type())
		}
	}
}

func TestParamsAreDeclared(t *testing.T) {
	checkTable(t, CoefficientsTable())
	checkTable(t, WeightTable())
	checkTable(t, GuardTable())
}

// The declarations give the defaults lvs-monitor shipped with before they
// were declared beside their controllers.
func TestDefaultParams(t *testing.T) {
	want := Params{
		Coefficients: Coefficients{Input: 0.1, CPU: 0.3, Memory: 0.1, Disk: 0.1, Response: 0.3, Process: 0.1},
		Weight: WeightParams{Gain: 5, Target: 0.95, Scale: 10, Min: 1, Threshold: 1,
			Controller: ControllerCapacity, Smoothing: 0.7, Band: 0.2, Resolution: 20, Saturation: 0.9, Anchor: 0.15, Light: 0.2, Confirm: 5},
		Guard: GuardParams{Check: time.Second, Trigger: 2, Release: 1.5, MinExcess: 16, Raise: true, Predict: true},
	}
	if got := DefaultParams(); got != want {
		t.Errorf("DefaultParams:\n%+v\nwant\n%+v", got, want)
	}
	if got := DefaultParams().Problems(); len(got) != 0 {
		t.Errorf("the defaults are refused: %v", got)
	}
}

// Each key the weight controllers do not share is one controller's: the
// other one's warnings and lvsctl status read that.
func TestWeightKeysOwners(t *testing.T) {
	var lvs, capacity, both []string
	for _, k := range WeightTable().Params {
		switch k.Only {
		case ControllerLVS:
			lvs = append(lvs, k.Key)
		case ControllerCapacity:
			capacity = append(capacity, k.Key)
		default:
			both = append(both, k.Key)
		}
	}
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"lvs", lvs, []string{"gain", "target", "threshold"}},
		{"capacity", capacity, []string{"smoothing", "band", "resolution", "saturation", "anchor", "light", "confirm"}},
		{"both", both, []string{"controller", "scale", "min"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
