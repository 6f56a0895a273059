// Package buildinfo says what an lvs-feedback binary was built from: the
// version of the lvs-feedback module, the commit, whether the tree had
// uncommitted changes, and the Go release. Every command prints it for
// -version, lvs-monitor exports it as lvs_monitor_build_info and sends it
// to lvsctl in its status.
//
// It reads the build information the Go toolchain embeds in every binary
// (runtime/debug.ReadBuildInfo), so there is nothing to keep in step by
// hand. `go build` in a git clone records the commit (vcs.revision,
// vcs.time, vcs.modified) and, since Go 1.24, a module version derived
// from it: the tag when the commit is tagged vX.Y.Z, else a pseudo-version
// such as v0.0.0-20261202005012-6499bca92c65, with +dirty when the tree
// had changes. Without VCS information (-buildvcs=false, a source tarball,
// a git worktree, which the go command does not recognise) the version is
// "(devel)" and the revision is unknown.
//
// A package build may name its own version at link time, so that the
// binaries say what dpkg says:
//
//	go build -ldflags "-X lvs-feedback/internal/buildinfo.packageVersion=0.1.0"
//
// packaging/deb.sh does; the commit, when recorded, is still reported
// beside it. See docs/operator-guide.md, "Versions".
//
// It imports the standard library only: lvsctl links it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// packageVersion is set only by the linker (-ldflags -X) for a packaged
// build; the program never assigns it.
var packageVersion string

// Devel is the version of a build that recorded none.
const Devel = "(devel)"

// Info is what one binary was built from.
type Info struct {
	// Version is the packaged version when the build named one, else the
	// lvs-feedback module's version: a tag, a pseudo-version, or Devel.
	Version string
	// Revision is the commit the binary was built from; "" when the build
	// recorded none.
	Revision string
	// Time is the commit's time as recorded (RFC 3339); "" when unknown.
	Time string
	// Modified is true when the tree had uncommitted changes.
	Modified bool
	// GoVersion is the Go release that compiled it, e.g. "go1.26.8".
	GoVersion string
}

// Read returns this binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return From(bi, packageVersion)
}

// From is Read's work on given build information: bi may be nil (a binary
// built without module support), packaged is the version a package build
// named ("" for none).
func From(bi *debug.BuildInfo, packaged string) Info {
	info := Info{Version: Devel, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if bi.Main.Version != "" { // test binaries record none
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if packaged != "" {
		info.Version = packaged
	}
	return info
}

// String is the information on one line, the version first and the Go
// release last:
//
//	v0.1.0 revision 6499bca92c65f073584b2d1fe493b3e2193b2636 (2026-12-02T00:50:12Z) go1.26.8
//	v0.0.0-20261202005012-6499bca92c65+dirty revision 6499bca92c65… (2026-12-02T00:50:12Z, modified) go1.26.8
//	(devel) revision unknown go1.26.8
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(orUnknown(i.Version))
	b.WriteString(" revision ")
	b.WriteString(orUnknown(i.Revision))
	var notes []string
	if i.Time != "" {
		notes = append(notes, i.Time)
	}
	if i.Modified {
		notes = append(notes, "modified")
	}
	if len(notes) > 0 {
		b.WriteString(" (" + strings.Join(notes, ", ") + ")")
	}
	b.WriteString(" " + orUnknown(i.GoVersion))
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
