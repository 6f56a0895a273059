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

// rec is a record of server i (of service svc) at cycle c.
func rec(c, i int, svc string) Record {
	load := 0.5
	nc := int64(100 + c)
	return Record{V: SchemaVersion, Time: t0.Add(time.Duration(c) * 5 * time.Second), Service: svc,
		Server: fmt.Sprintf("198.51.100.%d:80", i), State: "managed", Configured: 10, DefaultWeight: 10,
		WeightBefore: 10, WeightTo: 10, WeightAfter: 10, NewConns: &nc, ActiveConns: c, Load: &load, Ramp: 1}
}

func lineLen(t *testing.T, r Record) int64 {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b) + 1)
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
	one := lineLen(t, rec(10, 1, "192.0.2.10:80/tcp")) // every record of this test has this length
	lim := Limits{MaxSize: 20*one + one/2, Files: 3}   // room for 20 lines, not 21
	w, err := Open(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	for c := 10; c < 85; c++ { // 75 cycles of one record
		if err := w.Write([]Record{rec(c, 1, "192.0.2.10:80/tcp")}); err != nil {
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
	// 75 lines: 20 in each rotated file (three files were filled; the
	// first went), 15 in the current one.
	wantNames := []string{"history.jsonl.2", "history.jsonl.1", "history.jsonl"}
	wantSizes := []int64{20 * one, 20 * one, 15 * one}
	if fmt.Sprint(names) != fmt.Sprint(wantNames) || fmt.Sprint(sizes) != fmt.Sprint(wantSizes) {
		t.Fatalf("files %v sizes %v, want %v sizes %v", names, sizes, wantNames, wantSizes)
	}
	got, notes := readAll(t, dir, Filter{})
	if len(notes) != 0 {
		t.Fatalf("notes: %v", notes)
	}
	if len(got) != 55 || got[0].ActiveConns != 30 || got[54].ActiveConns != 84 {
		t.Fatalf("read %d records, first %d last %d; want 55 from cycle 30 to 84", len(got), got[0].ActiveConns, got[len(got)-1].ActiveConns)
	}
	for i := range got {
		if got[i].ActiveConns != 30+i {
			t.Fatalf("record %d is of cycle %d, want %d", i, got[i].ActiveConns, 30+i)
		}
	}
}

// One batch larger than a file is split across files at line boundaries.
func TestRotationWithinABatch(t *testing.T) {
	dir := t.TempDir()
	one := lineLen(t, rec(10, 10, "192.0.2.10:80/tcp"))
	w, err := Open(dir, Limits{MaxSize: 16 * one, Files: 5})
	if err != nil {
		t.Fatal(err)
	}
	var batch []Record
	for i := 10; i < 50; i++ {
		batch = append(batch, rec(10, i, "192.0.2.10:80/tcp"))
	}
	if err := w.Write(batch); err != nil {
		t.Fatal(err)
	}
	w.Close()
	files, _ := Files(dir)
	if len(files) != 3 {
		t.Fatalf("files %v, want 3", files)
	}
	for i, want := range []int64{16 * one, 16 * one, 8 * one} {
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

// A crash in the middle of a write leaves a partial last line: the
// reader skips it with a note, and the next Open ends it so that the
// records after it read.
func TestPartialLastLine(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]Record{rec(1, 1, "192.0.2.10:80/tcp"), rec(1, 2, "192.0.2.10:80/tcp")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The crash: half of a third line.
	b, _ := json.Marshal(rec(2, 1, "192.0.2.10:80/tcp"))
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b[:len(b)/2])
	f.Close()

	got, notes := readAll(t, dir, Filter{})
	if len(got) != 2 || len(notes) != 1 || notes[0].Line != 3 || !strings.Contains(notes[0].Why, "incomplete last line") {
		t.Fatalf("got %d records, notes %v; want 2 and the incomplete line 3", len(got), notes)
	}
	// With a filter that the cut line does not match, it is still noted.
	if _, notes := readAll(t, dir, Filter{Server: "198.51.100.2:80"}); len(notes) != 1 {
		t.Fatalf("filtered: notes %v, want the incomplete line", notes)
	}

	// Restart: the cut line is ended, the new records follow on lines of
	// their own.
	w, err = Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]Record{rec(3, 1, "192.0.2.10:80/tcp")}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, notes = readAll(t, dir, Filter{})
	if len(got) != 3 || got[2].ActiveConns != 3 {
		t.Fatalf("after restart: %d records, want 3 ending with cycle 3", len(got))
	}
	if len(notes) != 1 || notes[0].Line != 3 || !strings.Contains(notes[0].Why, "not a history record") {
		t.Fatalf("after restart: notes %v, want line 3 not a record", notes)
	}
}

// Lines that are not records of this version are skipped with a note
// naming file and line; the filter selects by service and server.
func TestCorruptLinesAndFilter(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Write([]Record{rec(1, 1, "192.0.2.10:80/tcp"), rec(1, 2, "192.0.2.10:80/tcp"), rec(1, 1, "192.0.2.20:80/tcp")}))
	w.Close()
	f, _ := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("garbage\n")
	future := rec(2, 1, "192.0.2.10:80/tcp")
	future.V = 2
	b, _ := json.Marshal(future)
	f.Write(append(b, '\n'))
	f.Close()
	w, _ = Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	must(w.Write([]Record{rec(3, 1, "192.0.2.10:80/tcp")}))
	w.Close()

	got, notes := readAll(t, dir, Filter{})
	if len(got) != 4 {
		t.Fatalf("%d records, want 4", len(got))
	}
	path := filepath.Join(dir, FileName)
	want := []string{
		path + ":4: skipped: not a history record: invalid character 'g' looking for beginning of value",
		path + ":5: skipped: schema version 2, this reader knows 1",
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
	// 198.51.100.1:80 is a prefix of no other server here, but the quoted
	// match must not take 198.51.100.10:80 for it either.
	w, _ = Open(dir, Limits{MaxSize: 1 << 20, Files: 2})
	must(w.Write([]Record{rec(4, 10, "192.0.2.10:80/tcp")}))
	w.Close()
	got, _ = readAll(t, dir, Filter{Server: "198.51.100.1:80"})
	if len(got) != 3 {
		t.Fatalf("server 198.51.100.1:80: %d records, want 3", len(got))
	}
}

// Open removes the rotated files beyond Files that a run keeping more
// left, the oldest first.
func TestOpenPrunes(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"history.jsonl", "history.jsonl.1", "history.jsonl.2", "history.jsonl.3", "history.jsonl.x", "other"} {
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
	if fmt.Sprint(names) != "[history.jsonl history.jsonl.1 history.jsonl.x other]" {
		t.Fatalf("left %v", names)
	}
}

// NaN has no JSON form: such a record is left out and reported, the
// others of the batch are written.
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
