package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The directories above the state directory: one others can write is
// refused unless sticky (they could rename the state directory away and
// put theirs in its place); a link to a private directory is followed, as
// systemd's DynamicUser= makes /var/lib/NAME one.
func TestAbove(t *testing.T) {
	tests := []struct {
		parent os.FileMode
		want   string // "": accepted
	}{
		{0o755, ""},
		{0o777 | os.ModeSticky, ""},
		{0o775, "above it is writable by others than its owner (mode 0775)"},
		{0o777, "above it is writable by others than its owner (mode 0777)"},
	}
	for _, tt := range tests {
		parent := filepath.Join(t.TempDir(), "p")
		dir := filepath.Join(parent, "state")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(parent, tt.parent); err != nil {
			t.Fatal(err)
		}
		err := Check(dir)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("parent %v: %v", tt.parent, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), parent)):
			t.Errorf("parent %v: %v, want %q naming %s", tt.parent, err, tt.want, parent)
		}
	}

	base := t.TempDir()
	private := filepath.Join(base, "private", "state")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "state")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	if err := Check(link); err != nil {
		t.Errorf("a link to a private directory: %v", err)
	}
	if err := os.Chmod(private, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := Check(link); err == nil || !strings.Contains(err.Error(), "writable by others (mode 0777)") {
		t.Errorf("a link to a shared directory: %v", err)
	}
	if err := Check(filepath.Join(base, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
}

// Rename and Remove act on names in the directory, a link itself and not
// its target; names that are not one entry are refused.
func TestDirOps(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Rename("link", "moved"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "moved")); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("moved: %v %v, want the link", fi, err)
	}
	if err := d.Remove("moved"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "x" {
		t.Errorf("target: %q %v", b, err)
	}
	if err := d.Remove("moved"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removing a missing file: %v", err)
	}
	for _, name := range []string{"", ".", "..", "../x", "a/b"} {
		if _, err := d.OpenFile(name, os.O_RDONLY, 0); err == nil || !strings.Contains(err.Error(), "is not a file name") {
			t.Errorf("OpenFile(%q): %v", name, err)
		}
	}
	f, err := d.OpenFile("new", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Lstat(filepath.Join(dir, "new")); err != nil || fi.Mode() != 0o640 {
		t.Errorf("new: %v %v, want -rw-r-----", fi.Mode(), err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := d.OpenFile("sub", os.O_RDONLY, 0); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
}
