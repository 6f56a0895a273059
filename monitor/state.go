package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

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

// FileStore keeps State in one JSON file, written atomically (a temporary
// file in the same directory, fsync, rename, fsync of the directory).
type FileStore struct {
	Path string
}

// NewFileStore returns a store for DIR/state.json, creating DIR (0700) if
// needed.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return &FileStore{Path: filepath.Join(dir, "state.json")}, nil
}

// Load reads the state file. A missing file returns an empty State and an
// error wrapping fs.ErrNotExist; an unreadable or malformed one returns an
// empty State and an error wrapping ErrCorruptState. In both cases the
// caller starts safe: every destination is unknown, so an unexplained
// weight 0 is taken for an operator drain.
func (s *FileStore) Load() (State, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, fmt.Errorf("state file %s: %w", s.Path, err)
	}
	if err != nil {
		return State{}, fmt.Errorf("state file %s: %w: %w", s.Path, ErrCorruptState, err)
	}
	st, err := decodeState(data)
	if err != nil {
		return State{}, fmt.Errorf("state file %s: %w", s.Path, err)
	}
	return st, nil
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

// Save writes the state atomically and durably.
func (s *FileStore) Save(st State) error {
	data, err := encodeState(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if err := renameio.WriteFile(s.Path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	// renameio syncs the file; sync the directory so the rename survives a
	// power loss too.
	dir, err := os.Open(filepath.Dir(s.Path))
	if err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	return nil
}
