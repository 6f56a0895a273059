package agent

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// t0 is the clock of the testdata/t0 fixtures; testdata/t1 is two seconds
// later.
var fixtureT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixtureOptions returns Options reading testdata/<name>/proc with two
// mount points, "/" and "/var".
func fixtureOptions(name string) Options {
	return Options{ProcRoot: filepath.Join("testdata", name, "proc"), DiskMounts: []string{"/", "/var"}}
}

// fakeStatfs: "/" is 500 of 900 usable blocks used (0.5556), "/var" 90 of
// 95 (0.9474).
func fakeStatfs(path string, st *unix.Statfs_t) error {
	switch path {
	case "/":
		*st = unix.Statfs_t{Blocks: 1000, Bfree: 500, Bavail: 400}
	case "/var":
		*st = unix.Statfs_t{Blocks: 100, Bfree: 10, Bavail: 5}
	default:
		return unix.ENOENT
	}
	return nil
}

// fixHost points a host reader at the fake statfs and a fixed clock.
func fixHost(h *hostReader, at time.Time) {
	h.statfs = fakeStatfs
	h.now = func() time.Time { return at }
}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func mustFixtureFS(t *testing.T, name string) procfs.FS {
	t.Helper()
	fs, err := procfs.NewFS(filepath.Join("testdata", name, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func nan() float64 { return math.NaN() }
func inf() float64 { return math.Inf(1) }
