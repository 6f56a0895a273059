package history

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fill sets every field of the value v points to, recursively, to a value
// that is not zero and differs from field to field.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(*n), int64(*n)*1000+7).UTC()))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]float64{"/": 0.25, "/var": float64(*n) / 3}))
	case reflect.String:
		v.SetString("text " + strings.Repeat("é", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n) * -1001)
	case reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n) * 4_000_001)
	case reflect.Float64:
		v.SetFloat(float64(*n) / 7)
	default:
		panic("fill: " + v.Kind().String())
	}
}

// Every field of a record survives the binary format: a field added to
// Record and forgotten by the codec fails here. So do the zero record
// and nil pointers to zero.
func TestBinaryRoundTrip(t *testing.T) {
	var full Record
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	full.V = SchemaVersion
	zero := 0.0
	var zeros Record
	zeros.V, zeros.Load, zeros.Agent = SchemaVersion, &zero, &Agent{Raw: AgentRaw{PSIIOSome10: &zero}}
	for _, r := range []Record{full, {V: SchemaVersion}, zeros, rec(3, 4, "192.0.2.10:80/tcp")} {
		b, err := appendRecord(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(r)
			t.Errorf("decoded\n%s\nwant\n%s", g, w)
		}
	}
}

// frame is a frame of the binary format holding payload.
func frame(payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32([]byte(frameMarker), uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, castagnoli))
	return append(b, payload...)
}

// A crafted or damaged file gives notes, never a panic nor a large
// allocation; the records around the damage read.
func TestBinaryDamage(t *testing.T) {
	good, _ := appendRecord(nil, new(rec(1, 1, "192.0.2.10:80/tcp")))
	goodFrame := frame(append(binary.AppendUvarint(nil, uint64(len(good))), good...))
	record := func(body []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(body))), body...) }
	flipped := append([]byte(nil), goodFrame...)
	flipped[len(flipped)-3] ^= 0x10
	// A string claiming 2^62 bytes; a map claiming 2^40 entries; a mask
	// with a field this reader does not know.
	hugeString := []byte{1 << rService, 0, 0, 0, 0}
	hugeString = binary.AppendUvarint(hugeString, 1<<62)
	hugeMap := []byte{0, 0, 0, 1 << (rAgent - 24), 0, 0, 0x40, 0}
	hugeMap = binary.AppendUvarint(hugeMap, 1<<40)
	unknown := []byte{0, 0, 0, 0, 1 << (rBits - 32)}
	for _, tt := range []struct {
		name  string
		file  []byte
		recs  int
		notes []string
	}{
		{"flipped bit", cat(fileHeader(), goodFrame, flipped, goodFrame), 2, []string{fmt.Sprintf("byte %d: skipped: %d bytes up to the next frame: frame of %d bytes fails its checksum", headerLen+len(goodFrame), len(goodFrame), len(goodFrame)-frameHeaderLen)}},
		{"huge frame length", cat(fileHeader(), goodFrame, []byte(frameMarker), []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}, goodFrame), 2,
			[]string{fmt.Sprintf("byte %d: skipped: %d bytes up to the next frame: frame of 2147483647 bytes: not a history frame", headerLen+len(goodFrame), frameHeaderLen)}},
		{"frame longer than the file", cat(fileHeader(), goodFrame, []byte(frameMarker), []byte{0, 0, 0, 1, 0, 0, 0, 0}, good), 1, []string{"incomplete last frame"}},
		// A frame cut short by a crash, and the frames of the next run
		// after it.
		{"frame cut short in the middle", cat(fileHeader(), goodFrame, goodFrame[:len(goodFrame)-9], goodFrame, goodFrame), 3,
			[]string{fmt.Sprintf("byte %d: skipped: %d bytes up to the next frame: frame of %d bytes fails its checksum", headerLen+len(goodFrame), len(goodFrame)-9, len(goodFrame)-frameHeaderLen)}},
		{"garbage between frames", cat(fileHeader(), goodFrame, []byte("garbage\n"+frameMarker+"x"), goodFrame), 2, []string{"13 bytes up to the next frame: not a frame"}},
		{"huge string", cat(fileHeader(), frame(cat(record(hugeString), record(good)))), 1, []string{"record 1 of the frame at byte 12: record cut short"}},
		{"huge map", cat(fileHeader(), frame(cat(record(hugeMap), record(good)))), 1, []string{"agent.raw.disk_space_used: 1099511627776 entries"}},
		{"unknown field", cat(fileHeader(), frame(cat(record(good), record(unknown)))), 1, []string{"record: unknown field (bit 39): written by a newer lvs-monitor"}},
		{"record length past the frame", cat(fileHeader(), frame(cat(record(good), []byte{0x7f, 1}))), 1, []string{"length cut short; the rest of the frame"}},
		{"trailing bytes", cat(fileHeader(), frame(record(append(good, 0)))), 0, []string{"1 bytes after the record's last field"}},
		{"newer format", cat([]byte(fileMagic), []byte{2, 0, 0, 0}, goodFrame), 0, []string{"byte 0: skipped: history format version 2, this reader knows 1"}},
	} {
		path := filepath.Join(t.TempDir(), FileName)
		must(t, os.WriteFile(path, tt.file, 0o600))
		n := 0
		notes, err := ReadFile(path, Filter{}, func(Record) { n++ })
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if n != tt.recs || len(notes) != len(tt.notes) {
			t.Errorf("%s: %d records, notes %v; want %d records and %d notes", tt.name, n, notes, tt.recs, len(tt.notes))
			continue
		}
		for i, want := range tt.notes {
			if !strings.Contains(notes[i].String(), want) {
				t.Errorf("%s: note %q, want %q in it", tt.name, notes[i], want)
			}
		}
	}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// FuzzReadFile reads any bytes as a history file: notes or records, never
// a panic, and every record read encodes again.
func FuzzReadFile(f *testing.F) {
	good, _ := appendRecord(nil, new(rec(1, 1, "192.0.2.10:80/tcp")))
	var full Record
	n := 0
	fill(reflect.ValueOf(&full).Elem(), &n)
	all, _ := appendRecord(nil, &full)
	rb := func(b []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(b))), b...) }
	f.Add(cat(fileHeader(), frame(cat(rb(good), rb(all)))))
	f.Add(cat(fileHeader(), frame(rb(good)), []byte{3, 0, 0}))
	f.Add([]byte(`{"v":1,"service":"192.0.2.10:80/tcp"}` + "\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path, Filter{}, func(r Record) {
			if string(data[:min(len(data), len(fileMagic))]) != fileMagic {
				return // JSON lines may hold what the binary format refuses
			}
			if _, err := appendRecord(nil, &r); err != nil {
				t.Errorf("a record read does not encode: %v", err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// A line of a JSON-lines file longer than a reader holds is skipped
// with a note; the lines around it read.
func TestJSONLineTooLong(t *testing.T) {
	path := filepath.Join(t.TempDir(), JSONFileName)
	writeJSONFile(t, path, []Record{rec(1, 1, "192.0.2.10:80/tcp")}, `{"v":1,"reason":"`+strings.Repeat("x", maxLine)+"\"}\n", `{"v":1,"service":"192.0.2.10:80/tcp"}`+"\n")
	n := 0
	notes, err := ReadFile(path, Filter{}, func(Record) { n++ })
	if err != nil || n != 2 || len(notes) != 1 || notes[0].String() != path+":2: skipped: not a history record: a line longer than 1048576 bytes" {
		t.Fatalf("%d records, notes %v, %v", n, notes, err)
	}
}
