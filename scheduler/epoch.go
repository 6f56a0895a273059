package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"lvs-feedback/replica"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/google/renameio/v2"

	"lvs-feedback/internal/statedir"
)

// EpochStore keeps the director's epoch in a small file, written atomically
// and durably (temporary file, fsync, rename, fsync of the directory), so
// that a restarted director never reuses an epoch. It is safe for
// concurrent use.
type EpochStore struct {
	path string
	mu   sync.Mutex
}

// NewEpochStore returns a store for the file at path (e.g.
// /var/lib/lvs-monitor/epoch). The directory must exist.
func NewEpochStore(path string) *EpochStore { return &EpochStore{path: path} }

// ErrCorruptEpoch means the epoch file exists but cannot be read as an
// epoch. The director must not guess: reusing an epoch would make peers
// reject its messages as replays, or let an old state win.
var ErrCorruptEpoch = errors.New("epoch file unusable")

// Load returns the stored epoch, 0 when the file does not exist.
func (s *EpochStore) Load() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load()
}

func (s *EpochStore) load() (uint64, error) {
	b, err := statedir.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("epoch file %s: %w", s.path, err)
	}
	text := strings.TrimSpace(string(b))
	e, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("epoch file %s: %w: %q is not a whole number (remove the file only if every peer is stopped or its epoch is known)", s.path, ErrCorruptEpoch, text)
	}
	return e, nil
}

// Save stores e. It refuses to move the epoch backwards.
func (s *EpochStore) Save(e uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.load()
	if err != nil {
		return err
	}
	if e < cur {
		return fmt.Errorf("epoch file %s: refusing to store epoch %d below the stored %d", s.path, e, cur)
	}
	return s.save(e)
}

func (s *EpochStore) save(e uint64) error {
	if err := writeDurably(s.path, []byte(strconv.FormatUint(e, 10)+"\n")); err != nil {
		return fmt.Errorf("epoch file: %w", err)
	}
	return nil
}

// writeDurably replaces the file at path with data: a temporary file,
// fsync, rename, fsync of the directory — after a crash the file holds
// either the old or the new content, never a mix, and not the old one once
// writeDurably has returned.
func writeDurably(path string, data []byte) error {
	if err := renameio.WriteFile(path, data, 0o600, renameio.WithTempDir(filepath.Dir(path))); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("sync directory of %s: %w", path, err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync directory of %s: %w", path, err)
	}
	return nil
}

// Bump stores and returns the stored epoch plus one. Call it once at start.
func (s *EpochStore) Bump() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.load()
	if err != nil {
		return 0, err
	}
	if cur == ^uint64(0) {
		return 0, fmt.Errorf("epoch file %s: epoch space exhausted", s.path)
	}
	if err := s.save(cur + 1); err != nil {
		return 0, err
	}
	return cur + 1, nil
}

// AppliedStore keeps a writer's record of the operator edits it applied
// for each follower (Node.Applied) in a small JSON file, written like the
// epoch file, so that a restarted writer never applies an edit twice. It is
// safe for concurrent use.
type AppliedStore struct {
	path string
	mu   sync.Mutex
}

// NewAppliedStore returns a store for the file at path (e.g.
// /var/lib/lvs-monitor/sync-applied). The directory must exist.
func NewAppliedStore(path string) *AppliedStore { return &AppliedStore{path: path} }

// ErrCorruptApplied means the file exists but cannot be read. The director
// must not guess: an empty record could apply a follower's edit again.
var ErrCorruptApplied = errors.New("applied-edits file unusable")

type appliedFile struct {
	Version int                        `json:"version"`
	Applied map[string]replica.EditPos `json:"applied"`
}

// Load returns the stored record, empty when the file does not exist.
func (s *AppliedStore) Load() (map[string]replica.EditPos, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := statedir.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]replica.EditPos{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("applied-edits file %s: %w", s.path, err)
	}
	var f appliedFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 {
		if err == nil {
			err = fmt.Errorf("version %d", f.Version)
		}
		return nil, fmt.Errorf("applied-edits file %s: %w: %w (remove it only if no follower has an edit pending)", s.path, ErrCorruptApplied, err)
	}
	if f.Applied == nil {
		f.Applied = map[string]replica.EditPos{}
	}
	return f.Applied, nil
}

// Save stores the record.
func (s *AppliedStore) Save(applied map[string]replica.EditPos) error {
	b, err := json.Marshal(appliedFile{Version: 1, Applied: applied})
	if err != nil {
		return fmt.Errorf("applied-edits file: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := writeDurably(s.path, append(b, '\n')); err != nil {
		return fmt.Errorf("applied-edits file: %w", err)
	}
	return nil
}
