package mcpclient

import (
	"testing"

	"github.com/google/uuid"
)

// A fresh id is a UUID of the version asked for, in its canonical form, and its key is its JSON.
func TestNewIDIsCanonicalUUID(t *testing.T) {
	for _, v := range []IDVersion{UUIDv4, UUIDv7} {
		seen := map[string]bool{}
		for range 1000 {
			id, key, err := newID(v)
			if err != nil {
				t.Fatal(err)
			}
			u, err := uuid.Parse(id.String())
			if err != nil {
				t.Fatalf("%q: %v", id.String(), err)
			}
			want := 4
			if v == UUIDv7 {
				want = 7
			}
			if int(u.Version()) != want || u.Variant() != uuid.RFC4122 || u.String() != id.String() || key != id.JSON() {
				t.Fatalf("id %q (version %d, variant %v), key %s, want version %d in canonical form, key %s", id.String(), u.Version(), u.Variant(), key, want, id.JSON())
			}
			if seen[key] {
				t.Fatalf("%s twice", key)
			}
			seen[key] = true
		}
	}
}

func FuzzAppendUUID(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 16 {
			return
		}
		u := uuid.UUID(b[:16])
		if got := string(appendUUID(nil, u)); got != u.String() {
			t.Fatalf("appendUUID(%x) = %s, want %s", b[:16], got, u)
		}
	})
}
