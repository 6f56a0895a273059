package policy

import (
	"reflect"
	"slices"
	"strings"
)

// Setting is one [weight] key and its value, as the controller in use
// reads it.
type Setting struct {
	Key   string // the key within [weight], e.g. "anchor"
	Value float64
}

// controllerKeys are the [weight] keys each controller reads, in the order
// docs/configuration.md lists them: the one list the configuration's
// "ignored under the other controller" warnings and lvsctl status's
// summary come from. Both read controller and min.
var controllerKeys = map[string][]string{
	ControllerCapacity: {"smoothing", "band", "resolution", "saturation", "anchor", "light", "confirm", "min"},
	ControllerLVS:      {"gain", "target", "scale", "threshold", "min"},
}

// ControllerKeys returns the [weight] keys the named controller reads
// (besides controller itself); nil for an unknown name.
func ControllerKeys(controller string) []string {
	return slices.Clone(controllerKeys[controller])
}

// Settings returns the [weight] keys the controller p.Controller reads,
// with their values in p, in ControllerKeys' order; the value of a key is
// the field of WeightParams whose toml tag it is.
func (p WeightParams) Settings() []Setting {
	keys := controllerKeys[p.Controller]
	out := make([]Setting, 0, len(keys))
	v := reflect.ValueOf(p)
	for _, k := range keys {
		for _, f := range reflect.VisibleFields(v.Type()) {
			if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag == k {
				out = append(out, Setting{Key: k, Value: number(v.FieldByIndex(f.Index))})
			}
		}
	}
	return out
}

// number is an integer or floating-point field's value as a float64.
func number(v reflect.Value) float64 {
	if v.CanInt() {
		return float64(v.Int())
	}
	return v.Float()
}
