package monitor

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// dirWatch records what is created or renamed into a directory, through
// inotify: the kernel queues each event as the system call happens, so
// reading the queue after Save returns sees every file Save made, however
// briefly it lived.
type dirWatch struct {
	t  *testing.T
	fd int
}

func watchDir(t *testing.T, dir string) *dirWatch {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatalf("inotify watch %s: %v", dir, err)
	}
	return &dirWatch{t: t, fd: fd}
}

// events returns "create NAME" and "moved-to NAME" for every event since
// the last call.
func (w *dirWatch) events() []string {
	w.t.Helper()
	var out []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return out
		}
		if err != nil {
			w.t.Fatalf("read inotify: %v", err)
		}
		if n == 0 {
			return out
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			switch {
			case ev.Mask&unix.IN_CREATE != 0:
				out = append(out, "create "+name)
			case ev.Mask&unix.IN_MOVED_TO != 0:
				out = append(out, "moved-to "+name)
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				w.t.Fatal("inotify queue overflowed")
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func sampleState(t *testing.T) State {
	t.Helper()
	svc, err := ipvs.ParseServiceKey("192.0.2.10:80/tcp")
	if err != nil {
		t.Fatal(err)
	}
	return State{{Service: svc, Dest: netip.MustParseAddrPort("198.51.100.11:80")}: {State: policy.DrainedByOperator}}
}

// The temporary file is written in the state directory, never in
// $TMPDIR, even when $TMPDIR is on the same file system (where a rename
// from it would work): /tmp may be cleaned, shared, or a private mount
// of the unit, and the directory's fsync must cover the file.
func TestFileStoreSaveWritesTempBesideTarget(t *testing.T) {
	base := t.TempDir()
	tmp, stateDir := filepath.Join(base, "tmp"), filepath.Join(base, "state")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	s, err := NewFileStore(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	inTmp, inState := watchDir(t, tmp), watchDir(t, stateDir)
	for i := range 2 { // the first save creates the file, the second replaces it
		if err := s.Save(sampleState(t)); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if ev := inTmp.events(); len(ev) > 0 {
			t.Errorf("save %d made files in TMPDIR: %v", i, ev)
		}
		ev := inState.events()
		if len(ev) != 4 || !strings.HasPrefix(ev[0], "create ") || ev[0] == "create state.json" || ev[1] != "moved-to state.json" ||
			!strings.HasPrefix(ev[2], "create ") || ev[3] != "moved-to state.json.prev" {
			t.Errorf("save %d in the state directory: %v, want a temporary file created and renamed to state.json, then its copy to state.json.prev", i, ev)
		}
	}
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"state.json", "state.json.prev"}) {
		t.Errorf("state directory holds %v, want only state.json and the previous save", names)
	}
	if fi, err := os.Stat(s.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	st, err := s.Load()
	if err != nil || len(st) != 1 {
		t.Errorf("load after save: %v %v", st, err)
	}
}

// A state file that cannot be used is moved aside, bytes intact, under a
// name that no later one takes; the error says where.
func TestFileStoreKeepsCorruptFile(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	s.now = func() time.Time { return at }

	load := func(content []byte, want string) {
		t.Helper()
		if err := os.WriteFile(s.Path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := s.Load()
		if !errors.Is(err, ErrCorruptState) || len(st) != 0 {
			t.Fatalf("load of %q: %v, %v; want an empty state and ErrCorruptState", content, st, err)
		}
		var ce *CorruptStateError
		if !errors.As(err, &ce) || ce.Kept != want {
			t.Fatalf("load of %q: %v; want it kept as %s", content, err, want)
		}
		if !strings.Contains(err.Error(), "state file unusable") || !strings.Contains(err.Error(), "kept as "+want) {
			t.Errorf("error text %q does not say where the file went", err)
		}
		if _, err := os.Lstat(s.Path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after it was kept aside: %v", s.Path, err)
		}
	}
	first := filepath.Join(dir, "state.json.corrupt-20260102T020405Z") // UTC
	second := first + ".1"
	load([]byte("{not json"), first)
	// The same second again: the first copy must survive.
	load([]byte(`{"version": 99}`), second)
	for path, want := range map[string]string{first: "{not json", second: `{"version": 99}`} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("%s holds %q, %v; want %q", path, got, err, want)
		}
	}

	// A directory in the file's place (a hard link cannot move it).
	if err := os.Mkdir(s.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = s.Load()
	var ce *CorruptStateError
	if !errors.As(err, &ce) || ce.Kept != first+".2" {
		t.Fatalf("load of a directory: %v; want it kept as %s.2", err, first)
	}
	if fi, err := os.Stat(ce.Kept); err != nil || !fi.IsDir() {
		t.Errorf("the directory was not moved: %v", err)
	}

	// The state directory is usable again.
	if err := s.Save(sampleState(t)); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Load(); err != nil || len(st) != 1 {
		t.Errorf("load after save: %v %v", st, err)
	}
}

// A missing file is not corrupt: nothing is moved.
func TestFileStoreMissingFile(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorruptState) || len(st) != 0 {
		t.Errorf("missing file: %v %v", st, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("state directory holds %v after loading nothing", ents)
	}
}

// The line lvs-monitor logs at start says where the unusable file went.
func TestCorruptStateLogSaysWhereItWent(t *testing.T) {
	r := newRig(t)
	must(t, os.WriteFile(filepath.Join(r.dir, "state.json"), []byte("{not json"), 0o600))
	var buf bytes.Buffer
	store, err := NewFileStore(r.dir)
	must(t, err)
	_, err = New(r.cfg, Deps{Table: r.table, Agents: r.agents, Prober: r.prober, Store: store,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))}, false)
	must(t, err)
	matches, _ := filepath.Glob(filepath.Join(r.dir, "state.json.corrupt-*"))
	if len(matches) != 1 {
		t.Fatalf("copies kept: %v, want one", matches)
	}
	line := buf.String()
	if !strings.Contains(line, "state file unusable") || !strings.Contains(line, "kept as "+matches[0]) {
		t.Errorf("log %q does not say the file was kept as %s", line, matches[0])
	}
	if got, err := os.ReadFile(matches[0]); err != nil || string(got) != "{not json" {
		t.Errorf("copy holds %q, %v", got, err)
	}

	// When it cannot be moved, the text says that the next save replaces it.
	e := &CorruptStateError{Path: "/var/lib/lvs-monitor/state.json", Err: ErrCorruptState, KeepErr: errors.New("read-only file system")}
	if want := "state file /var/lib/lvs-monitor/state.json: state file unusable; could not keep it aside (read-only file system): the next save replaces it"; e.Error() != want {
		t.Errorf("error text %q, want %q", e.Error(), want)
	}
}

// A damaged state file loses nothing: Load returns the records of the last
// save's copy — a down server stays down, to be restored when it answers —
// and says so; a dry run's store leaves the damaged file where it is.
func TestFileStoreFallsBackToThePreviousSave(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := ipvs.ParseServiceKey("192.0.2.10:80/tcp")
	k := DestKey{Service: svc, Dest: netip.MustParseAddrPort("198.51.100.11:80")}
	if err := s.Save(State{k: {State: policy.Managed, Written: 12}}); err != nil {
		t.Fatal(err)
	}
	down := State{k: {State: policy.Down, RestoreWeight: 12}}
	if err := s.Save(down); err != nil { // the last save: its copy has it too
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path, []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	ro := &FileStore{Path: s.Path, ReadOnly: true}
	st, err := ro.Load()
	var ce *CorruptStateError
	if !errors.As(err, &ce) || ce.Previous == "" || st[k].State != policy.Down || st[k].RestoreWeight != 12 {
		t.Fatalf("read-only load of a damaged file: %v, %+v", err, st)
	}
	if data, _ := os.ReadFile(s.Path); string(data) != "{garbage" || ce.Kept != "" {
		t.Errorf("a read-only store moved the damaged file (kept %q)", ce.Kept)
	}
	if err := ro.Save(down); err == nil {
		t.Error("a read-only store saved")
	}
	st, err = s.Load()
	if !errors.As(err, &ce) || ce.Previous == "" || ce.Kept == "" || st[k].State != policy.Down {
		t.Fatalf("load of a damaged file: %v, %+v", err, st)
	}
	if !strings.Contains(err.Error(), "its copy") {
		t.Errorf("the error does not say the copy is used: %v", err)
	}
}

// TestStateSetBy: who set a weight is saved and loaded back; a state file
// written before set_by existed still loads (its records say nobody); an
// unknown set_by makes the file unusable, as an unknown state does.
func TestStateSetBy(t *testing.T) {
	k := DestKey{Service: svcKey, Dest: netip.MustParseAddrPort("198.51.100.11:80")}
	want := State{k: {State: policy.Down, SetBy: policy.ByHealthChecker, RestoreWeight: 10, Counter: 7}}
	data, err := encodeState(want)
	must(t, err)
	if !strings.Contains(string(data), `"set_by":"health-checker"`) {
		t.Errorf("encoded without set_by: %s", data)
	}
	got, err := decodeState(data)
	if err != nil || got[k] != want[k] {
		t.Errorf("round trip: %+v %v, want %+v", got[k], err, want[k])
	}
	old := `{"version":1,"destinations":{"192.0.2.10:80/tcp":{"198.51.100.11:80":{"state":"drained","written":0,"counter":40}}}}`
	got, err = decodeState([]byte(old))
	if err != nil || got[k] != (policy.DestRecord{State: policy.DrainedByOperator, Counter: 40}) {
		t.Errorf("a state file from before set_by: %+v %v", got[k], err)
	}
	bad := strings.Replace(old, `"state":"drained"`, `"state":"drained","set_by":"ops"`, 1)
	if _, err := decodeState([]byte(bad)); !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), `unknown set_by "ops"`) {
		t.Errorf("unknown set_by: %v", err)
	}
}
