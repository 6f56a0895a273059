package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/renameio/v2"

	"lvs-feedback/internal/statedir"
	"lvs-feedback/ipvs"
	"lvs-feedback/policy"
)

// DestKey names one destination of one service.
type DestKey struct {
	Service ipvs.ServiceKey
	Dest    netip.AddrPort
}

func (k DestKey) String() string { return k.Service.String() + " " + k.Dest.String() }

// State is the persisted knowledge of who owns which weight.
type State map[DestKey]policy.DestRecord

// Store loads and saves State. FileStore is the implementation used by
// lvs-monitor; tests may use their own.
type Store interface {
	Load() (State, error)
	Save(State) error
}

// stateFileVersion is the format version of the state file.
const stateFileVersion = 1

// stateFile is the JSON form of State: services → destinations → record.
type stateFile struct {
	Version      int                                     `json:"version"`
	Destinations map[string]map[string]policy.DestRecord `json:"destinations"`
}

// ErrCorruptState wraps every reason a state file cannot be used.
var ErrCorruptState = errors.New("state file unusable")

// CorruptStateError is FileStore.Load's error for a state file that exists
// but cannot be used. Load moves such a file aside before the next Save
// replaces it, so that it can be looked at or restored by hand; the
// error's text says where it went.
type CorruptStateError struct {
	Path    string // the state file
	Kept    string // where it was moved; "" if it could not be (or ReadOnly)
	KeepErr error  // why it could not be moved, when Kept is ""
	Err     error  // what is wrong with it; wraps ErrCorruptState
	// Previous is the copy of the last save (PATH.prev) whose records Load
	// returned instead; "" when there was none that could be read.
	Previous string
}

func (e *CorruptStateError) Error() string {
	msg := fmt.Sprintf("state file %s: %v", e.Path, e.Err)
	switch {
	case e.Kept != "":
		msg += "; kept as " + e.Kept
	case e.KeepErr != nil:
		msg = fmt.Sprintf("%s; could not keep it aside (%v): the next save replaces it", msg, e.KeepErr)
	}
	if e.Previous != "" {
		msg += "; its copy " + e.Previous + " is used instead"
	}
	return msg
}

func (e *CorruptStateError) Unwrap() error { return e.Err }

// FileStore keeps State in one JSON file, written atomically (a temporary
// file in the same directory, fsync, rename, fsync of the directory).
//
// Each save writes a second copy, PATH.prev, so that a state file damaged
// later (a disk error, a hand edit) loses nothing.
type FileStore struct {
	Path string
	// ReadOnly: Load leaves an unusable file where it is and Save refuses
	// (lvs-monitor -dry-run).
	ReadOnly bool
	now      func() time.Time // names the copies of unusable files; nil: time.Now
}

// NewFileStore returns a store for DIR/state.json, creating DIR (0700) if
// needed. It refuses a DIR that another user could write or replace
// (statedir.Check): they could plant links where the monitor writes.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := statedir.Check(dir); err != nil {
		return nil, err
	}
	return &FileStore{Path: statePath(dir)}, nil
}

// NewReadOnlyFileStore returns a read-only store for DIR/state.json for a
// dry run: it creates nothing, not even DIR, reads the file if there is one
// and leaves an unusable one where it is.
func NewReadOnlyFileStore(dir string) *FileStore {
	return &FileStore{Path: statePath(dir), ReadOnly: true}
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

// Load reads the state file. A missing file returns an empty State and an
// error wrapping fs.ErrNotExist; an unreadable or malformed one returns an
// empty State and a *CorruptStateError (wrapping ErrCorruptState), after
// moving the file to PATH.corrupt-<UTC time> (with .1, .2… if that name
// is taken: an earlier copy is never replaced; not when ReadOnly). Then,
// if the last save's copy (PATH.prev) reads, its records come back with
// the error (CorruptStateError.Previous says so); otherwise, as for a missing
// file, the caller starts safe: every destination is unknown, so an
// unexplained weight 0 is taken for an operator drain.
func (s *FileStore) Load() (State, error) {
	data, err := statedir.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, fmt.Errorf("state file %s: %w", s.Path, err)
	}
	if err == nil {
		var st State
		if st, err = decodeState(data); err == nil {
			return st, nil
		}
	} else {
		err = fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	ce := &CorruptStateError{Path: s.Path, Err: err}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	if !s.ReadOnly {
		ce.Kept, ce.KeepErr = keepAside(s.Path, now())
	}
	if data, err := statedir.ReadFile(s.previous()); err == nil {
		if st, err := decodeState(data); err == nil {
			ce.Previous = s.previous()
			return st, ce
		}
	}
	return State{}, ce
}

// previous is the name of the last save's copy.
func (s *FileStore) previous() string { return s.Path + ".prev" }

// keepAside moves the file at path to path.corrupt-<UTC time>, or that
// name with .1, .2… if taken, and returns the name it got. A hard link
// cannot replace an existing name, so no earlier copy is lost; where a
// hard link is not possible (a directory, a file of another user under
// fs.protected_hardlinks) it renames to a name it has just seen free, in
// the state directory, which only the monitor writes.
func keepAside(path string, at time.Time) (string, error) {
	base := path + ".corrupt-" + at.UTC().Format("20060102T150405Z")
	for i := 0; i < 1000; i++ {
		aside := base
		if i > 0 {
			aside = base + "." + strconv.Itoa(i)
		}
		err := os.Link(path, aside)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			err = os.Remove(path)
		} else if _, serr := os.Lstat(aside); serr == nil {
			continue
		} else if errors.Is(serr, fs.ErrNotExist) {
			err = os.Rename(path, aside)
		} else {
			err = serr
		}
		if err != nil {
			return "", fmt.Errorf("move to %s: %w", aside, err)
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			return "", err
		}
		return aside, nil
	}
	return "", fmt.Errorf("no free name %s[.N]", base)
}

// syncDir makes the renames in dir survive a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	return nil
}

func decodeState(data []byte) (State, error) {
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	if f.Version != stateFileVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorruptState, f.Version, stateFileVersion)
	}
	st := State{}
	for svcText, dests := range f.Destinations {
		svc, err := ipvs.ParseServiceKey(svcText)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorruptState, err)
		}
		for dstText, rec := range dests {
			dst, err := netip.ParseAddrPort(dstText)
			if err != nil {
				return nil, fmt.Errorf("%w: destination %q: %w", ErrCorruptState, dstText, err)
			}
			switch rec.State {
			case policy.Managed, policy.DrainedByOperator, policy.Down:
			default:
				return nil, fmt.Errorf("%w: %s %s: unknown state %q", ErrCorruptState, svcText, dstText, rec.State)
			}
			if !rec.SetBy.Valid() {
				return nil, fmt.Errorf("%w: %s %s: unknown set_by %q", ErrCorruptState, svcText, dstText, rec.SetBy)
			}
			if rec.Written < 0 || rec.Written > ipvs.MaxWeight {
				return nil, fmt.Errorf("%w: %s %s: weight %d out of range", ErrCorruptState, svcText, dstText, rec.Written)
			}
			st[DestKey{Service: svc, Dest: dst}] = rec
		}
	}
	return st, nil
}

func encodeState(st State) ([]byte, error) {
	f := stateFile{Version: stateFileVersion, Destinations: map[string]map[string]policy.DestRecord{}}
	for k, rec := range st {
		svc := k.Service.String()
		if f.Destinations[svc] == nil {
			f.Destinations[svc] = map[string]policy.DestRecord{}
		}
		f.Destinations[svc][k.Dest.String()] = rec
	}
	return json.Marshal(f)
}

// Save writes the state atomically and durably. The temporary file is
// made in the state directory itself: renameio would otherwise use
// $TMPDIR when it is on the same file system, which may be cleaned or
// shared, and whose entries the state directory's fsync does not cover.
func (s *FileStore) Save(st State) error {
	if s.ReadOnly {
		return fmt.Errorf("state file %s: read-only (dry run)", s.Path)
	}
	data, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	dir := filepath.Dir(s.Path)
	data = append(data, '\n')
	if err := renameio.WriteFile(s.Path, data, 0o600, renameio.WithTempDir(dir)); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	// A second, separate copy (not a link: a file damaged in place would
	// take a link with it), so that damage to one costs nothing.
	if err := renameio.WriteFile(s.previous(), data, 0o600, renameio.WithTempDir(dir)); err != nil {
		return fmt.Errorf("write the state file's copy: %w", err)
	}
	// renameio syncs the file; sync the directory so the rename survives a
	// power loss too.
	return syncDir(dir)
}
