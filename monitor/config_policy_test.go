package monitor

import (
	"slices"
	"strings"
	"testing"

	"lvs-feedback/policy"
)

// policyChecks is, for every key policy declares with a check (and the
// coefficients' table check), a value it refuses and the exact line the
// configuration reader reports: a check that the reader bypasses, or whose
// message changes, fails here.
var policyChecks = []struct {
	key, set, want string
}{
	{"coefficients", "coefficients.input = 0.2", "t.toml:1: coefficients: must sum to 1 (±0.001), they sum to 1.1000 (input 0.2 + cpu 0.3 + memory 0.1 + disk 0.1 + response 0.3 + process 0.1)"},
	{"coefficients.input", "coefficients.input = -0.1", "t.toml:1: coefficients.input: must be between 0 and 1, got -0.1"},
	{"coefficients.cpu", "coefficients.cpu = 1.5", "t.toml:1: coefficients.cpu: must be between 0 and 1, got 1.5"},
	{"coefficients.memory", "coefficients.memory = -0.5", "t.toml:1: coefficients.memory: must be between 0 and 1, got -0.5"},
	{"coefficients.disk", "coefficients.disk = 2.0", "t.toml:1: coefficients.disk: must be between 0 and 1, got 2"},
	{"coefficients.response", "coefficients.response = -0.3", "t.toml:1: coefficients.response: must be between 0 and 1, got -0.3"},
	{"coefficients.process", "coefficients.process = nan", "t.toml:1: coefficients.process: must be between 0 and 1, got NaN"},
	{"weight.controller", `weight.controller = "pid"`, `t.toml:1: weight.controller: must be "capacity" or "lvs", got "pid"`},
	{"weight.min", "weight.min = 0", "t.toml:1: weight.min: must be from 1 to 65535 (only an unreachable server or an operator gets weight 0), got 0"},
	{"weight.gain", "weight.gain = -5.0", "t.toml:1: weight.gain: must be a positive number, got -5"},
	{"weight.target", "weight.target = 11.0", "t.toml:1: weight.target: must be a load above 0 (0.95 is the documented target), got 11"},
	{"weight.scale", "weight.scale = inf", "t.toml:1: weight.scale: must be at least 1, got +Inf"},
	{"weight.threshold", "weight.threshold = 65536", "t.toml:1: weight.threshold: must be from 0 to 65535, got 65536"},
	{"weight.smoothing", "weight.smoothing = 1.0", "t.toml:1: weight.smoothing: must be from 0 to below 1, got 1"},
	{"weight.band", "weight.band = -0.1", "t.toml:1: weight.band: must be from 0 to below 1 (a share of the current weight), got -0.1"},
	{"weight.resolution", "weight.min = 5\nweight.resolution = 4", "t.toml:2: weight.resolution: must be from weight.min to 65535, got 4"},
	{"weight.saturation", "weight.saturation = 1.1", "t.toml:1: weight.saturation: must be from 0 (off) to 1, got 1.1"},
	{"weight.anchor", "weight.anchor = 1.0", "t.toml:1: weight.anchor: must be from 0 (off) to below 1 (a share of the median), got 1"},
	{"weight.light", "weight.light = 0.0", "t.toml:1: weight.light: must be above 0 and below 1 (a busy fraction), got 0"},
	{"weight.confirm", "weight.confirm = 101", "t.toml:1: weight.confirm: must be from 1 (at once) to 100 intervals, got 101"},
	{"backlog_guard.check", `backlog_guard.check = "-1s"`, "t.toml:1: backlog_guard.check: must not be negative (0 disables the guard), got -1s"},
	{"backlog_guard.trigger", "backlog_guard.trigger = 0.5\nbacklog_guard.release = 0.4", "t.toml:1: backlog_guard.trigger: must be above 1 (a multiple of the median active connections per unit of weight), got 0.5"},
	// release is compared with trigger: the mistake is at trigger's line
	// when the file does not set release.
	{"backlog_guard.release", "backlog_guard.trigger = 1.2", "t.toml:1: backlog_guard.release: must be from 1 to below trigger (1.2), got 1.5"},
	{"backlog_guard.min_excess", "backlog_guard.min_excess = -1", "t.toml:1: backlog_guard.min_excess: must not be negative, got -1"},
}

func TestPolicyChecksReachTheReader(t *testing.T) {
	for _, c := range policyChecks {
		t.Run(c.key, func(t *testing.T) {
			_, _, err := CheckConfig("t.toml", []byte(c.set+"\n"+minimal))
			if err == nil {
				t.Fatalf("%q accepted, want %s", c.set, c.want)
			}
			if lines := strings.Split(err.Error(), "\n"); !slices.Contains(lines, c.want) {
				t.Errorf("%q:\n%s\nwant the line\n%s", c.set, err, c.want)
			}
		})
	}
}

// Every check policy declares has its case in policyChecks.
func TestPolicyChecksAreTested(t *testing.T) {
	checked := slices.Concat(declaredChecks(policy.CoefficientsTable()), declaredChecks(policy.WeightTable()), declaredChecks(policy.GuardTable()))
	if len(checked) < 20 {
		t.Fatalf("only %d checks declared: %v", len(checked), checked)
	}
	for _, k := range checked {
		if !slices.ContainsFunc(policyChecks, func(c struct{ key, set, want string }) bool { return c.key == k }) {
			t.Errorf("%s has a check and no case in policyChecks", k)
		}
	}
}

// declaredChecks names the keys of tb declared with a check, and tb
// itself when it has a check of its own.
func declaredChecks[P any](tb policy.Table[P]) []string {
	var out []string
	if tb.Check != nil {
		out = append(out, tb.Name)
	}
	for _, k := range tb.Params {
		if k.Check != nil {
			out = append(out, tb.Name+"."+k.Key)
		}
	}
	return out
}
