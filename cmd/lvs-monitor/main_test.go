package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	good, err := os.ReadFile("../../docs/examples/lvs-monitor.toml")
	if err != nil {
		t.Fatal(err)
	}
	// The example sets only what an operator usually does: the mistakes
	// below are in keys it leaves at their defaults, added to it.
	bare := "agent_timeout = 2\n" + strings.Replace(string(good), `interval = "5s"`, `interval = 5`, 1)
	ignored := string(good) + "\n[weight]\ngain = 6.0\n"
	tests := []struct {
		name     string
		config   string
		wantCode int
		want     []string
	}{
		{"example config", string(good), 0, []string{"ok (1 services)"}},
		{"misspelt key", strings.Replace(string(good), "\ninterval =", "\nintreval =", 1), 1,
			[]string{"intreval", "unknown key", `did you mean "interval"`}},
		{"coefficient sum", string(good) + "\n[coefficients]\ncpu = 0.4\n", 1,
			[]string{"coefficients", "must sum to 1", "1.1000"}},
		{"negative interval", strings.Replace(string(good), `interval = "5s"`, `interval = "-5s"`, 1), 1,
			[]string{"interval", "positive duration"}},
		{"bare durations", bare, 1, []string{
			fmt.Sprintf(`lvs-monitor.toml:%d: interval: a bare number has no unit: write interval = "5s"`, lineOf(t, []byte(bare), "interval = 5")),
			`lvs-monitor.toml:1: agent_timeout: a bare number has no unit`}},
		{"ignored setting warns", ignored, 0,
			[]string{fmt.Sprintf(`lvs-monitor.toml:%d: warning: weight.gain: ignored: only the "lvs" controller reads it`, lineOf(t, []byte(ignored), "gain = 6.0")), "ok (1 services)"}},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "lvs-monitor.toml")
		if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"-check", "-config", path}, &stdout, &stderr)
		if code != tt.wantCode {
			t.Errorf("%s: exit %d, want %d (stderr %q)", tt.name, code, tt.wantCode, stderr.String())
		}
		out := stdout.String() + stderr.String()
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output %q does not contain %q", tt.name, out, w)
			}
		}
	}
}

func TestRefusesWithoutIPVS(t *testing.T) {
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("this kernel has IPVS; the refusal is tested where it has none")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf("state_dir = %q\n", dir) + string(mustRead(t, "../../docs/examples/lvs-monitor.toml"))
	path := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-config", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d without IPVS, want 1", code)
	}
	if !strings.Contains(stderr.String(), "modprobe ip_vs") {
		t.Errorf("message %q does not say what to do", stderr.String())
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lineOf returns the 1-based line of the first line of text containing s.
func lineOf(t *testing.T, text []byte, s string) int {
	t.Helper()
	for i, l := range strings.Split(string(text), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q is not in the text", s)
	return 0
}

// TestPrintConfig: -print-config prints the effective configuration of a
// valid file and exits 0; a broken file gets -check's errors and exit
// status, and nothing on standard output.
func TestPrintConfig(t *testing.T) {
	good := mustRead(t, "../../docs/examples/lvs-monitor.toml")
	ignored := string(good) + "\n[weight]\ngain = 6.0\n"
	tests := []struct {
		name     string
		config   string
		wantCode int
		want     []string // whole lines of standard output
	}{
		{"example config", string(good), 0, []string{
			fmt.Sprintf(`interval = "5s"  # PATH:%d`, lineOf(t, good, `interval = "5s"`)),
			fmt.Sprintf(`address = "192.0.2.10:80/tcp"  # PATH:%d`, lineOf(t, good, `address = "192.0.2.10:80/tcp"`)),
			`health_checker = ""  # default`,
		}},
		{"misspelt key", strings.Replace(string(good), "\ninterval =", "\nintreval =", 1), 1, nil},
		{"bare duration", strings.Replace(string(good), `interval = "5s"`, `interval = 5`, 1), 1, nil},
		{"coefficient sum", string(good) + "\n[coefficients]\ncpu = 0.4\n", 1, nil},
		{"ignored setting warns", ignored, 0, []string{
			fmt.Sprintf(`gain = 6.0  # PATH:%d; ignored by controller "capacity"`, lineOf(t, []byte(ignored), "gain = 6.0")),
		}},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "lvs-monitor.toml")
		if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr, checkOut, checkErr bytes.Buffer
		code := run([]string{"-print-config", "-config", path}, &stdout, &stderr)
		checkCode := run([]string{"-check", "-config", path}, &checkOut, &checkErr)
		if code != tt.wantCode || code != checkCode {
			t.Errorf("%s: exit %d, want %d as -check's %d (stderr %q)", tt.name, code, tt.wantCode, checkCode, stderr.String())
		}
		if stderr.String() != checkErr.String() {
			t.Errorf("%s: standard error %q, want -check's %q", tt.name, stderr.String(), checkErr.String())
		}
		if code != 0 {
			if stdout.Len() != 0 {
				t.Errorf("%s: printed %q for a broken file", tt.name, stdout.String())
			}
			continue
		}
		lines := strings.Split(stdout.String(), "\n")
		for _, w := range tt.want {
			if w = strings.ReplaceAll(w, "PATH", path); !slices.Contains(lines, w) {
				t.Errorf("%s: line %q not in the output\n%s", tt.name, w, stdout.String())
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-print-config", "-config", filepath.Join(t.TempDir(), "missing.toml")}, &stdout, &stderr); code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "no such file") {
		t.Errorf("missing file: exit %d, stdout %q, stderr %q; want 1, nothing, the error", code, stdout.String(), stderr.String())
	}
}
