package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	const rev = "6499bca92c65f073584b2d1fe493b3e2193b2636"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-compiler", Value: "gc"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-02T00:50:12Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tt := range []struct {
		name     string
		bi       *debug.BuildInfo
		packaged string
		want     Info
		line     string
	}{
		{"clean clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "lvs-feedback", Version: "v0.0.0-20261202005012-6499bca92c65"}, Settings: vcs("false")}, "",
			Info{Version: "v0.0.0-20261202005012-6499bca92c65", Revision: rev, Time: "2026-12-02T00:50:12Z", GoVersion: "go1.26.8"},
			"v0.0.0-20261202005012-6499bca92c65 revision " + rev + " (2026-12-02T00:50:12Z) go1.26.8"},
		{"changed tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "lvs-feedback", Version: "v0.0.0-20261202005012-6499bca92c65+dirty"}, Settings: vcs("true")}, "",
			Info{Version: "v0.0.0-20261202005012-6499bca92c65+dirty", Revision: rev, Time: "2026-12-02T00:50:12Z", Modified: true, GoVersion: "go1.26.8"},
			"v0.0.0-20261202005012-6499bca92c65+dirty revision " + rev + " (2026-12-02T00:50:12Z, modified) go1.26.8"},
		{"tagged", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "lvs-feedback", Version: "v1.2.3"}, Settings: vcs("false")}, "",
			Info{Version: "v1.2.3", Revision: rev, Time: "2026-12-02T00:50:12Z", GoVersion: "go1.26.8"},
			"v1.2.3 revision " + rev + " (2026-12-02T00:50:12Z) go1.26.8"},
		{"packaged", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "lvs-feedback", Version: "v0.0.0-20261202005012-6499bca92c65"}, Settings: vcs("false")}, "0.1.0",
			Info{Version: "0.1.0", Revision: rev, Time: "2026-12-02T00:50:12Z", GoVersion: "go1.26.8"},
			"0.1.0 revision " + rev + " (2026-12-02T00:50:12Z) go1.26.8"},
		{"no VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "lvs-feedback", Version: "(devel)"}}, "",
			Info{Version: "(devel)", GoVersion: "go1.26.8"},
			"(devel) revision unknown go1.26.8"},
		{"test binary", &debug.BuildInfo{GoVersion: "go1.26.8"}, "",
			Info{Version: "(devel)", GoVersion: "go1.26.8"},
			"(devel) revision unknown go1.26.8"},
		{"no build information", nil, "",
			Info{Version: "(devel)", GoVersion: runtime.Version()},
			"(devel) revision unknown " + runtime.Version()},
		{"packaged without VCS", nil, "0.1.0",
			Info{Version: "0.1.0", GoVersion: runtime.Version()},
			"0.1.0 revision unknown " + runtime.Version()},
	} {
		got := From(tt.bi, tt.packaged)
		if got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
		if s := got.String(); s != tt.line {
			t.Errorf("%s: %q, want %q", tt.name, s, tt.line)
		}
	}
}

// TestRead: this test binary has build information; it names the Go
// release that runs it, and no packaged version.
func TestRead(t *testing.T) {
	got := Read()
	if got.GoVersion != runtime.Version() {
		t.Errorf("Go version %q, want %q", got.GoVersion, runtime.Version())
	}
	if got.Version == "" || got.Version == "0.1.0" {
		t.Errorf("version %q", got.Version)
	}
}
