package buildinfo_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStampedBuild builds lvsctl with the go command in a fresh git
// repository, as `go build` in a clone does, and checks what -version
// prints against the commit: a pseudo-version from the commit, then the
// tag once the commit is tagged, then +dirty and "modified" for a changed
// tree, and the packaged version when the link sets it (packaging/deb.sh).
// The repository holds go.mod, go.sum and lvsctl's own packages of this
// module (go list -deps); the rest comes from the module cache.
func TestStampedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lvsctl four times")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed (apt-get install --no-install-recommends git)")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	dir := t.TempDir()
	copyModule(t, goTool, dir, "lvs-feedback/cmd/lvsctl")

	env := append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.invalid",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
		"GOFLAGS=", "GOWORK=off", "GOPROXY=off")
	do := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	do(git, "init", "-q")
	do(git, "add", "-A")
	do(git, "commit", "-q", "-m", "lvsctl alone")
	rev := do(git, "rev-parse", "HEAD")
	bin := filepath.Join(t.TempDir(), "lvsctl") // outside the tree: it would make it modified
	version := func(ldflags string) string {
		t.Helper()
		do(goTool, "build", "-buildvcs=true", "-ldflags="+ldflags, "-o", bin, "./cmd/lvsctl")
		return do(bin, "-version")
	}
	when := "(2026-01-02T03:04:05Z)"
	goVersion := do(goTool, "env", "GOVERSION")

	if got, want := version(""), "lvsctl v0.0.0-20260102030405-"+rev[:12]+" revision "+rev+" "+when+" "+goVersion; got != want {
		t.Errorf("untagged commit:\n got %s\nwant %s", got, want)
	}
	do(git, "tag", "v1.2.3")
	if got, want := version(""), "lvsctl v1.2.3 revision "+rev+" "+when+" "+goVersion; got != want {
		t.Errorf("tagged commit:\n got %s\nwant %s", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd", "lvsctl", "zz_changed.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirty := "(2026-01-02T03:04:05Z, modified)"
	if got, want := version(""), "lvsctl v1.2.3+dirty revision "+rev+" "+dirty+" "+goVersion; got != want {
		t.Errorf("changed tree:\n got %s\nwant %s", got, want)
	}
	if got, want := version(packageFlag+"0.1.0"), "lvsctl 0.1.0 revision "+rev+" "+dirty+" "+goVersion; got != want {
		t.Errorf("packaged:\n got %s\nwant %s", got, want)
	}
}

// copyModule copies go.mod, go.sum and the Go files of pkg's packages of
// this module into dir, at the same paths.
func copyModule(t *testing.T, goTool, dir, pkg string) {
	t.Helper()
	out, err := exec.Command(goTool, "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.Module.Dir}}|{{.Dir}}|{{join .GoFiles "|"}}{{end}}{{end}}`, pkg).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root := ""
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) < 3 {
			continue
		}
		root = f[0]
		rel, err := filepath.Rel(root, f[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range f[2:] {
			copyFile(t, filepath.Join(f[1], name), filepath.Join(dir, rel, name))
		}
	}
	if root == "" || !regexp.MustCompile(`(?m)^module lvs-feedback$`).Match(mustRead(t, filepath.Join(root, "go.mod"))) {
		t.Fatalf("go list found no package of lvs-feedback:\n%s", out)
	}
	copyFile(t, filepath.Join(root, "go.mod"), filepath.Join(dir, "go.mod"))
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(dir, "go.sum"))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, mustRead(t, from), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// packageFlag is how a package build names its version; TestStampedBuild
// shows the linker sets it.
const packageFlag = "-X lvs-feedback/internal/buildinfo.packageVersion="

// TestDebNamesItsVersion: make deb links the package's version in, with
// the flag TestStampedBuild proves (-X on a name that does not exist is
// silently ignored by the linker).
func TestDebNamesItsVersion(t *testing.T) {
	if !strings.Contains(string(mustRead(t, "../../packaging/deb.sh")), packageFlag+"$VERSION") {
		t.Errorf("packaging/deb.sh does not link %s$VERSION", packageFlag)
	}
}
