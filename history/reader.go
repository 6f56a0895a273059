package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// Skipped is a line Read left out, and why.
type Skipped struct {
	File string
	Line int
	Why  string
}

func (s Skipped) String() string { return fmt.Sprintf("%s:%d: skipped: %s", s.File, s.Line, s.Why) }

// Files returns the history files in dir, oldest first: history.jsonl.N …
// history.jsonl.1, then history.jsonl; those that do not exist are left
// out.
func Files(dir string) ([]string, error) {
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
		case name == FileName:
			list = append(list, numbered{0, name})
		case strings.HasPrefix(name, FileName+"."):
			n, err := strconv.Atoi(name[len(FileName)+1:])
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
// oldest first. Lines that are not a record of this SchemaVersion, and a
// last line without its newline (a write in progress, or cut short by a
// crash), are skipped and returned as notes. The error is for a directory
// or file that cannot be read; Read stops at it.
func Read(dir string, f Filter, fn func(Record)) ([]Skipped, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	var notes []Skipped
	for _, path := range files {
		n, err := readFile(path, f, fn)
		notes = append(notes, n...)
		if err != nil {
			return notes, err
		}
	}
	return notes, nil
}

func readFile(path string, f Filter, fn func(Record)) ([]Skipped, error) {
	file, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // rotated away since it was listed
		}
		return nil, fmt.Errorf("history: %w", err)
	}
	defer file.Close()
	var notes []Skipped
	r := bufio.NewReaderSize(file, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
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
