package scheduler

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/google/renameio/v2"
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
	b, err := os.ReadFile(s.path)
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
	if err := renameio.WriteFile(s.path, []byte(strconv.FormatUint(e, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write epoch file: %w", err)
	}
	dir, err := os.Open(filepath.Dir(s.path))
	if err != nil {
		return fmt.Errorf("sync epoch directory: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync epoch directory: %w", err)
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
