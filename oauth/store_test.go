package oauth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func sampleCredentials() *Credentials {
	return &Credentials{
		Token: &oauth2.Token{
			AccessToken:  "at",
			TokenType:    "Bearer",
			RefreshToken: "rt",
			Expiry:       time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		},
		Scopes: []string{"read", "write"},
		Issuer: "https://as.example",
		Client: &ClientInfo{ID: "cid", Secret: "cs", AuthMethod: "client_secret_basic"},
	}
}

// scribble changes every part of c a shallow copy would share with the store.
func scribble(c *Credentials) {
	c.Token.AccessToken = "changed"
	c.Scopes[0] = "changed"
	c.Client.ID = "changed"
	c.Issuer = "changed"
}

func TestMemoryStoreCopies(t *testing.T) {
	ctx := t.Context()
	s := NewMemoryStore()
	if c, err := s.Load(ctx, "k"); c != nil || err != nil {
		t.Fatalf("Load of absent key = %v, %v; want nil, nil", c, err)
	}

	in := sampleCredentials()
	if err := s.Save(ctx, "k", in); err != nil {
		t.Fatal(err)
	}
	scribble(in) // after Save: must not reach the store
	out, err := s.Load(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, sampleCredentials()) {
		t.Fatalf("Load = %+v; caller's edit after Save reached the store", out)
	}
	scribble(out) // after Load: must not reach the store either
	again, _ := s.Load(ctx, "k")
	if !reflect.DeepEqual(again, sampleCredentials()) {
		t.Fatalf("Load = %+v; caller's edit of a loaded copy reached the store", again)
	}

	if err := s.Save(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Load(ctx, "k"); c != nil || err != nil {
		t.Fatalf("Load after Save(nil) = %v, %v; want nil, nil", c, err)
	}
}

func TestMemoryStoreConcurrent(t *testing.T) {
	ctx := t.Context()
	s := NewMemoryStore()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			key := fmt.Sprint("k", i)
			if err := s.Save(ctx, key, sampleCredentials()); err != nil {
				t.Error(err)
			}
			if c, _ := s.Load(ctx, key); c == nil {
				t.Errorf("%s: saved credentials not loaded", key)
			}
		})
	}
	wg.Wait()
}

func TestFileStoreRoundTrip(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "config", "mcpclient") // missing: Save creates it
	path := filepath.Join(dir, "tokens.json")
	s := NewFileStore(path)

	if c, err := s.Load(ctx, "https://a.example/mcp"); c != nil || err != nil {
		t.Fatalf("Load with no file = %v, %v; want nil, nil", c, err)
	}
	if err := s.Save(ctx, "https://a.example/mcp", sampleCredentials()); err != nil {
		t.Fatal(err)
	}
	b := sampleCredentials()
	b.Issuer = "https://other.example"
	if err := s.Save(ctx, "https://b.example/mcp", b); err != nil {
		t.Fatal(err)
	}

	// A new store on the same file, as the next run of a CLI would have.
	s2 := NewFileStore(path)
	got, err := s2.Load(ctx, "https://a.example/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleCredentials()) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, sampleCredentials())
	}
	if got, _ := s2.Load(ctx, "https://b.example/mcp"); got == nil || got.Issuer != "https://other.example" {
		t.Fatalf("other key after a second Save = %+v", got)
	}

	// Deleting one key keeps the other.
	if err := s2.Save(ctx, "https://a.example/mcp", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(ctx, "https://a.example/mcp"); got != nil {
		t.Fatalf("deleted key still loads: %+v", got)
	}
	if got, _ := s.Load(ctx, "https://b.example/mcp"); got == nil {
		t.Fatal("deleting one key lost the other")
	}

	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("file mode = %v; want 0600", fi.Mode().Perm())
		}
		di, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if di.Mode().Perm() != 0o700 {
			t.Errorf("created directory mode = %v; want 0700", di.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the token file (temporary file left behind?)", len(entries))
	}
}

func TestFileStoreDeleteAbsentCreatesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := NewFileStore(path).Save(t.Context(), "k", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Save(nil) of an absent key created the file (stat: %v)", err)
	}
}

func TestFileStoreEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := NewFileStore(path).Load(t.Context(), "k"); c != nil || err != nil {
		t.Fatalf("Load of an empty file = %v, %v; want nil, nil", c, err)
	}
}

func TestFileStoreInsecureMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not express access on Windows")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "tokens.json")
	s := NewFileStore(path)
	if err := s.Save(ctx, "k", sampleCredentials()); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(path)

		c, err := s.Load(ctx, "k")
		if c != nil || !errors.Is(err, ErrInsecureTokenFile) {
			t.Fatalf("mode %v: Load = %v, %v; want ErrInsecureTokenFile", mode, c, err)
		}
		var ie *InsecureTokenFileError
		if !errors.As(err, &ie) || ie.Path != path || ie.Mode.Perm() != mode {
			t.Fatalf("mode %v: error %#v does not name the path and mode", mode, err)
		}
		if err := s.Save(ctx, "other", sampleCredentials()); !errors.Is(err, ErrInsecureTokenFile) {
			t.Fatalf("mode %v: Save = %v; want ErrInsecureTokenFile", mode, err)
		}
		after, _ := os.ReadFile(path)
		if string(after) != string(before) {
			t.Fatalf("mode %v: Save rewrote a file it refused to read", mode)
		}
	}
}

func TestFileStoreCorrupt(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "tokens.json")
	const garbage = `{"https://a.example/mcp": {"token": `
	if err := os.WriteFile(path, []byte(garbage), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewFileStore(path)

	c, err := s.Load(ctx, "https://a.example/mcp")
	if c != nil || !errors.Is(err, ErrCorruptTokenFile) {
		t.Fatalf("Load = %v, %v; want ErrCorruptTokenFile", c, err)
	}
	var ce *CorruptTokenFileError
	if !errors.As(err, &ce) || ce.Path != path || ce.Err == nil {
		t.Fatalf("error %#v does not name the path and cause", err)
	}
	if err := s.Save(ctx, "https://b.example/mcp", sampleCredentials()); !errors.Is(err, ErrCorruptTokenFile) {
		t.Fatalf("Save = %v; want ErrCorruptTokenFile", err)
	}
	if err := s.Save(ctx, "https://a.example/mcp", nil); !errors.Is(err, ErrCorruptTokenFile) {
		t.Fatalf("Save(nil) = %v; want ErrCorruptTokenFile", err)
	}
	if got, _ := os.ReadFile(path); string(got) != garbage {
		t.Fatalf("corrupt file was rewritten to %q", got)
	}
}

func TestFileStoreConcurrentSaves(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "tokens.json")
	s := NewFileStore(path)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := sampleCredentials()
			c.Token.AccessToken = fmt.Sprint("at", i)
			if err := s.Save(ctx, fmt.Sprint("k", i), c); err != nil {
				t.Error(err)
			}
			if _, err := s.Load(ctx, "k0"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		c, err := NewFileStore(path).Load(ctx, fmt.Sprint("k", i))
		if err != nil || c == nil || c.Token.AccessToken != fmt.Sprint("at", i) {
			t.Errorf("k%d = %+v, %v; a concurrent Save was lost", i, c, err)
		}
	}
}

func TestFileStoreCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := NewFileStore(filepath.Join(t.TempDir(), "tokens.json"))
	if err := s.Save(ctx, "k", sampleCredentials()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with a canceled context = %v", err)
	}
	if _, err := s.Load(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Load with a canceled context = %v", err)
	}
}

func TestDefaultFileStorePath(t *testing.T) {
	dir, err := os.UserConfigDir()
	if err != nil {
		t.Skip(err)
	}
	got, err := DefaultFileStorePath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "mcpclient", "tokens.json"); got != want {
		t.Fatalf("DefaultFileStorePath = %q; want %q", got, want)
	}
}
