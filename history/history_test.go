package history

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

// long is rec with a reason of 200 bytes: a record large enough that
// 20 fill a file of the smallest size.
func long(c, i int, svc string) Record {
	r := rec(c, i, svc)
	r.Reason = strings.Repeat("x", 200)
	return r
}

// rec is a record of server i (of service svc) at cycle c.
func rec(c, i int, svc string) Record {
	load := 0.5
	nc := int64(100 + c)
	return Record{V: SchemaVersion, Time: t0.Add(time.Duration(c) * 5 * time.Second), Service: svc,
		Server: fmt.Sprintf("198.51.100.%d:80", i), State: "managed", Configured: 10, DefaultWeight: 10,
		WeightBefore: 10, WeightTo: 10, WeightAfter: 10, NewConns: &nc, ActiveConns: c, Load: &load, Ramp: 1}
}

// recLen is the bytes r takes in a frame: its length and its body.
func recLen(t *testing.T, r Record) int64 {
	t.Helper()
	b, err := appendRecord(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	return int64(uvarintLen(len(b)) + len(b))
}

// writeJSONFile writes recs as a file of the older JSON-lines format,
// then the extra lines.
func writeJSONFile(t *testing.T, path string, recs []Record, extra ...string) {
	t.Helper()
	var b []byte
	for i := range recs {
		line, err := json.Marshal(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	for _, x := range extra {
		b = append(b, x...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, dir string, f Filter) ([]Record, []Skipped) {
	t.Helper()
	var got []Record
	notes, err := Read(dir, f, func(r Record) { got = append(got, r) })
	if err != nil {
		t.Fatal(err)
	}
	return got, notes
}

// Rotation at the cap: every file stays within MaxSize, Files files are
// kept, the newest records survive in order and the oldest are gone.
func TestRotationAtTheCap(t *testing.T) {
	dir := t.TempDir()
	// Every record of this test has the same length (cycles 64 to 138:
	// two-byte varints); each Write of one is a frame of its own.
	one := frameHeaderLen + recLen(t, long(64, 1, "192.0.2.10:80/tcp"))
	lim := Limits{MaxSize: int64(headerLen) + 20*one + one/2, Files: 3} // room for 20 frames, not 21
	w, err := Open(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	for c := 64; c < 139; c++ { // 75 cycles of one record
		if err := w.Write([]Record{long(c, 1, "192.0.2.10:80/tcp")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var sizes []int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		names, sizes = append(names, filepath.Base(f)), append(sizes, fi.Size())
	}
	// 75 frames: 20 in each rotated file (three files were filled; the
	// first went), 15 in the current one.
	wantNames := []string{"history.bin.2", "history.bin.1", "history.bin"}
	h := int64(headerLen)
	wantSizes := []int64{h + 20*one, h + 20*one, h + 15*one}
	if fmt.Sprint(names) != fmt.Sprint(wantNames) || fmt.Sprint(sizes) != fmt.Sprint(wantSizes) {
		t.Fatalf("files %v sizes %v, want %v sizes %v", names, sizes, wantNames, wantSizes)
	}
	got, notes := readAll(t, dir, Filter{})
	if len(notes) != 0 {
		t.Fatalf("notes: %v", notes)
	}
	if len(got) != 55 || got[0].ActiveConns != 84 || got[54].ActiveConns != 138 {
		t.Fatalf("read %d records, first %d last %d; want 55 from cycle 84 to 138", len(got), got[0].ActiveConns, got[len(got)-1].ActiveConns)
	}
	for i := range got {
		if got[i].ActiveConns != 84+i {
			t.Fatalf("record %d is of cycle %d, want %d", i, got[i].ActiveConns, 84+i)
		}
	}
}

// One batch larger than a file is split across files at record
// boundaries, a frame in each.
func TestRotationWithinABatch(t *testing.T) {
	dir := t.TempDir()
	one := recLen(t, long(10, 10, "192.0.2.10:80/tcp"))
	h := int64(headerLen + frameHeaderLen)
	w, err := Open(dir, Limits{MaxSize: h + 16*one, Files: 5})
	if err != nil {
		t.Fatal(err)
	}
	var batch []Record
	for i := 10; i < 50; i++ {
		batch = append(batch, long(10, i, "192.0.2.10:80/tcp"))
	}
	if err := w.Write(batch); err != nil {
		t.Fatal(err)
	}
	w.Close()
	files, _ := Files(dir)
	if len(files) != 3 {
		t.Fatalf("files %v, want 3", files)
	}
	for i, want := range []int64{h + 16*one, h + 16*one, h + 8*one} {
		fi, _ := os.Stat(files[i])
		if fi.Size() != want {
			t.Errorf("%s: %d bytes, want %d", files[i], fi.Size(), want)
		}
	}
	got, _ := readAll(t, dir, Filter{})
	if len(got) != 40 || got[0].Server != "198.51.100.10:80" || got[39].Server != "198.51.100.49:80" {
		t.Fatalf("read %d records: %v … ", len(got), got)
	}
}

// A crash in the middle of a write leaves a partial last frame: the
// reader skips it with a note, and finds the records written after it
// by the next run.
func TestPartialLastFrame(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]Record{rec(1, 1, "192.0.2.10:80/tcp"), rec(1, 2, "192.0.2.10:80/tcp")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]Record{rec(2, 1, "192.0.2.10:80/tcp"), rec(2, 2, "192.0.2.10:80/tcp")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	path := filepath.Join(dir, FileName)
	full, _ := os.ReadFile(path)
	second := int64(headerLen) + frameHeaderLen + recLen(t, rec(1, 1, "192.0.2.10:80/tcp")) + recLen(t, rec(1, 2, "192.0.2.10:80/tcp"))
	for _, cut := range []int64{second + 3, second + frameHeaderLen + 5, int64(len(full)) - 1} {
		// The crash: part of the second frame written.
		if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		got, notes := readAll(t, dir, Filter{})
		want := fmt.Sprintf("%s: byte %d: skipped: incomplete last frame (a write in progress, or cut short by a crash)", path, second)
		if len(got) != 2 || len(notes) != 1 || notes[0].String() != want {
			t.Fatalf("cut at %d: got %d records, notes %v; want 2 and %q", cut, len(got), notes, want)
		}
		// With a filter that the cut frame does not match, it is still noted.
		if _, notes := readAll(t, dir, Filter{Server: "198.51.100.9:80"}); len(notes) != 1 {
			t.Fatalf("filtered: notes %v, want the incomplete frame", notes)
		}
	}
	// A frame whose length is whole but whose bytes are not (zeros where
	// the data never reached the disk) fails its checksum.
	zeroed := append([]byte(nil), full...)
	clear(zeroed[len(zeroed)-20:])
	must(t, os.WriteFile(path, zeroed, 0o600))
	if got, notes := readAll(t, dir, Filter{}); len(got) != 2 || len(notes) != 1 || !strings.Contains(notes[0].Why, "fails its checksum") {
		t.Fatalf("zeroed tail: %d records, notes %v", len(got), notes)
	}

	// Restart: the new records follow the damaged frame, which the
	// reader steps over to them.
	w, err = Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]Record{rec(3, 1, "192.0.2.10:80/tcp")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, notes := readAll(t, dir, Filter{})
	want := fmt.Sprintf("%s: byte %d: skipped: %d bytes up to the next frame: frame of %d bytes fails its checksum (corrupt)", path, second, int64(len(full))-second, int64(len(full))-second-frameHeaderLen)
	if len(got) != 3 || got[2].ActiveConns != 3 || len(notes) != 1 || notes[0].String() != want {
		t.Fatalf("after restart: %d records, notes %v; want 3 ending with cycle 3, and %q", len(got), notes, want)
	}

	// A header cut short is started again.
	must(t, os.WriteFile(path, []byte(fileMagic[:5]), 0o600))
	if _, notes := readAll(t, dir, Filter{}); len(notes) != 1 || notes[0].Why != "header cut short (a file being started, or cut short by a crash)" {
		t.Fatalf("cut header: notes %v", notes)
	}
	w, err = Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	must(t, err)
	must(t, w.Write([]Record{rec(4, 1, "192.0.2.10:80/tcp")}))
	w.Close()
	if got, notes := readAll(t, dir, Filter{}); len(got) != 1 || len(notes) != 0 {
		t.Fatalf("after a cut header: %d records, notes %v", len(got), notes)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Files of the older JSON-lines format still read, before the binary
// ones: a partial last line is skipped with a note, a line that is not
// a record of this version too, naming file and line; the filter selects
// by service and server.
func TestReadsJSONLines(t *testing.T) {
	dir := t.TempDir()
	// The crash: half of a line.
	b, _ := json.Marshal(rec(2, 1, "192.0.2.10:80/tcp"))
	old := filepath.Join(dir, JSONFileName+".1")
	writeJSONFile(t, old, []Record{rec(1, 1, "192.0.2.10:80/tcp"), rec(1, 2, "192.0.2.10:80/tcp")}, string(b[:len(b)/2]))
	got, notes := readAll(t, dir, Filter{})
	if len(got) != 2 || len(notes) != 1 || notes[0].Line != 3 || !strings.Contains(notes[0].Why, "incomplete last line") {
		t.Fatalf("got %d records, notes %v; want 2 and the incomplete line 3", len(got), notes)
	}
	// With a filter that the cut line does not match, it is still noted.
	if _, notes := readAll(t, dir, Filter{Server: "198.51.100.2:80"}); len(notes) != 1 {
		t.Fatalf("filtered: notes %v, want the incomplete line", notes)
	}

	future := rec(2, 1, "192.0.2.10:80/tcp")
	future.V = 2
	fb, _ := json.Marshal(future)
	cur := filepath.Join(dir, JSONFileName)
	writeJSONFile(t, cur, []Record{rec(1, 1, "192.0.2.10:80/tcp"), rec(1, 2, "192.0.2.10:80/tcp"), rec(1, 1, "192.0.2.20:80/tcp")},
		"garbage\n", string(fb)+"\n")
	w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 3})
	must(t, err)
	must(t, w.Write([]Record{rec(3, 1, "192.0.2.10:80/tcp")}))
	w.Close()
	must(t, os.Remove(old))

	got, notes = readAll(t, dir, Filter{})
	if len(got) != 4 {
		t.Fatalf("%d records, want 4", len(got))
	}
	want := []string{
		cur + ":4: skipped: not a history record: invalid character 'g' looking for beginning of value",
		cur + ":5: skipped: schema version 2, this reader knows 1",
	}
	if len(notes) != 2 || notes[0].String() != want[0] || notes[1].String() != want[1] {
		t.Fatalf("notes %v, want %v", notes, want)
	}

	got, _ = readAll(t, dir, Filter{Service: "192.0.2.10:80/tcp", Server: "198.51.100.1:80"})
	if len(got) != 2 || got[0].ActiveConns != 1 || got[1].ActiveConns != 3 {
		t.Fatalf("service and server: %+v", got)
	}
	got, _ = readAll(t, dir, Filter{Service: "192.0.2.20:80/tcp"})
	if len(got) != 1 || got[0].Server != "198.51.100.1:80" {
		t.Fatalf("service: %+v", got)
	}
	// 198.51.100.1:80 is a prefix of no other server here, but the match
	// must not take 198.51.100.10:80 for it either.
	w, _ = Open(dir, Limits{MaxSize: 1 << 20, Files: 3})
	must(t, w.Write([]Record{rec(4, 10, "192.0.2.10:80/tcp")}))
	w.Close()
	got, _ = readAll(t, dir, Filter{Server: "198.51.100.1:80"})
	if len(got) != 3 {
		t.Fatalf("server 198.51.100.1:80: %d records, want 3", len(got))
	}
}

// Open removes the rotated files beyond Files that a run keeping more
// left, the oldest first; files of the older JSON-lines format count as
// older than every binary one, so that the bound holds across the
// upgrade.
func TestOpenPrunes(t *testing.T) {
	for _, tt := range []struct {
		files []string
		want  string
	}{
		{[]string{"history.bin", "history.bin.1", "history.bin.2", "history.bin.3", "history.bin.x", "other"},
			"[history.bin history.bin.1 history.bin.x other]"},
		// The upgrade: the newest old file stays, with the new current one.
		{[]string{"history.jsonl", "history.jsonl.1", "history.jsonl.2", "history.jsonl.x", "other"},
			"[history.bin history.jsonl history.jsonl.x other]"},
		{[]string{"history.bin", "history.bin.1", "history.jsonl", "history.jsonl.1"},
			"[history.bin history.bin.1]"},
	} {
		dir := t.TempDir()
		for _, name := range tt.files {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if fmt.Sprint(names) != tt.want {
			t.Errorf("%v: left %v, want %s", tt.files, names, tt.want)
		}
	}
}

// NaN is no figure a record holds (nor has it a JSON form): such a
// record is left out and reported, the others of the batch are written.
func TestUnencodableRecord(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	bad := rec(1, 2, "192.0.2.10:80/tcp")
	bad.Ramp = nan()
	err = w.Write([]Record{rec(1, 1, "192.0.2.10:80/tcp"), bad, rec(1, 3, "192.0.2.10:80/tcp")})
	if err == nil || !strings.Contains(err.Error(), "198.51.100.2:80") {
		t.Fatalf("error %v, want one naming 198.51.100.2:80", err)
	}
	w.Close()
	if got, _ := readAll(t, dir, Filter{}); len(got) != 2 {
		t.Fatalf("%d records, want 2", len(got))
	}
}

func nan() float64 { var z float64; return z / z }

func TestLimitsCheck(t *testing.T) {
	for _, l := range []Limits{{MaxSize: 100, Files: 2}, {MaxSize: 1 << 20, Files: 1}} {
		if _, err := Open(t.TempDir(), l); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
}
