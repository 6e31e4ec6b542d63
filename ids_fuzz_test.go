package mcpclient_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/northstar-mcp/mcpclient"
)

func FuzzIDUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`"6f1c8e2a-1d7b-4c3e-9a55-0b7e0a9c2d11"`,
		`""`,
		`"7"`,
		`"a\"b\\c\/d\n\t\u0000\u001f"`,
		`"<script>&amp;</script>"`,
		`"\u00e9\ud83d\ude00 é"`,
		`"\ud800"`,
		"\"\xff\xfe\"",
		`"unterminated`,
		`0`,
		`-0`,
		`42`,
		`-9223372036854775808`,
		`9223372036854775807`,
		`9223372036854775808`,
		`123456789012345678901234567890`,
		`1.0`,
		`1.5`,
		`1e3`,
		`-`,
		`+1`,
		`007`,
		`null`,
		`true`,
		`{"id":1}`,
		`[1]`,
		` 	12 
`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var id mcpclient.ID
		if err := id.UnmarshalJSON(b); err != nil {
			if !errors.Is(err, mcpclient.ErrInvalidID) {
				t.Fatalf("UnmarshalJSON(%q) error %v is not ErrInvalidID", b, err)
			}
			return
		}
		if id.IsZero() {
			t.Fatalf("UnmarshalJSON(%q) succeeded with the zero ID", b)
		}
		enc := id.JSON()
		if !json.Valid([]byte(enc)) {
			t.Fatalf("UnmarshalJSON(%q): JSON() = %q is not valid JSON", b, enc)
		}
		if m, err := id.MarshalJSON(); err != nil || string(m) != enc {
			t.Fatalf("MarshalJSON = %q, %v; JSON() = %q", m, err, enc)
		}
		var back mcpclient.ID
		if err := back.UnmarshalJSON([]byte(enc)); err != nil {
			t.Fatalf("UnmarshalJSON(%q) -> JSON %q does not unmarshal: %v", b, enc, err)
		}
		if back != id {
			t.Fatalf("UnmarshalJSON(%q) -> JSON %q -> %#v, want %#v", b, enc, back, id)
		}
		// Through encoding/json too, as the client decodes ids inside messages.
		var viaJSON mcpclient.ID
		if err := json.Unmarshal([]byte(enc), &viaJSON); err != nil || viaJSON != id {
			t.Fatalf("json.Unmarshal(%q) = %#v, %v; want %#v", enc, viaJSON, err, id)
		}
		if again := back.JSON(); again != enc {
			t.Fatalf("JSON not stable: %q then %q", enc, again)
		}
	})
}
