package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
)

// clone copies c deeply enough that neither copy can change the other through its Token, Scopes
// or Client: a store handing out or keeping the caller's pointers would let a caller that edits
// its copy (to add a scope, say) change what is stored without a Save.
func (c *Credentials) clone() *Credentials {
	if c == nil {
		return nil
	}
	d := *c
	if c.Token != nil {
		// Token's unexported extra fields are never mutated in place by oauth2, so a value copy
		// is enough.
		t := *c.Token
		d.Token = &t
	}
	d.Scopes = slices.Clone(c.Scopes)
	if c.Client != nil {
		ci := *c.Client
		d.Client = &ci
	}
	return &d
}

// MemoryStore is a [TokenStore] that keeps credentials in memory, for a process that authorizes
// anew each run, and for tests. It is safe for concurrent use.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]*Credentials
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{m: make(map[string]*Credentials)}
}

// Load returns a copy of the credentials saved under key, or (nil, nil).
func (s *MemoryStore) Load(_ context.Context, key string) (*Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key].clone(), nil
}

// Save stores a copy of c under key; nil deletes.
func (s *MemoryStore) Save(_ context.Context, key string, c *Credentials) error {
	c = c.clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == nil {
		delete(s.m, key)
	} else {
		s.m[key] = c
	}
	return nil
}

var (
	// ErrInsecureTokenFile is matched (errors.Is) by an [*InsecureTokenFileError].
	ErrInsecureTokenFile = errors.New("oauth: token file is accessible to other users")
	// ErrCorruptTokenFile is matched (errors.Is) by a [*CorruptTokenFileError].
	ErrCorruptTokenFile = errors.New("oauth: token file is not valid JSON")
)

// InsecureTokenFileError is returned by a [FileStore] whose file grants group or other users any
// permission. Such tokens may have been read by, or planted by, another user, so the store
// neither uses nor overwrites them: the user must remove the file or chmod it 0600.
type InsecureTokenFileError struct {
	Path string
	Mode fs.FileMode
}

func (e *InsecureTokenFileError) Error() string {
	return fmt.Sprintf("oauth: token file %s has mode %v, which other users can access; want -rw------- (0600)", e.Path, e.Mode.Perm())
}

// Is reports whether target is [ErrInsecureTokenFile].
func (e *InsecureTokenFileError) Is(target error) bool { return target == ErrInsecureTokenFile }

// CorruptTokenFileError is returned by a [FileStore] whose file does not parse. The store does
// not start afresh, which would drop every other server's credentials; the user decides.
type CorruptTokenFileError struct {
	Path string
	Err  error // the decoding error
}

func (e *CorruptTokenFileError) Error() string {
	return fmt.Sprintf("oauth: token file %s is not valid JSON: %v", e.Path, e.Err)
}

// Unwrap returns the decoding error.
func (e *CorruptTokenFileError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrCorruptTokenFile].
func (e *CorruptTokenFileError) Is(target error) bool { return target == ErrCorruptTokenFile }

// FileStore is a [TokenStore] for command-line programs: one JSON file, mode 0600, mapping each
// key to its credentials, so that a user authorizes once and later runs reuse the tokens.
//
// Within a process, Load and Save are serialized by a mutex held across the file I/O (the only
// lock in this package held across I/O), and Save reads the file, changes one key and writes it
// back, so concurrent saves of different keys all survive. Across processes there is no lock: a
// write is atomic (a temporary file renamed over the old one), so a reader never sees half a
// file, but when two processes save at once the last rename wins and the other save is lost,
// which costs at most one more authorization.
//
// A missing file holds no credentials. A file that other users can access gives an
// [*InsecureTokenFileError] (on Unix), and one that does not parse a [*CorruptTokenFileError];
// both from Save as well as Load, which never overwrites such a file.
type FileStore struct {
	path string
	mu   sync.Mutex
}

// NewFileStore returns a FileStore keeping credentials in the file at path, which is created,
// along with its directory (mode 0700), on the first Save.
func NewFileStore(path string) *FileStore {
	return &FileStore{path: path}
}

// DefaultFileStorePath is the per-user token file: tokens.json in an mcpclient directory under
// [os.UserConfigDir].
func DefaultFileStorePath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("oauth: no directory for the token file: %w", err)
	}
	return filepath.Join(dir, "mcpclient", "tokens.json"), nil
}

// Load returns the credentials saved under key, or (nil, nil).
func (s *FileStore) Load(ctx context.Context, key string) (*Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := s.read()
	if err != nil {
		return nil, err
	}
	return m[key], nil
}

// Save replaces the credentials under key, keeping the other keys; nil deletes.
func (s *FileStore) Save(ctx context.Context, key string, c *Credentials) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := s.read()
	if err != nil {
		return err
	}
	if c == nil {
		if _, ok := m[key]; !ok {
			return nil // nothing to delete; don't create a file for it
		}
		delete(m, key)
	} else {
		m[key] = c
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("oauth: encoding credentials: %w", err)
	}
	return s.write(append(data, '\n'))
}

// read returns the file's map; a missing or empty file is an empty map.
func (s *FileStore) read() (map[string]*Credentials, error) {
	m := make(map[string]*Credentials)
	f, err := os.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oauth: reading token file: %w", err)
	}
	defer f.Close()
	// The mode comes from the open file, not the path, so it is the mode of what is read.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("oauth: reading token file: %w", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, &InsecureTokenFileError{Path: s.path, Mode: fi.Mode()}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("oauth: reading token file: %w", err)
	}
	// An empty file holds nothing that a rewrite could lose (touch, or a crash of a
	// non-atomic writer).
	if len(bytes.TrimSpace(data)) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &CorruptTokenFileError{Path: s.path, Err: err}
	}
	if m == nil { // the file said null
		m = make(map[string]*Credentials)
	}
	return m, nil
}

// write replaces the file with data atomically: a reader (in any process) sees the old file or
// the new one, and a crash leaves one of them, never a mix.
func (s *FileStore) write(data []byte) (err error) {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("oauth: creating token directory: %w", err)
	}
	// CreateTemp makes the file 0600 from the start, so the tokens are never readable by
	// others, not even briefly; the rename keeps that mode.
	f, err := os.CreateTemp(dir, "."+filepath.Base(s.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("oauth: writing token file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("oauth: writing token file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("oauth: writing token file: %w", err)
	}
	// Without the sync, a crash soon after the rename can leave an empty file in place of
	// every server's credentials.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("oauth: writing token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("oauth: writing token file: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("oauth: writing token file: %w", err)
	}
	// Make the rename itself durable. Best effort: not every system can sync a directory.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
