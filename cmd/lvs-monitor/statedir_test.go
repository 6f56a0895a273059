package main

import (
	"log/slog"
	"os"
	"path/filepath"
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
