package cmdline_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryBinary builds every command of cmd/ with the go command and
// runs each one's -version, -h and a flag it does not have: -version and -h
// print on stdout alone and exit 0, the mistake prints on stderr alone and
// exits 2. What -version prints is checked against what `go version -m`
// reads from the same binary: the module version (or the packaged one),
// the commit or "revision unknown", and the Go release.
func TestEveryBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	bin := t.TempDir()
	if out, err := exec.Command(goTool, "build", "-o", bin+"/", "lvs-feedback/cmd/...").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmds, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 6 {
		t.Fatalf("only %d commands in cmd/", len(cmds))
	}
	for _, c := range cmds {
		name := c.Name()
		path := filepath.Join(bin, name)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: not built: %v", name, err)
			continue
		}
		want := name + " " + expectedVersion(t, goTool, path) + "\n"
		if code, out, errOut := run(t, path, "-version"); code != 0 || out != want || errOut != "" {
			t.Errorf("%s -version: exit %d, stdout %q, stderr %q; want 0 and %q", name, code, out, errOut, want)
		}
		for _, h := range []string{"-h", "-help", "--help"} {
			code, out, errOut := run(t, path, h)
			if code != 0 || !strings.HasPrefix(strings.ToLower(out), "usage") || !strings.Contains(out, "-version") || errOut != "" {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want 0 and the usage, naming -version, on stdout alone", name, h, code, out, errOut)
			}
		}
		code, out, errOut := run(t, path, "-no-such-flag")
		if code != 2 || out != "" || !strings.Contains(errOut, "flag provided but not defined: -no-such-flag") || !strings.Contains(strings.ToLower(errOut), "usage") {
			t.Errorf("%s -no-such-flag: exit %d, stdout %q, stderr %q; want 2 and the error with the usage on stderr alone", name, code, out, errOut)
		}
	}
	// The roles a binary starts itself in.
	for _, args := range [][]string{{"lvs-demo", "backend"}, {"lvs-loadtest", "agents"}} {
		path := filepath.Join(bin, args[0])
		if code, out, errOut := run(t, path, args[1], "-h"); code != 0 || !strings.Contains(out, "-version") || errOut != "" {
			t.Errorf("%s %s -h: exit %d, stdout %q, stderr %q", args[0], args[1], code, out, errOut)
		}
		if code, _, errOut := run(t, path, args[1], "-no-such-flag"); code != 2 || !strings.Contains(errOut, "-no-such-flag") {
			t.Errorf("%s %s -no-such-flag: exit %d, stderr %q", args[0], args[1], code, errOut)
		}
	}
}

// expectedVersion is what package buildinfo should print for the binary,
// from `go version -m`.
func expectedVersion(t *testing.T, goTool, path string) string {
	t.Helper()
	out, err := exec.Command(goTool, "version", "-m", path).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", path, err)
	}
	lines := strings.Split(string(out), "\n")
	_, goVersion, _ := strings.Cut(lines[0], ": ")
	version, settings := "", map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			version = f[2]
		case len(f) == 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			settings[k] = v
		}
	}
	if version == "" || goVersion == "" {
		t.Fatalf("go version -m %s: no module version or Go release:\n%s", path, out)
	}
	s := version + " revision "
	if rev := settings["vcs.revision"]; rev != "" {
		s += rev
	} else {
		s += "unknown"
	}
	var notes []string
	if tm := settings["vcs.time"]; tm != "" {
		notes = append(notes, tm)
	}
	if settings["vcs.modified"] == "true" {
		notes = append(notes, "modified")
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s + " " + strings.TrimSpace(goVersion)
}

func run(t *testing.T, path string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %v: %v", path, args, err)
	}
	return code, out.String(), errb.String()
}
