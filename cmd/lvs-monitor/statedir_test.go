package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"lvs-feedback/monitor"
)

// lvs-monitor does not start on a state directory others can write:
// openState (the state file) and openHistory (the history) both refuse it
// before anything is written there.
func TestStateDirWritableByOthers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	want := "state directory " + dir + " is writable by others (mode 0777)"
	if _, err := openState(dir, false); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("openState: %v, want %q", err, want)
	}
	cfg := monitor.Config{StateDir: dir, History: monitor.HistoryConfig{Enabled: true, FileMiB: 1, Files: 2}}
	if r, err := openHistory(cfg, false, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), want) {
		if r != nil {
			r.Close()
		}
		t.Errorf("openHistory: %v, want %q", err, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("created %v", ents)
	}
}

// The unit's StateDirectory= is one lvs-monitor accepts: a directory of
// its StateDirectoryMode passes the check, and its UMask leaves files
// no group or other bits.
func TestUnitStateDirectoryMode(t *testing.T) {
	unit, err := os.ReadFile("../../systemd/lvs-monitor.service")
	if err != nil {
		t.Fatal(err)
	}
	setting := func(key string) uint64 {
		for line := range strings.Lines(string(unit)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+"="); ok {
				n, err := strconv.ParseUint(v, 8, 32)
				if err != nil {
					t.Fatalf("%s=%s: %v", key, v, err)
				}
				return n
			}
		}
		t.Fatalf("the unit sets no %s", key)
		return 0
	}
	mode, umask := setting("StateDirectoryMode"), setting("UMask")
	if mode != 0o700 || umask&0o077 != 0o077 {
		t.Errorf("StateDirectoryMode=%04o UMask=%04o, want 0700 and a umask of 0077", mode, umask)
	}
	dir := filepath.Join(t.TempDir(), "lvs-monitor")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, os.FileMode(mode)); err != nil {
		t.Fatal(err)
	}
	if _, err := openState(dir, false); err != nil {
		t.Errorf("a directory of mode %04o: %v", mode, err)
	}
}
