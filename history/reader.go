package history

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Filter selects records: an empty field matches every record.
type Filter struct {
	Service string // as the record's service field, e.g. "192.0.2.10:80/tcp"
	Server  string // RIP:PORT
}

func (f Filter) match(r *Record) bool {
	return (f.Service == "" || r.Service == f.Service) && (f.Server == "" || r.Server == f.Server)
}

// quick reports whether line may hold a match, before decoding it: the
// filter's values appear in it as JSON strings.
func (f Filter) quick(line []byte) bool {
	for _, v := range []string{f.Service, f.Server} {
		if v != "" && !bytes.Contains(line, []byte(strconv.Quote(v))) {
			return false
		}
	}
	return true
}

// Skipped is a line of a JSON-lines file, or a part of a binary file
// (from the byte Offset on), that Read left out, and why.
type Skipped struct {
	File   string
	Line   int   // JSON lines: the line; 0 in a binary file
	Offset int64 // binary: where the frame or record skipped starts
	Why    string
}

func (s Skipped) String() string {
	if s.Line == 0 {
		return fmt.Sprintf("%s: byte %d: skipped: %s", s.File, s.Offset, s.Why)
	}
	return fmt.Sprintf("%s:%d: skipped: %s", s.File, s.Line, s.Why)
}

// Files returns the history files in dir, oldest first: those of the
// older JSON-lines format (history.jsonl.N … history.jsonl.1, then
// history.jsonl), then history.bin.N … history.bin.1, then history.bin;
// those that do not exist are left out.
func Files(dir string) ([]string, error) {
	old, err := files(dir, JSONFileName)
	if err != nil {
		return nil, err
	}
	cur, err := files(dir, FileName)
	return append(old, cur...), err
}

func files(dir, base string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	type numbered struct {
		n    int
		name string
	}
	var list []numbered
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == base:
			list = append(list, numbered{0, name})
		case strings.HasPrefix(name, base+"."):
			n, err := strconv.Atoi(name[len(base)+1:])
			if err == nil && n > 0 {
				list = append(list, numbered{n, name})
			}
		}
	}
	slices.SortFunc(list, func(a, b numbered) int { return b.n - a.n })
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = filepath.Join(dir, x.name)
	}
	return out, nil
}

// Read calls fn with every record in dir's history files that f selects,
// oldest first, as ReadFile does for each file.
func Read(dir string, f Filter, fn func(Record)) ([]Skipped, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	var notes []Skipped
	for _, path := range files {
		n, err := ReadFile(path, f, fn)
		notes = append(notes, n...)
		if err != nil {
			return notes, err
		}
	}
	return notes, nil
}

// ReadFile calls fn with every record f selects in the file at path, of
// the binary format or the older JSON-lines one (a history.jsonl file,
// or what lvsctl history -o json prints), told apart by their first
// bytes. What is not a record is skipped and returned as notes: in a
// binary file, a frame that fails its checksum or is cut short (a write
// in progress, or a crash), a record that does not decode, the whole
// file when it is of a newer format version; in JSON lines, a line that
// is not a record of this SchemaVersion and a last line without its
// newline. The error is for a file that cannot be read. A file that
// does not exist (rotated away since it was listed) holds no record.
func ReadFile(path string, f Filter, fn func(Record)) ([]Skipped, error) {
	file, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("history: %w", err)
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, maxLine)
	head, err := r.Peek(len(fileMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	if len(head) > 0 && string(head) == fileMagic[:len(head)] { // a header cut short too
		return readBinary(path, file, f, fn)
	}
	return readJSON(path, r, f, fn)
}

// maxLine bounds a line of a JSON-lines file: a reader holds no more.
const maxLine = 1 << 20

func readJSON(path string, r *bufio.Reader, f Filter, fn func(Record)) ([]Skipped, error) {
	var notes []Skipped
	for n := 1; ; n++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err == nil {
				notes = append(notes, Skipped{File: path, Line: n, Why: fmt.Sprintf("not a history record: a line longer than %d bytes", maxLine)})
				continue
			}
			line = []byte("cut")
		}
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				notes = append(notes, Skipped{File: path, Line: n, Why: "incomplete last line (a write in progress, or cut short by a crash)"})
			}
			return notes, nil
		}
		if err != nil {
			return notes, fmt.Errorf("history: %s: %w", path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !f.quick(line) {
			// Another server's record, unless the line is cut short:
			// that one is noted whatever the filter.
			if !bytes.HasSuffix(line, []byte("}\n")) {
				notes = append(notes, Skipped{File: path, Line: n, Why: "not a history record: cut short"})
			}
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			notes = append(notes, Skipped{File: path, Line: n, Why: fmt.Sprintf("not a history record: %v", err)})
			continue
		}
		if rec.V != SchemaVersion {
			notes = append(notes, Skipped{File: path, Line: n, Why: fmt.Sprintf("schema version %d, this reader knows %d", rec.V, SchemaVersion)})
			continue
		}
		if f.match(&rec) {
			fn(rec)
		}
	}
}

// readBinary reads a file of the binary format. What it holds at once
// is one frame, never more than maxFrame nor more than the file has
// left: a crafted length cannot make it allocate more. After damage it
// looks for the next frame by its marker and checksum, reading at most
// maxResync bytes of candidates in all.
func readBinary(path string, file *os.File, f Filter, fn func(Record)) ([]Skipped, error) {
	br := &binReader{file: file}
	var notes []Skipped
	note := func(off int64, format string, a ...any) {
		notes = append(notes, Skipped{File: path, Offset: off, Why: fmt.Sprintf(format, a...)})
	}
	fail := func(err error) ([]Skipped, error) { return notes, fmt.Errorf("history: %s: %w", path, err) }
	var hdr [headerLen]byte
	if n, err := file.ReadAt(hdr[:], 0); n < headerLen {
		if errors.Is(err, io.EOF) {
			note(0, "header cut short (a file being started, or cut short by a crash)")
			return notes, nil
		}
		return fail(err)
	}
	if v := binary.LittleEndian.Uint32(hdr[len(fileMagic):]); v != FormatVersion {
		note(0, "history format version %d, this reader knows %d (written by a newer lvs-monitor?): the whole file", v, FormatVersion)
		return notes, nil
	}
	for off := int64(headerLen); ; {
		payload, why, err := br.frame(off)
		if err != nil {
			return fail(err)
		}
		if payload != nil {
			notes = decodeFrame(path, off, payload, f, fn, notes)
			off += frameHeaderLen + int64(len(payload))
			continue
		}
		if why == "" { // the end
			return notes, nil
		}
		next, err := br.resync(off + 1)
		if err != nil {
			return fail(err)
		}
		switch {
		case next > 0:
			note(off, "%d bytes up to the next frame: %s", next-off, why)
			off = next
		case br.gaveUp:
			note(off, "%s; the rest of the file, too damaged to look for more frames", why)
			return notes, nil
		case why == whyCut:
			note(off, "incomplete last frame (a write in progress, or cut short by a crash)")
			return notes, nil
		default:
			note(off, "%s; no frame after it", why)
			return notes, nil
		}
	}
}

const (
	whyCut = "a frame cut short"
	// maxResync bounds the bytes read looking for a frame after damage.
	maxResync = 64 << 20
)

// binReader reads the frames of a binary history file.
type binReader struct {
	file    *os.File
	size    int64 // the file's size when last looked at
	buf     []byte
	read    int64 // bytes read for candidates while resyncing
	gaveUp  bool
	probing bool
}

// frame returns the payload of the frame at off; or nil and why there is
// none ("" at the end of the file).
func (br *binReader) frame(off int64) ([]byte, string, error) {
	var fh [frameHeaderLen]byte
	n, err := br.file.ReadAt(fh[:], off)
	if n < frameHeaderLen {
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return nil, "", nil
			}
			return nil, whyCut, nil
		}
		return nil, "", err
	}
	if string(fh[:len(frameMarker)]) != frameMarker {
		return nil, "not a frame", nil
	}
	l := int64(binary.LittleEndian.Uint32(fh[4:]))
	if l == 0 || l > maxFrame {
		return nil, fmt.Sprintf("frame of %d bytes: not a history frame", l), nil
	}
	if off+frameHeaderLen+l > br.size {
		fi, err := br.file.Stat()
		if err != nil {
			return nil, "", err
		}
		if br.size = fi.Size(); off+frameHeaderLen+l > br.size {
			return nil, whyCut, nil
		}
	}
	if br.probing {
		if br.read += l; br.read > maxResync {
			br.gaveUp = true
			return nil, "", nil
		}
	}
	if int64(cap(br.buf)) < l {
		br.buf = make([]byte, l)
	}
	p := br.buf[:l]
	if _, err := br.file.ReadAt(p, off+frameHeaderLen); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, whyCut, nil
		}
		return nil, "", err
	}
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(fh[8:]) {
		return nil, fmt.Sprintf("frame of %d bytes fails its checksum (corrupt)", l), nil
	}
	return p, "", nil
}

// resync returns where the first whole frame at or after off starts, or 0
// when there is none (or gaveUp).
func (br *binReader) resync(off int64) (int64, error) {
	chunk := make([]byte, 64<<10)
	br.probing = true
	defer func() { br.probing = false }()
	for !br.gaveUp {
		n, err := br.file.ReadAt(chunk, off)
		if n < len(frameMarker) {
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
			return 0, nil
		}
		for i := 0; ; {
			j := bytes.Index(chunk[i:n], []byte(frameMarker))
			if j < 0 {
				break
			}
			at := off + int64(i+j)
			p, _, err := br.frame(at)
			if err != nil {
				return 0, err
			}
			if p != nil {
				return at, nil
			}
			if br.gaveUp {
				return 0, nil
			}
			i += j + 1
		}
		if n < len(chunk) {
			return 0, nil
		}
		off += int64(n - len(frameMarker) + 1)
	}
	return 0, nil
}

// decodeFrame calls fn with the records of a frame's payload that f
// selects, noting those that do not decode.
func decodeFrame(path string, off int64, payload []byte, f Filter, fn func(Record), notes []Skipped) []Skipped {
	p := payload
	for i := 1; len(p) > 0; i++ {
		at := off + frameHeaderLen + int64(len(payload)-len(p))
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return append(notes, Skipped{File: path, Offset: at, Why: fmt.Sprintf("record %d of the frame at byte %d: length cut short; the rest of the frame", i, off)})
		}
		rec, err := decodeRecord(p[n : n+int(l)])
		p = p[n+int(l):]
		if err != nil {
			notes = append(notes, Skipped{File: path, Offset: at, Why: fmt.Sprintf("record %d of the frame at byte %d: %v", i, off, err)})
			continue
		}
		if f.match(&rec) {
			fn(rec)
		}
	}
	return notes
}
