package monitor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// NewFileStore refuses a state directory others can write (they could
// plant links where the monitor writes), a sticky one like /tmp too.
func TestFileStoreRefusesSharedDir(t *testing.T) {
	for _, mode := range []os.FileMode{0o770, 0o777, 0o777 | os.ModeSticky} {
		dir := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := NewFileStore(dir); err == nil {
			t.Errorf("mode %v: accepted", mode)
		} else if !strings.Contains(err.Error(), "state directory "+dir+" is writable by") {
			t.Errorf("mode %v: %v", mode, err)
		}
	}
	// One it creates is private.
	dir := filepath.Join(t.TempDir(), "a", "state")
	if _, err := NewFileStore(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created %v (%v), want mode 0700", fi.Mode(), err)
	}
}

// A symbolic link planted at the state file is neither read nor written
// through: Load takes it for an unusable state file (and moves the link,
// not its target, aside), Save replaces the link with a file of its own.
func TestFileStoreSymlink(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The target is a valid state file, the link's owner's choice of
	// drains.
	elsewhere := filepath.Join(t.TempDir(), "planted.json")
	planted, err := encodeState(sampleState(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(elsewhere, planted, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, s.Path); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Load through a link: %v, want an unusable state file that is a symbolic link", err)
	}
	if len(st) != 0 {
		t.Errorf("Load read the link's target: %v", st)
	}
	if err := os.Symlink(elsewhere, s.Path); err != nil { // planted again after Load moved it
		t.Fatal(err)
	}
	if err := s.Save(State{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.Path, s.Path + ".prev"} {
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s after Save: %v (%v), want a regular file of mode 0600", p, fi.Mode(), err)
		}
	}
	if b, err := os.ReadFile(elsewhere); err != nil || string(b) != string(planted) {
		t.Errorf("the link's target holds %q (%v)", b, err)
	}
}
