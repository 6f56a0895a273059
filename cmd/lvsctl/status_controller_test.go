package main

import (
	"strings"
	"testing"

	"lvs-feedback/control/controltest"
)

// lvsctl status names the keys of the controller in use with their values:
// under the default capacity controller, its own keys (anchor set in the
// file, the rest at their defaults), scale and min, not the LVS formula's.
func TestStatusShowsTheCapacityControllersKeys(t *testing.T) {
	lvsKeys := "controller = \"lvs\"\ngain      = 5.0\ntarget    = 0.95\nscale     = 10\nmin       = 1\nthreshold = 1\n"
	if !strings.Contains(controltest.Config, lvsKeys) {
		t.Fatalf("the rig's [weight] changed:\n%s", controltest.Config)
	}
	r := controltest.New(t, strings.Replace(controltest.Config, lvsKeys, "anchor = 0.3\n", 1))
	code, out, _ := lvsctl(t, r, "status")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	contains(t, "status header", out, "\ncontroller: capacity (smoothing 0.7, band 0.2, resolution 20, saturation 0.9, anchor 0.3, light 0.2, confirm 5, scale 10, min 1)\n")
}
