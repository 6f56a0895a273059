package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lvs-feedback/control/controltest"
	"lvs-feedback/history"
)

// historyRig runs four cycles of the rig (one a second from 12:00:00
// UTC): at the target; with 20 new connections each and A's 7 active
// and 31 inactive ones; with C's probe failing (down at once) and B's
// agent failing; once more.
func historyRig(t *testing.T) *controltest.Rig {
	t.Helper()
	r := controltest.New(t, "")
	r.Cycle()
	for _, err := range []error{
		r.Table.AddConnections(controltest.Service, controltest.A, 20),
		r.Table.AddConnections(controltest.Service, controltest.B, 20),
		r.Table.AddConnections(controltest.Service, controltest.C, 20),
		r.Table.SetActive(controltest.Service, controltest.A, 7, 31),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	r.Cycle()
	r.Prober.Down(controltest.C)
	r.Agents.Fail(controltest.B)
	r.Cycle()
	r.Cycle()
	return r
}

// lvsctl history prints a server's records, and a service's, oldest
// first, with the figures of each cycle.
func TestHistory(t *testing.T) {
	r := historyRig(t)
	code, out, errOut := lvsctlIn(t, nil, time.UTC, "-config", r.ConfigPath, "history", "192.0.2.10:80/tcp", "198.51.100.13:80")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := `TIME                 SERVER            STATE    WEIGHT  NEW  ACTIVE  INACT  PROBE   CPU   MEM   DISK  PROC  LOAD   FLAGS  REASON
2026-11-30 12:00:00  198.51.100.13:80  managed  10      -    0       0      95.0ms  0.95  0.90  0.90  1.00  0.950  -      adopted at its kernel weight
2026-11-30 12:00:01  198.51.100.13:80  managed  10      20   0       0      95.0ms  0.95  0.90  0.90  1.00  0.950  -
2026-11-30 12:00:02  198.51.100.13:80  down     10→0    0    0       0      failed  0.95  0.90  0.90  1.00  -      -      unreachable (1 failed probes in a row): http probe 198.51.100.13:80: connection refused
2026-11-30 12:00:03  198.51.100.13:80  down     0       0    0       0      failed  -     -     -     -     -      -
`
	if out != want {
		t.Errorf("history of C:\n%s\nwant:\n%s", out, want)
	}

	code, out, _ = lvsctlIn(t, nil, time.UTC, "-config", r.ConfigPath, "history", "192.0.2.10:80/tcp", "-n", "3")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	want = `TIME                 SERVER            STATE    WEIGHT  NEW  ACTIVE  INACT  PROBE   CPU   MEM   DISK  PROC  LOAD   FLAGS         REASON
2026-11-30 12:00:03  198.51.100.11:80  managed  10      0    7       31     95.0ms  0.95  0.90  0.90  1.00  0.950  -
2026-11-30 12:00:03  198.51.100.12:80  managed  10      0    0       0      95.0ms  -     -     -     -     -      agent-failed
2026-11-30 12:00:03  198.51.100.13:80  down     0       0    0       0      failed  -     -     -     -     -      -
`
	if out != want {
		t.Errorf("history of the service, last 3:\n%s\nwant:\n%s", out, want)
	}

	// -o json: every field of A's records, as JSON lines; -dir instead of
	// -config.
	code, out, _ = lvsctl(t, nil, "history", "-dir", r.Dir, "-o", "json", "192.0.2.10:80/tcp", "198.51.100.11:80")
	if code != 0 {
		t.Fatalf("-o json: exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("-o json: %d lines, want A's 4 records", len(lines))
	}
	var a history.Record
	if err := json.Unmarshal([]byte(lines[1]), &a); err != nil {
		t.Fatal(err)
	}
	raw := a.Agent.Raw
	if !a.Time.Equal(time.Date(2026, 11, 30, 12, 0, 1, 0, time.UTC)) || a.NewConns == nil || *a.NewConns != 20 || a.ActiveConns != 7 || a.InactiveConns != 31 ||
		a.ActiveDelta != 7 || a.Counter != 20 || a.WeightBefore != 10 || a.WeightAfter != 10 || a.Wrote || *a.ProbeSeconds != 0.095 ||
		a.Agent.CPU != 0.95 || raw.CPUs != 4 || raw.MemTotalBytes != 16<<30 || a.Inputs.Input != 1 || a.Inputs.Response != 0.95 ||
		a.Load == nil || *a.Load < 0.9499 || *a.Load > 0.9501 || a.Formula == nil || a.Formula.Next != 10 || a.Compare == nil || a.Compare.Passes {
		t.Errorf("A at 12:00:01: %s", lines[1])
	}
}

// A damaged frame is skipped with a note on stderr naming its file and
// where it starts; the records around it print.
func TestHistoryCorruptFrame(t *testing.T) {
	r := historyRig(t)
	path := filepath.Join(r.Dir, history.FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The second cycle's frame: after the file's header (12 bytes) and
	// the first frame, whose 12-byte header holds its length at 4.
	second := 12 + 12 + int(binary.LittleEndian.Uint32(b[12+4:]))
	b[second+20] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r.Cycle()
	code, out, errOut := lvsctlIn(t, nil, time.UTC, "-config", r.ConfigPath, "history", "192.0.2.10:80/tcp", "198.51.100.11:80")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	n := binary.LittleEndian.Uint32(b[second+4:])
	wantErr := fmt.Sprintf("lvsctl: history: %s: byte %d: skipped: %d bytes up to the next frame: frame of %d bytes fails its checksum (corrupt)\n", path, second, n+12, n)
	if errOut != wantErr {
		t.Errorf("stderr %q, want %q", errOut, wantErr)
	}
	if n := strings.Count(out, "198.51.100.11:80"); n != 4 || strings.Contains(out, "12:00:01") || !strings.Contains(out, "2026-11-30 12:00:04  198.51.100.11:80  managed  10      0    7       31") {
		t.Errorf("%d rows, want A's 4 without the damaged cycle's:\n%s", n, out)
	}
}

// A line of a file of the older JSON-lines format that is not a record
// is skipped with a note on stderr naming its file and line; the records
// around it print, the old file's before the new one's.
func TestHistoryCorruptLine(t *testing.T) {
	r := historyRig(t)
	path := filepath.Join(r.Dir, history.JSONFileName)
	var old bytes.Buffer
	enc := json.NewEncoder(&old)
	for _, rec := range []history.Record{
		{V: 1, Time: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC), Service: "192.0.2.10:80/tcp", Server: "198.51.100.11:80", State: "managed", WeightBefore: 10, WeightAfter: 10},
		{V: 1, Time: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC), Service: "192.0.2.10:80/tcp", Server: "198.51.100.12:80", State: "managed", WeightBefore: 10, WeightAfter: 10},
	} {
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
	}
	old.WriteString(`{"v":1,"time":"2026-11-30T11:00:04Z","service":"192.0.2.10:80/tcp","server":"198.51.100.11:80","state":` + "\n")
	if err := os.WriteFile(path, old.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r.Cycle()
	code, out, errOut := lvsctlIn(t, nil, time.UTC, "-config", r.ConfigPath, "history", "192.0.2.10:80/tcp", "198.51.100.11:80")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	wantErr := "lvsctl: history: " + path + ":3: skipped: not a history record: unexpected end of JSON input\n"
	if errOut != wantErr {
		t.Errorf("stderr %q, want %q", errOut, wantErr)
	}
	if n := strings.Count(out, "198.51.100.11:80"); n != 6 || !strings.Contains(out, "2026-11-30 12:00:04  198.51.100.11:80  managed  10      0    7       31") ||
		!strings.HasPrefix(strings.SplitN(out, "\n", 3)[1], "2026-11-30 11:00:00  198.51.100.11:80  managed  10") {
		t.Errorf("%d rows, want A's old one and its 5:\n%s", n, out)
	}
}

func TestHistoryMistakes(t *testing.T) {
	r := historyRig(t)
	for _, tt := range []struct {
		args    []string
		code    int
		wantErr string
	}{
		{[]string{"history"}, exitUsage, "lvsctl: history: want SERVICE [SERVER], got 0 arguments"},
		{[]string{"history", "192.0.2.10:80"}, exitUsage, `service "192.0.2.10:80": want ADDRESS:PORT/PROTOCOL`},
		{[]string{"history", "192.0.2.10:80/tcp", "198.51.100.11"}, exitUsage, `server "198.51.100.11": want RIP:PORT`},
		{[]string{"history", "192.0.2.10:80/tcp", "-n", "-1"}, exitUsage, "-n must be 0 (all) or more, got -1"},
		{[]string{"history", "192.0.2.10:80/tcp", "-o", "csv"}, exitUsage, `-o "csv": want table or json`},
		{[]string{"history", "192.0.2.10:80/tcp", "198.51.100.99:80"}, exitFailed, "lvsctl: no history records for 192.0.2.10:80/tcp 198.51.100.99:80 in " + r.Dir},
		{[]string{"history", "-dir", t.TempDir(), "192.0.2.10:80/tcp"}, exitFailed, "lvsctl: no history in "},
		{[]string{"history", "-dir", filepath.Join(r.Dir, "none"), "192.0.2.10:80/tcp"}, exitFailed, "no such file or directory"},
	} {
		code, _, errOut := lvsctl(t, nil, append([]string{"-config", r.ConfigPath}, tt.args...)...)
		if code != tt.code || !strings.Contains(errOut, tt.wantErr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.wantErr)
		}
	}
}

// [history] is set up at start: a reload that changes it says so.
func TestHistoryReloadNeedsRestart(t *testing.T) {
	r := controltest.New(t, "")
	r.Cycle()
	r.WriteConfig(controltest.Config + "\n[history]\nfiles = 8\n")
	code, out, _ := lvsctl(t, r, "reload")
	if code != 0 || !strings.Contains(out, "[history] changed: takes effect when lvs-monitor restarts; the running history settings stay in use") {
		t.Errorf("reload: exit %d\n%s", code, out)
	}
	if got := r.Monitor.Status().Config.History.Files; got != 4 {
		t.Errorf("running history.files %d, want 4 kept", got)
	}
}
