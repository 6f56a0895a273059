package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A symbolic link planted where the history file goes is not written
// through: Open refuses it, whether it leads out of the directory or to
// another file in it, and the file it names keeps its bytes.
func TestOpenRefusesSymlink(t *testing.T) {
	for _, inside := range []bool{false, true} {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "precious")
		if inside {
			target = filepath.Join(dir, "state.json")
		}
		const precious = "precious bytes\n"
		if err := os.WriteFile(target, []byte(precious), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, FileName)); err != nil {
			t.Fatal(err)
		}
		w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
		if err == nil {
			werr := w.Write([]Record{rec(1, 1, "192.0.2.10:80/tcp")})
			w.Close()
			t.Errorf("inside=%v: Open followed the link (write: %v)", inside, werr)
		} else if !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("inside=%v: %v does not say it is a symbolic link", inside, err)
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != precious {
			t.Errorf("inside=%v: the link's target holds %q (%v), want %q", inside, b, err, precious)
		}
	}
}

// A hard link planted where the history file goes is not appended to.
func TestOpenRefusesHardLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "state.json")
	if err := os.WriteFile(target, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	if w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2}); err == nil {
		w.Close()
		t.Error("Open appends to a file with two links")
	} else if !strings.Contains(err.Error(), "2 links") {
		t.Errorf("%v does not say the file has 2 links", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "{}\n" {
		t.Errorf("the linked file holds %q", b)
	}
}

// Open refuses a directory others can write (they could plant links in
// it), including a sticky one like /tmp, and one of another owner; it
// creates nothing there.
func TestOpenRefusesSharedDir(t *testing.T) {
	tests := []struct {
		mode  os.FileMode
		owner int // -1: leave
		want  string
	}{
		{0o770, -1, "writable by its group (mode 0770)"},
		{0o707, -1, "writable by others (mode 0707)"},
		{0o777, -1, "writable by others (mode 0777)"},
		{0o777 | os.ModeSticky, -1, "writable by others (mode 1777)"},
		{0o700, 65534, "owned by uid 65534"},
	}
	for _, tt := range tests {
		dir := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tt.mode); err != nil {
			t.Fatal(err)
		}
		if tt.owner >= 0 {
			if os.Geteuid() != 0 {
				t.Log("not root: cannot give the directory to another owner")
				continue
			}
			if err := os.Chown(dir, tt.owner, tt.owner); err != nil {
				t.Fatal(err)
			}
		}
		w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
		if err == nil {
			w.Close()
			t.Errorf("mode %v owner %d: Open accepted it", tt.mode, tt.owner)
		} else if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("mode %v owner %d: %q does not say %q and the directory", tt.mode, tt.owner, err, tt.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("mode %v owner %d: it created %v", tt.mode, tt.owner, ents)
		}
	}
}

// Files are created 0600 whatever the umask.
func TestCreatedPrivate(t *testing.T) {
	dir := t.TempDir()
	one := frameHeaderLen + recLen(t, rec(1, 1, "192.0.2.10:80/tcp"))
	w, err := Open(dir, Limits{MaxSize: 4096, Files: 3})
	if err != nil {
		t.Fatal(err)
	}
	for c := range int(3 * 4096 / one) { // rotates at least twice
		if err := w.Write([]Record{rec(c, 1, "192.0.2.10:80/tcp")}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	files, err := Files(dir)
	if err != nil || len(files) != 3 {
		t.Fatalf("files %v, %v; want 3", files, err)
	}
	for _, f := range files {
		if fi, err := os.Lstat(f); err != nil || fi.Mode() != 0o600 {
			t.Errorf("%s: mode %v (%v), want -rw-------", f, fi.Mode(), err)
		}
	}
}
