package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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

// Writer appends records to DIR/history.bin, in frames of the binary
// format, and rotates it by rename before a frame would take it past
// MaxSize: history.bin becomes history.bin.1, .1 becomes .2, and so on;
// the oldest beyond Files is removed, files of the older JSON-lines
// format (history.jsonl…) counting as older than all of them. Each Write
// is one write(2) per file touched, never fsynced: a crash or power loss
// loses at most the last cycle, and leaves at most one partial frame,
// which Read skips (finding the next frame by its marker and checksum).
// A Writer is not safe for concurrent use.
type Writer struct {
	dir   *statedir.Dir
	lim   Limits
	f     *os.File // nil after a failure: the next Write reopens
	size  int64    // bytes in the current file
	buf   []byte   // frames not yet written
	frame int      // start of the open frame in buf; -1: none
	rec   []byte   // the record being encoded
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileHeader is what every binary history file starts with.
func fileHeader() []byte {
	return binary.LittleEndian.AppendUint32([]byte(fileMagic), FormatVersion)
}

// errForeignFile is a current file that is not of this format version.
var errForeignFile = errors.New("not a history file of this format version")

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
	w := &Writer{dir: d, lim: lim, frame: -1}
	err = w.prune()
	if err == nil {
		err = w.open(true)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return w, nil
}

// prune removes the rotated files beyond Limits.Files, left by a run
// that kept more, or of the older format (older than every file of this
// one).
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

// open opens the current file. A header cut short (a crash as the file
// was started) is cut off; an empty file gets its header with the first
// frame, so that a history never written to stays empty. A current file
// that does not start with this format's header (a newer lvs-monitor ran
// here) is rotated away, for its readers, when rotateForeign is set (at
// Open), else refused: the file changed under the writer.
func (w *Writer) open(rotateForeign bool) error {
	for range 2 {
		f, err := w.dir.OpenFile(FileName, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("open history: %w", err)
		}
		size, err := checkHeader(f)
		if errors.Is(err, errForeignFile) && rotateForeign {
			f.Close()
			if err := w.shift(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("open history %s: %w", w.Path(), err)
		}
		w.f, w.size = f, size
		return nil
	}
	return fmt.Errorf("open history %s: %w", w.Path(), errForeignFile)
}

// checkHeader returns the size of f, after cutting off a header cut
// short; a file that does not start with this format's header is
// errForeignFile.
func checkHeader(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if size == 0 {
		return 0, nil
	}
	want := fileHeader()
	hdr := make([]byte, min(size, int64(len(want))))
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return 0, fmt.Errorf("read its header: %w", err)
	}
	if !bytes.Equal(hdr, want[:len(hdr)]) {
		return 0, errForeignFile
	}
	if len(hdr) < len(want) {
		if err := f.Truncate(0); err != nil {
			return 0, fmt.Errorf("cut off its partial header: %w", err)
		}
		return 0, nil
	}
	return size, nil
}

// Write appends recs, rotating as needed. A record that cannot be
// encoded (a figure that is not finite, a text longer than 64 KiB) is
// left out and reported; a disk error drops the rest of the batch, and
// the next Write reopens the file. The error joins every failure.
func (w *Writer) Write(recs []Record) error {
	if w.f == nil {
		if err := w.open(false); err != nil {
			return err
		}
	}
	var errs []error
	w.buf, w.frame = w.buf[:0], -1
	if w.size == 0 {
		w.buf = append(w.buf, fileHeader()...)
	}
	for i := range recs {
		var err error
		w.rec, err = appendRecord(w.rec[:0], &recs[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("history record %s %s: %w", recs[i].Service, recs[i].Server, err))
			continue
		}
		add := int64(uvarintLen(len(w.rec)) + len(w.rec))
		newFrame := w.frame < 0 || len(w.buf)-w.frame-frameHeaderLen+int(add) > frameTarget
		if newFrame {
			add += frameHeaderLen
		}
		if w.size+int64(len(w.buf))+add > w.lim.MaxSize && w.size+int64(len(w.buf)) > int64(headerLen) {
			if err := w.flush(); err != nil {
				return errors.Join(append(errs, err)...)
			}
			if err := w.rotate(); err != nil {
				return errors.Join(append(errs, err)...)
			}
			w.buf = append(w.buf, fileHeader()...)
			newFrame = true
		}
		if newFrame {
			w.closeFrame()
			w.frame = len(w.buf)
			w.buf = append(w.buf, frameMarker...)
			w.buf = append(w.buf, make([]byte, frameHeaderLen-len(frameMarker))...)
		}
		w.buf = binary.AppendUvarint(w.buf, uint64(len(w.rec)))
		w.buf = append(w.buf, w.rec...)
	}
	if err := w.flush(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// closeFrame sets the open frame's length and checksum.
func (w *Writer) closeFrame() {
	if w.frame < 0 {
		return
	}
	payload := w.buf[w.frame+frameHeaderLen:]
	binary.LittleEndian.PutUint32(w.buf[w.frame+4:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(w.buf[w.frame+8:], crc32.Checksum(payload, castagnoli))
	w.frame = -1
}

// flush writes the pending frames to the current file.
func (w *Writer) flush() error {
	w.closeFrame()
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
	if err := w.shift(); err != nil {
		return err
	}
	if err := w.prune(); err != nil {
		return err
	}
	return w.open(false)
}

// shift renames the current file to .1, .1 to .2, and so on, removing
// the one beyond Files.
func (w *Writer) shift() error {
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
	return nil
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
