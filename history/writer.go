package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"lvs-feedback/internal/statedir"
)

// Limits bound the history on disk: at most Files files of at most
// MaxSize bytes each, the current one included.
type Limits struct {
	MaxSize int64
	Files   int
}

// Check reports what is wrong with l, or nil.
func (l Limits) Check() error {
	if l.MaxSize < 4096 {
		return fmt.Errorf("history file size %d bytes: must be at least 4096", l.MaxSize)
	}
	if l.Files < 2 {
		return fmt.Errorf("history files %d: must be at least 2 (the current file and one rotated)", l.Files)
	}
	return nil
}

// Writer appends records to DIR/history.jsonl and rotates it by rename
// before a line would take it past MaxSize: history.jsonl becomes
// history.jsonl.1, .1 becomes .2, and so on; the oldest beyond Files is
// removed. Each Write is one write(2) per file touched, never fsynced: a
// crash or power loss loses at most the last cycle, and leaves at most one
// partial last line, which Read skips and the next Open ends with a
// newline. A Writer is not safe for concurrent use.
type Writer struct {
	dir  *statedir.Dir
	lim  Limits
	f    *os.File // nil after a failure: the next Write reopens
	size int64    // bytes in the current file
	buf  []byte
}

// Open opens the history in dir for appending. dir must exist and be
// private (statedir.Open: no other user can write it); the files are
// reached through the checked directory, never through a link, and
// created 0600.
func Open(dir string, lim Limits) (*Writer, error) {
	if err := lim.Check(); err != nil {
		return nil, err
	}
	d, err := statedir.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	w := &Writer{dir: d, lim: lim}
	err = w.prune()
	if err == nil {
		err = w.open()
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return w, nil
}

// prune removes the rotated files beyond Limits.Files, left by a run
// that kept more.
func (w *Writer) prune() error {
	files, err := Files(w.dir.Path())
	if err != nil {
		return err
	}
	// Files lists the current file last and the rotated ones oldest
	// first: all but the newest Files-1 rotated ones go.
	rotated := len(files)
	if rotated > 0 && filepath.Base(files[rotated-1]) == FileName {
		rotated--
	}
	for _, path := range files[:max(0, rotated-(w.lim.Files-1))] {
		if err := w.dir.Remove(filepath.Base(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("history: remove %s beyond the files kept: %w", path, err)
		}
	}
	return nil
}

// Path is the current history file.
func (w *Writer) Path() string { return w.dir.Join(FileName) }

// open opens the current file and, if its last line was cut short (a
// crash in the middle of a write), ends it, so that the next record
// starts a line of its own and only the cut one is lost.
func (w *Writer) open() error {
	f, err := w.dir.OpenFile(FileName, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open history: %w", err)
	}
	size := fi.Size()
	if size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, size-1); err != nil {
			f.Close()
			return fmt.Errorf("open history: read its last byte: %w", err)
		}
		if last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return fmt.Errorf("open history: end its cut last line: %w", err)
			}
			size++
		}
	}
	w.f, w.size = f, size
	return nil
}

// Write appends recs, one line each, rotating as needed. A record that
// cannot be encoded is left out and reported; a disk error drops the
// rest of the batch, and the next Write reopens the file. The error joins
// every failure.
func (w *Writer) Write(recs []Record) error {
	if w.f == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	var errs []error
	w.buf = w.buf[:0]
	for i := range recs {
		line, err := json.Marshal(&recs[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("history record %s %s: %w", recs[i].Service, recs[i].Server, err))
			continue
		}
		line = append(line, '\n')
		if w.size+int64(len(w.buf)+len(line)) > w.lim.MaxSize && w.size+int64(len(w.buf)) > 0 {
			if err := w.flush(); err != nil {
				return errors.Join(append(errs, err)...)
			}
			if err := w.rotate(); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		w.buf = append(w.buf, line...)
	}
	if err := w.flush(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// flush writes the pending lines to the current file.
func (w *Writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.f.Write(w.buf)
	w.size += int64(n)
	w.buf = w.buf[:0]
	if err != nil {
		w.f.Close()
		w.f = nil
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// rotate shifts the files by one and starts an empty current file.
func (w *Writer) rotate() error {
	if err := w.f.Close(); err != nil {
		w.f = nil
		return fmt.Errorf("rotate history: %w", err)
	}
	w.f = nil
	numbered := func(i int) string { return FileName + "." + strconv.Itoa(i) }
	if err := w.dir.Remove(numbered(w.lim.Files - 1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotate history: %w", err)
	}
	for i := w.lim.Files - 2; i >= 1; i-- {
		if err := w.dir.Rename(numbered(i), numbered(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate history: %w", err)
		}
	}
	if err := w.dir.Rename(FileName, numbered(1)); err != nil {
		return fmt.Errorf("rotate history: %w", err)
	}
	return w.open()
}

// Close closes the current file and the directory.
func (w *Writer) Close() error {
	var err error
	if w.f != nil {
		if err = w.f.Close(); err != nil {
			err = fmt.Errorf("close history: %w", err)
		}
		w.f = nil
	}
	if w.dir != nil {
		err = errors.Join(err, w.dir.Close())
		w.dir = nil
	}
	return err
}
