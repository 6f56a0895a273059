// Package packaging holds the Debian packaging of lvs-feedback (nfpm
// descriptions, maintainer scripts, copyright, changelog; `make deb` runs
// deb.sh) and the test that builds both packages and reads them back with
// dpkg-deb.
package packaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// deb is one built package: its control fields, its file list, and its
// contents unpacked under root.
type deb struct {
	name   string
	path   string
	fields map[string]string
	files  []string // absolute paths of regular files and symlinks
	root   string
}

func (d *deb) has(path string) bool { return slices.Contains(d.files, path) }

func (d *deb) read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.root, path))
	if err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	return b
}

func (d *deb) gunzip(t *testing.T, path string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(d.read(t, path)))
	if err != nil {
		t.Fatalf("%s: %s: %v", d.name, path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %s: %v", d.name, path, err)
	}
	return b
}

func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

func parseFields(b []byte) map[string]string {
	fields := map[string]string{}
	var last string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' {
			fields[last] += "\n" + line
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	return fields
}

func openDeb(t *testing.T, path string) *deb {
	t.Helper()
	d := &deb{name: filepath.Base(path), path: path, root: t.TempDir()}
	d.fields = parseFields(run(t, "", nil, "dpkg-deb", "-f", path))
	sc := bufio.NewScanner(bytes.NewReader(run(t, "", nil, "dpkg-deb", "-c", path)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[0][0] == 'd' {
			continue
		}
		d.files = append(d.files, strings.TrimPrefix(f[5], "."))
	}
	run(t, "", nil, "dpkg-deb", "-x", path, d.root)
	return d
}

// changelogVersion is the version of packaging/changelog's top entry.
func changelogVersion(t *testing.T) string {
	b, err := os.ReadFile("changelog")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^lvs-feedback \(([^)]+)\) `).FindSubmatch(b)
	if m == nil {
		t.Fatalf("changelog: first line is not 'lvs-feedback (VERSION) …': %q", bytes.SplitN(b, []byte("\n"), 2)[0])
	}
	return string(m[1])
}

// TestDebs builds both packages with deb.sh (as `make deb` does) and checks
// what each ships: the director's package everything the director runs,
// the real server's only the agent; manual pages, copyright, changelog and
// compressed docs per Debian policy; the units' references resolve inside
// their package.
func TestDebs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries and two packages with nfpm (a minute or two the first time)")
	}
	for _, tool := range []string{"go", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not in PATH: needed to build and read the packages", tool)
		}
	}
	version := changelogVersion(t)
	out := t.TempDir()
	run(t, ".", []string{"DEB_OUT=" + out, "DEB_QUIET=1"}, "./deb.sh")

	monitor := openDeb(t, filepath.Join(out, "lvs-monitor_"+version+"_amd64.deb"))
	agent := openDeb(t, filepath.Join(out, "lvs-agent_"+version+"_amd64.deb"))

	for _, d := range []*deb{monitor, agent} {
		pkg := strings.Split(d.name, "_")[0]
		t.Run(pkg, func(t *testing.T) {
			if d.fields["Package"] != pkg || d.fields["Version"] != version || d.fields["Architecture"] != "amd64" {
				t.Errorf("control: Package %q Version %q Architecture %q, want %s %s amd64",
					d.fields["Package"], d.fields["Version"], d.fields["Architecture"], pkg, version)
			}
			// Both take over from the one package of development builds.
			if d.fields["Conflicts"] != "lvs-feedback" || d.fields["Replaces"] != "lvs-feedback" {
				t.Errorf("control: Conflicts %q Replaces %q, want lvs-feedback for both", d.fields["Conflicts"], d.fields["Replaces"])
			}
			doc := "/usr/share/doc/" + pkg + "/"
			if got, want := string(d.read(t, doc+"copyright")), readFile(t, "copyright"); got != want {
				t.Errorf("%scopyright is not packaging/copyright", doc)
			}
			if !strings.HasPrefix(string(d.read(t, doc+"copyright")), "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
				t.Errorf("%scopyright: not in the machine-readable format (no Format: line first)", doc)
			}
			if got, want := string(d.gunzip(t, doc+"changelog.gz")), readFile(t, "changelog"); got != want {
				t.Errorf("%schangelog.gz is not packaging/changelog", doc)
			}
			// Policy 12.3: docs compressed (the copyright file never);
			// the example configuration is kept plain on purpose (deb.sh).
			for _, f := range d.files {
				if strings.HasPrefix(f, doc) && !strings.HasSuffix(f, ".gz") && f != doc+"copyright" &&
					!strings.HasPrefix(f, doc+"examples/") {
					t.Errorf("%s: not compressed", f)
				}
				if strings.HasPrefix(f, "/usr/share/man/") && !strings.HasSuffix(f, ".gz") {
					t.Errorf("%s: manual page not compressed", f)
				}
			}
			checkBinaryLicences(t, d)
			checkUnits(t, d)
			// Each binary reports the package's version (deb.sh links it in).
			for _, f := range d.files {
				if !strings.HasPrefix(f, "/usr/bin/") {
					continue
				}
				out := string(run(t, "", nil, filepath.Join(d.root, f), "-version"))
				if want := filepath.Base(f) + " " + version + " "; !strings.HasPrefix(out, want) {
					t.Errorf("%s -version: %q, want it to start with %q", f, out, want)
				}
			}
		})
	}

	// And the other way: every module the copyright file names is
	// compiled into one of the binaries (none left from a dependency
	// since dropped).
	t.Run("copyright modules", func(t *testing.T) {
		compiled := map[string]bool{}
		for _, d := range []*deb{monitor, agent} {
			for _, m := range compiledModules(t, d) {
				compiled[m] = true
			}
		}
		for _, m := range regexp.MustCompile(`(?m)^Files: (\S+\.\S+/\S+)$`).FindAllStringSubmatch(readFile(t, "copyright"), -1) {
			if !compiled[m[1]] {
				t.Errorf("the copyright file names %s, which no packaged binary compiles in", m[1])
			}
		}
	})

	t.Run("lvs-monitor contents", func(t *testing.T) {
		want := []string{
			"/usr/bin/lvs-monitor", "/usr/bin/lvsctl", "/usr/bin/lvs-tune",
			"/lib/systemd/system/lvs-monitor.service",
			"/lib/systemd/system/lvs-benefit.service", "/lib/systemd/system/lvs-benefit.timer",
			"/usr/lib/modules-load.d/lvs-monitor.conf",
			"/etc/lvs-monitor/lvs-monitor.toml", "/etc/default/lvs-monitor",
			"/usr/share/man/man8/lvs-monitor.8.gz", "/usr/share/man/man8/lvsctl.8.gz",
			"/usr/share/man/man5/lvs-monitor.toml.5.gz",
			"/usr/share/doc/lvs-monitor/README.md.gz",
			"/usr/share/doc/lvs-monitor/examples/lvs-monitor.toml",
			"/usr/share/doc/lvs-monitor/examples/lvs-monitor.rules.yml",
			"/usr/share/doc/lvs-monitor/grafana-dashboard.json.gz",
		}
		mds, _ := filepath.Glob("../docs/*.md")
		for _, md := range mds {
			name := filepath.Base(md)
			if name == "README.md" {
				name = "index.md" // the pages' index, beside the project's README
			}
			want = append(want, "/usr/share/doc/lvs-monitor/"+name+".gz")
		}
		for _, f := range want {
			if !monitor.has(f) {
				t.Errorf("lvs-monitor lacks %s", f)
			}
		}
		for f, src := range map[string]string{"README.md.gz": "../README.md", "index.md.gz": "../docs/README.md"} {
			if got := monitor.gunzip(t, "/usr/share/doc/lvs-monitor/"+f); !bytes.Equal(got, []byte(readFile(t, src))) {
				t.Errorf("lvs-monitor's %s is not %s", f, src)
			}
		}
		// The developer's pages and the lab notebook stay with the source.
		devs, _ := filepath.Glob("../docs/developer/*.md")
		for _, md := range append(devs, "../docs/results/notebook.md") {
			if f := "/usr/share/doc/lvs-monitor/" + filepath.Base(md) + ".gz"; monitor.has(f) {
				t.Errorf("lvs-monitor ships the developer's %s", f)
			}
		}
		for _, f := range []string{"/usr/bin/lvs-agent", "/lib/systemd/system/lvs-agent.service", "/etc/default/lvs-agent"} {
			if monitor.has(f) {
				t.Errorf("lvs-monitor ships the real server's %s", f)
			}
		}
		if !slices.Contains(strings.Fields(readDebFile(t, monitor, "/usr/lib/modules-load.d/lvs-monitor.conf")), "ip_vs") {
			t.Errorf("modules-load file does not load ip_vs")
		}
		if got := monitor.fields["Recommends"]; got != "ipvsadm" {
			t.Errorf("Recommends %q, want ipvsadm", got)
		}
		checkConffiles(t, monitor, "/etc/lvs-monitor/lvs-monitor.toml", "/etc/default/lvs-monitor")
		for _, page := range []string{"man8/lvs-monitor.8", "man8/lvsctl.8", "man5/lvs-monitor.toml.5"} {
			if got, want := string(monitor.gunzip(t, "/usr/share/man/"+page+".gz")), readFile(t, "../docs/man/"+filepath.Base(page)); got != want {
				t.Errorf("%s is not docs/man/%s", page, filepath.Base(page))
			}
		}
	})

	t.Run("lvs-agent contents", func(t *testing.T) {
		for _, f := range []string{
			"/usr/bin/lvs-agent", "/lib/systemd/system/lvs-agent.service", "/etc/default/lvs-agent",
			"/usr/share/man/man8/lvs-agent.8.gz", "/usr/share/doc/lvs-agent/agent.md.gz",
			"/usr/share/doc/lvs-agent/haproxy.md.gz",
			"/usr/share/doc/lvs-agent/operator-guide.md.gz",
		} {
			if !agent.has(f) {
				t.Errorf("lvs-agent lacks %s", f)
			}
		}
		// A real server needs no monitor, no lvsctl, no IPVS.
		for _, f := range agent.files {
			if strings.Contains(f, "lvs-monitor") || strings.Contains(f, "lvsctl") || strings.Contains(f, "modules-load") {
				t.Errorf("lvs-agent ships %s", f)
			}
		}
		checkConffiles(t, agent, "/etc/default/lvs-agent")
		if got, want := string(agent.gunzip(t, "/usr/share/man/man8/lvs-agent.8.gz")), readFile(t, "../docs/man/lvs-agent.8"); got != want {
			t.Errorf("lvs-agent.8 is not docs/man/lvs-agent.8")
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readDebFile(t *testing.T, d *deb, path string) string {
	t.Helper()
	return string(d.read(t, path))
}

// checkConffiles: the files under /etc are conffiles (dpkg keeps local
// edits), and nothing else is.
func checkConffiles(t *testing.T, d *deb, want ...string) {
	t.Helper()
	got := strings.Fields(string(run(t, "", nil, "dpkg-deb", "-I", d.path, "conffiles")))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: conffiles %v, want %v", d.name, got, want)
	}
}

// compiledModules lists the Go modules compiled into the package's
// binaries (go version -m).
func compiledModules(t *testing.T, d *deb) []string {
	t.Helper()
	var mods []string
	for _, f := range d.files {
		if !strings.HasPrefix(f, "/usr/bin/") {
			continue
		}
		out := run(t, "", nil, "go", "version", "-m", filepath.Join(d.root, f))
		for line := range strings.SplitSeq(string(out), "\n") {
			if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "dep" {
				mods = append(mods, fields[1])
			}
		}
	}
	return mods
}

// checkBinaryLicences: every Go module compiled into a packaged binary
// has a Files paragraph in the copyright file.
func checkBinaryLicences(t *testing.T, d *deb) {
	t.Helper()
	copyright := string(d.read(t, "/usr/share/doc/"+d.fields["Package"]+"/copyright"))
	for _, m := range compiledModules(t, d) {
		if !strings.Contains(copyright, "\nFiles: "+m+"\n") {
			t.Errorf("%s: %s is compiled into a binary but has no Files paragraph in the copyright file", d.name, m)
		}
	}
}

// checkUnits: the Documentation= pages and files of each packaged unit,
// and the modules-load file it names, are in the same package.
func checkUnits(t *testing.T, d *deb) {
	t.Helper()
	for _, f := range d.files {
		if !strings.HasPrefix(f, "/lib/systemd/system/") {
			continue
		}
		unit := readDebFile(t, d, f)
		for line := range strings.SplitSeq(unit, "\n") {
			docs, ok := strings.CutPrefix(line, "Documentation=")
			if !ok {
				continue
			}
			for _, ref := range strings.Fields(docs) {
				switch {
				case strings.HasPrefix(ref, "file://"):
					if p := strings.TrimPrefix(ref, "file://"); !d.has(p) {
						t.Errorf("%s: Documentation=%s: not in %s", f, ref, d.name)
					}
				case strings.HasPrefix(ref, "man:"):
					m := regexp.MustCompile(`^man:([^(]+)\((\d)\)$`).FindStringSubmatch(ref)
					if m == nil || !d.has("/usr/share/man/man"+m[2]+"/"+m[1]+"."+m[2]+".gz") {
						t.Errorf("%s: Documentation=%s: no such page in %s", f, ref, d.name)
					}
				}
			}
		}
		for _, m := range regexp.MustCompile(`/usr/lib/modules-load\.d/[^ ,)]+`).FindAllString(unit, -1) {
			if !d.has(m) {
				t.Errorf("%s names %s, which %s does not ship", f, m, d.name)
			}
		}
	}
}
