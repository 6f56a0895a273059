package policy

import (
	"reflect"
	"testing"
)

// Each controller's settings are its keys with the values of the fields
// their toml tags name, in order: every key listed is a numeric field.
func TestSettings(t *testing.T) {
	p := WeightParams{Controller: ControllerCapacity, Gain: 2, Target: 0.9, Scale: 3, Min: 1, Threshold: 4,
		Smoothing: 0.7, Band: 0.2, Resolution: 20, Saturation: 0.9, Anchor: 0.15, Light: 0.25, Confirm: 5}
	want := []Setting{{"smoothing", 0.7}, {"band", 0.2}, {"resolution", 20}, {"saturation", 0.9}, {"anchor", 0.15}, {"light", 0.25}, {"confirm", 5}, {"scale", 3}, {"min", 1}}
	if got := p.Settings(); !reflect.DeepEqual(got, want) {
		t.Errorf("capacity: %v, want %v", got, want)
	}
	p.Controller = ControllerLVS
	want = []Setting{{"gain", 2}, {"target", 0.9}, {"threshold", 4}, {"scale", 3}, {"min", 1}}
	if got := p.Settings(); !reflect.DeepEqual(got, want) {
		t.Errorf("lvs: %v, want %v", got, want)
	}
	p.Controller = "pid"
	if got := p.Settings(); len(got) != 0 || ControllerKeys("pid") != nil {
		t.Errorf("an unknown controller: %v, %v", got, ControllerKeys("pid"))
	}
	for _, c := range []string{ControllerCapacity, ControllerLVS} {
		keys := ControllerKeys(c)
		p.Controller = c
		if n := len(p.Settings()); n != len(keys) {
			t.Errorf("%s: %d settings for %d keys %v: a key names no field of WeightParams", c, n, len(keys), keys)
		}
	}
}
