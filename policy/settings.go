package policy

import "reflect"

// Setting is one [weight] key and its value, as the controller in use
// reads it.
type Setting struct {
	Key   string // the key within [weight], e.g. "anchor"
	Value float64
}

// ControllerKeys returns the [weight] keys the named controller reads
// besides controller itself, from the [weight] table (WeightTable): its
// own keys in their order, then the numeric keys every controller reads
// (min); nil for an unknown name. The configuration's "ignored under the
// other controller" warnings and lvsctl status's summary read the same
// table.
func ControllerKeys(controller string) []string {
	var own, shared []string
	for _, k := range WeightTable().Params {
		switch {
		case k.Only != "" && k.Only == controller:
			own = append(own, k.Key)
		case k.Only == "" && isNumber(k.Default):
			shared = append(shared, k.Key)
		}
	}
	if len(own) == 0 {
		return nil
	}
	return append(own, shared...)
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, float64:
		return true
	}
	return false
}

// Settings returns the [weight] keys the controller p.Controller reads,
// with their values in p, in ControllerKeys' order.
func (p WeightParams) Settings() []Setting {
	keys := ControllerKeys(p.Controller)
	out := make([]Setting, 0, len(keys))
	v := reflect.ValueOf(p)
	for _, k := range keys {
		out = append(out, Setting{Key: k, Value: number(field(v, k))})
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
