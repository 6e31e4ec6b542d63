package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// idsEcho is a tool that answers with its arguments.
func idsEcho(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(string(call.Arguments))}}, nil
}

func idsParseUUID(t *testing.T, id mcpclient.ID) uuid.UUID {
	t.Helper()
	if !bytes.HasPrefix([]byte(id.JSON()), []byte(`"`)) {
		t.Fatalf("generated id %s is not a string id", id.JSON())
	}
	u, err := uuid.Parse(id.String())
	if err != nil {
		t.Fatalf("generated id %q is not a UUID: %v", id.String(), err)
	}
	if u.String() != id.String() {
		t.Fatalf("generated id %q is not in canonical UUID form (%s)", id.String(), u)
	}
	if u.Variant() != uuid.RFC4122 {
		t.Fatalf("generated id %q has variant %v, want RFC 4122", id.String(), u.Variant())
	}
	return u
}

// TestIDsGeneratedAreDistinctAcrossClients generates 100,000 ids on two clients of one server
// (no request is sent) and checks that no id repeats, within or across the clients.
func TestIDsGeneratedAreDistinctAcrossClients(t *testing.T) {
	const perClient = 50_000
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "echo"}, idsEcho))
	clients := []*mcpclient.Client{mcptest.NewClient(t, srv), mcptest.NewClient(t, srv)}

	// A ping on each connection is answered after every frame sent before it was handled, so
	// pings around the loop make the frame count exact.
	drain := func() {
		t.Helper()
		for _, c := range clients {
			if err := c.Ping(context.Background()); err != nil {
				t.Fatalf("ping: %v", err)
			}
		}
	}
	drain()
	before := srv.FramesReceived()
	seen := make(map[string]int, 2*perClient)
	for ci, c := range clients {
		for i := range perClient {
			req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "echo", Arguments: map[string]int{"i": i}})
			if err != nil {
				t.Fatalf("client %d: NewRequest %d: %v", ci, i, err)
			}
			key := req.ID().JSON()
			if prev, dup := seen[key]; dup {
				t.Fatalf("id %s generated twice (clients %d and %d)", key, prev, ci)
			}
			seen[key] = ci
			if i%5000 == 0 {
				if v := idsParseUUID(t, req.ID()).Version(); v != 4 {
					t.Fatalf("default id %s has UUID version %d, want 4", req.ID(), v)
				}
			}
		}
	}
	if len(seen) != 2*perClient {
		t.Fatalf("got %d distinct ids, want %d", len(seen), 2*perClient)
	}
	drain()
	if got := srv.FramesReceived() - before; got != len(clients) {
		t.Fatalf("server received %d frames while ids were made, want only the %d pings", got, len(clients))
	}
}

func TestIDVersion(t *testing.T) {
	srv := mcptest.NewTestServer(t)

	cases := []struct {
		name string
		opts []mcpclient.Option
		want uuid.Version
	}{
		{"default is v4", nil, 4},
		{"UUIDv4", []mcpclient.Option{mcpclient.WithIDVersion(mcpclient.UUIDv4)}, 4},
		{"UUIDv7", []mcpclient.Option{mcpclient.WithIDVersion(mcpclient.UUIDv7)}, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mcptest.NewClient(t, srv, tc.opts...)
			for range 200 {
				req, err := c.NewRequest("ping", nil)
				if err != nil {
					t.Fatal(err)
				}
				if v := idsParseUUID(t, req.ID()).Version(); v != tc.want {
					t.Fatalf("id %s has UUID version %d, want %d", req.ID(), v, tc.want)
				}
			}
		})
	}

	t.Run("v7 ids sort by creation", func(t *testing.T) {
		c := mcptest.NewClient(t, srv, mcpclient.WithIDVersion(mcpclient.UUIDv7))
		ids := make([]string, 5000)
		for i := range ids {
			req, err := c.NewRequest("ping", nil)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = req.ID().String()
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] < ids[i-1] {
				t.Fatalf("v7 id %d (%s) sorts before id %d (%s)", i, ids[i], i-1, ids[i-1])
			}
		}
		if !sort.StringsAreSorted(ids) {
			t.Fatal("v7 ids are not sorted")
		}
	})
}

func TestIDValues(t *testing.T) {
	t.Run("zero", func(t *testing.T) {
		var id mcpclient.ID
		if !id.IsZero() {
			t.Error("ID{}.IsZero() = false")
		}
		if id.String() != "" {
			t.Errorf("ID{}.String() = %q, want empty", id.String())
		}
		if id.JSON() != "null" {
			t.Errorf("ID{}.JSON() = %s, want null", id.JSON())
		}
		b, err := json.Marshal(id)
		if err != nil || string(b) != "null" {
			t.Errorf("json.Marshal(ID{}) = %s, %v; want null", b, err)
		}
	})

	cases := []struct {
		name     string
		id       mcpclient.ID
		wantStr  string
		wantJSON string
	}{
		{"string 7", mcpclient.StringID("7"), "7", `"7"`},
		{"int 7", mcpclient.IntID(7), "7", `7`},
		{"empty string", mcpclient.StringID(""), "", `""`},
		{"int 0", mcpclient.IntID(0), "0", `0`},
		{"negative int", mcpclient.IntID(-42), "-42", `-42`},
		{"max int64", mcpclient.IntID(9223372036854775807), "9223372036854775807", `9223372036854775807`},
		{"min int64", mcpclient.IntID(-9223372036854775808), "-9223372036854775808", `-9223372036854775808`},
		{"uuid", mcpclient.StringID("0b7e2c1a-5a39-4a4b-9d2e-1c3f6f0e8a11"), "0b7e2c1a-5a39-4a4b-9d2e-1c3f6f0e8a11", `"0b7e2c1a-5a39-4a4b-9d2e-1c3f6f0e8a11"`},
		{"quote and backslash", mcpclient.StringID(`a"b\c`), `a"b\c`, `"a\"b\\c"`},
		{"html characters", mcpclient.StringID("<&>"), "<&>", `"\u003c\u0026\u003e"`},
		{"control character", mcpclient.StringID("a\nb"), "a\nb", `"a\nb"`},
		{"non-ASCII", mcpclient.StringID("réservation-✓"), "réservation-✓", `"réservation-✓"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.id.IsZero() {
				t.Error("IsZero() = true for a set id")
			}
			if got := tc.id.String(); got != tc.wantStr {
				t.Errorf("String() = %q, want %q", got, tc.wantStr)
			}
			if got := tc.id.JSON(); got != tc.wantJSON {
				t.Errorf("JSON() = %s, want %s", got, tc.wantJSON)
			}
			m, err := tc.id.MarshalJSON()
			if err != nil || string(m) != tc.wantJSON {
				t.Errorf("MarshalJSON() = %s, %v; want %s", m, err, tc.wantJSON)
			}
			// Embedded in a struct, as in a JSON-RPC envelope.
			env, err := json.Marshal(struct {
				ID mcpclient.ID `json:"id"`
			}{tc.id})
			if err != nil || string(env) != `{"id":`+tc.wantJSON+`}` {
				t.Errorf("json.Marshal(envelope) = %s, %v", env, err)
			}
			var back struct {
				ID mcpclient.ID `json:"id"`
			}
			if err := json.Unmarshal(env, &back); err != nil {
				t.Fatalf("round trip: %v", err)
			}
			if back.ID != tc.id {
				t.Errorf("round trip gave %#v, want %#v", back.ID, tc.id)
			}
		})
	}

	t.Run("string 7 and int 7 differ", func(t *testing.T) {
		s, n := mcpclient.StringID("7"), mcpclient.IntID(7)
		if s == n {
			t.Error(`StringID("7") == IntID(7)`)
		}
		if s.JSON() == n.JSON() {
			t.Errorf("both encode as %s", s.JSON())
		}
		if s.String() != n.String() {
			t.Errorf("String() differ: %q vs %q; both should read 7", s.String(), n.String())
		}
	})
}

func TestIDUnmarshalJSON(t *testing.T) {
	accepted := []struct {
		in   string
		want mcpclient.ID
	}{
		{`"7"`, mcpclient.StringID("7")},
		{`7`, mcpclient.IntID(7)},
		{`0`, mcpclient.IntID(0)},
		{`-42`, mcpclient.IntID(-42)},
		{`""`, mcpclient.StringID("")},
		{`"a\"b"`, mcpclient.StringID(`a"b`)},
		{`"\u00e9"`, mcpclient.StringID("é")},
		{`9223372036854775807`, mcpclient.IntID(9223372036854775807)},
		{`-9223372036854775808`, mcpclient.IntID(-9223372036854775808)},
		{" \t7\n", mcpclient.IntID(7)},
	}
	for _, tc := range accepted {
		t.Run("accepts "+tc.in, func(t *testing.T) {
			var direct mcpclient.ID
			if err := direct.UnmarshalJSON([]byte(tc.in)); err != nil {
				t.Fatalf("UnmarshalJSON(%s): %v", tc.in, err)
			}
			if direct != tc.want || direct.IsZero() {
				t.Fatalf("UnmarshalJSON(%s) = %#v, want %#v", tc.in, direct, tc.want)
			}
			var env struct {
				ID mcpclient.ID `json:"id"`
			}
			if err := json.Unmarshal([]byte(`{"id":`+tc.in+`}`), &env); err != nil {
				t.Fatalf("json.Unmarshal: %v", err)
			}
			if env.ID != tc.want {
				t.Fatalf("json.Unmarshal gave %#v, want %#v", env.ID, tc.want)
			}
		})
	}

	refused := []struct{ name, in string }{
		{"fraction", `7.5`},
		{"integral float", `7.0`},
		{"exponent", `1e3`},
		{"upper exponent", `7E0`},
		{"null", `null`},
		{"object", `{"id":7}`},
		{"array", `[7]`},
		{"bool", `true`},
		{"beyond int64", `9223372036854775808`},
		{"below int64", `-9223372036854775809`},
		{"huge", `123456789012345678901234567890`},
		{"empty", ``},
		{"blank", `   `},
		{"unterminated string", `"abc`},
	}
	for _, tc := range refused {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			id := mcpclient.StringID("before")
			err := id.UnmarshalJSON([]byte(tc.in))
			if !errors.Is(err, mcpclient.ErrInvalidID) {
				t.Fatalf("UnmarshalJSON(%s) = %v (id %#v), want ErrInvalidID", tc.in, err, id)
			}
			if id != mcpclient.StringID("before") {
				t.Errorf("a refused UnmarshalJSON changed the id to %#v", id)
			}
			if tc.in == "" || tc.in == "   " || tc.in == `"abc` {
				return // not JSON at all: json.Unmarshal refuses it before UnmarshalJSON
			}
			var env struct {
				ID mcpclient.ID `json:"id"`
			}
			err = json.Unmarshal([]byte(`{"id":`+tc.in+`}`), &env)
			if !errors.Is(err, mcpclient.ErrInvalidID) {
				t.Fatalf("json.Unmarshal of id %s = %v (id %#v), want ErrInvalidID", tc.in, err, env.ID)
			}
		})
	}

	// Text that is not JSON at all never reaches UnmarshalJSON through encoding/json, but a
	// direct caller (a custom transport) must not get an id out of it either: "007" or "+7" read
	// as 7 would make two different wire ids one ledger key.
	for _, in := range []string{`+7`, `007`, `-07`, `0x7`} {
		t.Run("refuses non-JSON number "+in, func(t *testing.T) {
			var id mcpclient.ID
			if err := id.UnmarshalJSON([]byte(in)); !errors.Is(err, mcpclient.ErrInvalidID) {
				t.Fatalf("UnmarshalJSON(%s) = %v, id %s; want ErrInvalidID", in, err, id.JSON())
			}
		})
	}
}

// TestIDPinned checks WithRequestID against the ledger: other content under a used id is refused
// before anything is sent; the same content is a resend.
func TestIDPinned(t *testing.T) {
	ctx := context.Background()
	book := func(room string) mcpclient.CallToolParams {
		return mcpclient.CallToolParams{Name: "book", Arguments: map[string]string{"room": room}}
	}

	t.Run("other content under a used id is refused locally", func(t *testing.T) {
		srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "book"}, idsEcho))
		c := mcptest.NewClient(t, srv)
		id := mcpclient.StringID("order-42")

		first, err := c.NewRequest("tools/call", book("12"), mcpclient.WithRequestID(id))
		if err != nil {
			t.Fatal(err)
		}
		if first.ID() != id {
			t.Fatalf("pinned request has id %s, want %s", first.ID().JSON(), id.JSON())
		}
		if _, err := c.Do(ctx, first); err != nil {
			t.Fatal(err)
		}
		framesBefore := srv.FramesReceived()

		other, err := c.NewRequest("tools/call", book("14"), mcpclient.WithRequestID(id))
		if !errors.Is(err, mcpclient.ErrRequestIDReused) {
			t.Fatalf("NewRequest with other content under %s: err = %v, want ErrRequestIDReused", id.JSON(), err)
		}
		if other != nil {
			t.Errorf("NewRequest returned a request along with the refusal")
		}
		if mcpclient.CodeOf(err) != mcpclient.CodeRequestIDReused {
			t.Errorf("CodeOf = %v, want %v", mcpclient.CodeOf(err), mcpclient.CodeRequestIDReused)
		}
		if mcpclient.IsWireError(err) {
			t.Errorf("IsWireError = true for a local refusal: %v", err)
		}
		var e *mcpclient.Error
		if !errors.As(err, &e) || e.Request.ID() != id {
			t.Fatalf("error %v does not name id %s", err, id.JSON())
		}
		if e.Attempts != 0 {
			t.Errorf("Attempts = %d for a refusal before sending", e.Attempts)
		}
		// The refused request, if handed back, cannot be sent either.
		if e.Request != nil {
			if _, err := c.Do(ctx, e.Request); !errors.Is(err, mcpclient.ErrRequestIDReused) || mcpclient.IsWireError(err) {
				t.Errorf("Do of the refused request: %v, want a local ErrRequestIDReused", err)
			}
		}

		got := srv.Received(id)
		if len(got) != 1 || !bytes.Equal(got[0], first.Bytes()) {
			t.Fatalf("server received %d frames under %s, want exactly the first request's", len(got), id.JSON())
		}
		if bytes.Contains(got[0], []byte(`"14"`)) {
			t.Fatalf("the second content reached the server: %s", got[0])
		}
		if n := srv.FramesReceived(); n != framesBefore {
			t.Errorf("server received %d frames after the refusal", n-framesBefore)
		}
		if entry, ok := c.Ledger().Lookup(id); !ok || entry.Fingerprint != first.Fingerprint() || entry.State != mcpclient.StateAnswered {
			t.Errorf("ledger entry after the refusal: %+v, %v; want the first request's, answered", entry, ok)
		}
	})

	t.Run("same content under a used id is a resend", func(t *testing.T) {
		srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "book"}, idsEcho))
		c := mcptest.NewClient(t, srv)
		id := mcpclient.StringID("order-43")

		first, err := c.NewRequest("tools/call", book("12"), mcpclient.WithRequestID(id))
		if err != nil {
			t.Fatal(err)
		}
		r1, err := c.Do(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.NewRequest("tools/call", book("12"), mcpclient.WithRequestID(id))
		if err != nil {
			t.Fatalf("NewRequest with the same content under %s: %v", id.JSON(), err)
		}
		if !bytes.Equal(again.Bytes(), first.Bytes()) || again.Fingerprint() != first.Fingerprint() {
			t.Fatalf("same content froze to other bytes:\n%s\n%s", first.Bytes(), again.Bytes())
		}
		r2, err := c.Do(ctx, again)
		if err != nil {
			t.Fatalf("resend: %v", err)
		}
		if !replayOf(r2, r1) {
			t.Errorf("resend answered %s, first %s", r2.Result, r1.Result)
		}
		got := srv.Received(id)
		if len(got) != 2 || !bytes.Equal(got[0], got[1]) {
			t.Fatalf("server received %d frames under %s, want 2 identical", len(got), id.JSON())
		}
		if n := srv.ExecutionsOf("book", id); n != 1 {
			t.Errorf("tool ran %d times under %s, want once (the server's receipt answers)", n, id.JSON())
		}
		if entry, _ := c.Ledger().Lookup(id); entry.Attempts != 2 || entry.State != mcpclient.StateAnswered {
			t.Errorf("ledger entry: attempts %d state %v, want 2 answered", entry.Attempts, entry.State)
		}
	})

	t.Run("two requests frozen under one id before either is sent", func(t *testing.T) {
		srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "book"}, idsEcho))
		c := mcptest.NewClient(t, srv)
		id := mcpclient.IntID(4711)

		a, err := c.NewRequest("tools/call", book("1"), mcpclient.WithRequestID(id))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.NewRequest("tools/call", book("2"), mcpclient.WithRequestID(id))
		if err != nil {
			t.Fatal(err) // the ledger does not know the id yet
		}
		if _, err := c.Do(ctx, a); err != nil {
			t.Fatal(err)
		}
		_, err = c.Do(ctx, b)
		if !errors.Is(err, mcpclient.ErrRequestIDReused) || mcpclient.IsWireError(err) {
			t.Fatalf("Do of other content under a used id: %v, want a local ErrRequestIDReused", err)
		}
		if got := srv.Received(id); len(got) != 1 || !bytes.Equal(got[0], a.Bytes()) {
			t.Fatalf("server received %d frames under %s, want only the first request", len(got), id.JSON())
		}
	})

	t.Run("string 7 and int 7 are different ids", func(t *testing.T) {
		srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "book"}, idsEcho))
		c := mcptest.NewClient(t, srv)
		s, n := mcpclient.StringID("7"), mcpclient.IntID(7)
		rs, err := c.NewRequest("tools/call", book("s"), mcpclient.WithRequestID(s))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Do(ctx, rs); err != nil {
			t.Fatal(err)
		}
		rn, err := c.NewRequest("tools/call", book("n"), mcpclient.WithRequestID(n))
		if err != nil {
			t.Fatalf("int id 7 after string id \"7\": %v", err)
		}
		if _, err := c.Do(ctx, rn); err != nil {
			t.Fatalf("int id 7 after string id \"7\": %v", err)
		}
		for _, tc := range []struct {
			id  mcpclient.ID
			req *mcpclient.Request
		}{{s, rs}, {n, rn}} {
			got := srv.Received(tc.id)
			if len(got) != 1 || !bytes.Equal(got[0], tc.req.Bytes()) {
				t.Errorf("server received %d frames under %s, want 1", len(got), tc.id.JSON())
			}
			if !bytes.Contains(tc.req.Bytes(), []byte(`"id":`+tc.id.JSON())) {
				t.Errorf("frame %s does not carry id %s", tc.req.Bytes(), tc.id.JSON())
			}
			entry, ok := c.Ledger().Lookup(tc.id)
			if !ok || entry.Fingerprint != tc.req.Fingerprint() {
				t.Errorf("ledger entry for %s: %+v, %v", tc.id.JSON(), entry, ok)
			}
		}
	})

	t.Run("pinned ids in errors and frames", func(t *testing.T) {
		srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "book"}, idsEcho))
		c := mcptest.NewClient(t, srv)
		for i, id := range []mcpclient.ID{mcpclient.StringID(`we"ird\id`), mcpclient.StringID(""), mcpclient.IntID(-1)} {
			req, err := c.NewRequest("tools/call", book(fmt.Sprint(i)), mcpclient.WithRequestID(id))
			if err != nil {
				t.Fatalf("pin %s: %v", id.JSON(), err)
			}
			if _, err := c.Do(ctx, req); err != nil {
				t.Fatalf("pin %s: %v", id.JSON(), err)
			}
			if got := srv.Received(id); len(got) != 1 {
				t.Fatalf("server received %d frames under %s, want 1", len(got), id.JSON())
			}
			if _, err := c.NewRequest("tools/call", book("other"), mcpclient.WithRequestID(id)); !errors.Is(err, mcpclient.ErrRequestIDReused) {
				t.Fatalf("pin %s again with other content: %v", id.JSON(), err)
			}
		}
	})
}

// idKey's shortcut for plain strings must give exactly what decoding the id and re-encoding it
// gives, for every id a server could send.
func FuzzIDKey(f *testing.F) {
	for _, s := range []string{`"6f1c8e2a-1d7b-4c3e-9a55-0b7e0a9c2d11"`, `42`, `-7`, ` "a" `, `"a<b"`, `"\u0041"`, `"é"`, `""`, `null`, `1.5`, `"a\"b"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		key, err := mcpclient.IDKeyForTest(raw)
		var id mcpclient.ID
		stdErr := json.Unmarshal(raw, &id)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("%q: idKey error %v, decoding error %v", raw, err, stdErr)
		}
		if err == nil && key != id.JSON() {
			t.Fatalf("%q: idKey %s, decoded and re-encoded %s", raw, key, id.JSON())
		}
	})
}

// IDFromKey's ids are fixed for good: a worker that restarts on a newer version of the module
// must find the requests an older one made under the same job keys. The wanted ids were computed
// apart from this code (SHA-256 of the domain, then each part after its uvarint length; the
// first 16 bytes, version 8, RFC 9562 variant).
func TestIDFromKeyIsStable(t *testing.T) {
	for _, tc := range []struct{ namespace, key, want string }{
		{"bookings", "job-1", "545236bb-f0cd-8517-b658-e5b1c8578322"},
		{"bookings", "job-2", "39f65706-ee87-8cf7-8ee6-7f45e4f5d694"},
		{"", "", "96e83f0d-a135-80df-a12d-cf0682f278b5"},
		{"ab", "c", "8f2b2d47-20f6-8d6c-9361-23c95b6967dc"},
		{"a", "bc", "8e2f332c-f39e-8461-a812-967b073b86cd"},
		{"ünï", "cödé\x00", "cfd30ef7-09d4-8c67-9a60-e968c1c11c5a"},
		{strings.Repeat("n", 200), "k", "6dd4d39d-a287-8adc-ac38-b4a47c247778"}, // a two-byte length
	} {
		id := mcpclient.IDFromKey(tc.namespace, tc.key)
		if got := id.String(); got != tc.want {
			t.Errorf("IDFromKey(%.20q, %q) = %s, want %s", tc.namespace, tc.key, got, tc.want)
		}
		u, err := uuid.Parse(id.String())
		if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
			t.Errorf("IDFromKey(%.20q, %q) = %s: version %d, variant %v, %v; want a version 8 UUID", tc.namespace, tc.key, id, u.Version(), u.Variant(), err)
		}
		if id.JSON() != `"`+tc.want+`"` {
			t.Errorf("IDFromKey(%.20q, %q).JSON() = %s", tc.namespace, tc.key, id.JSON())
		}
	}
}

// A pinned IDFromKey id makes a job's second run find the first: answered once, the same job
// under the same key is answered from the server's receipt, and the tool runs once.
func TestIDFromKeyRunsAJobOnce(t *testing.T) {
	var runs atomic.Int32
	srv := mcptest.NewTestServer(t, mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		runs.Add(1)
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged")}}, nil
	}))
	c := mcptest.NewClient(t, srv)
	ctx := context.Background()
	id := mcpclient.IDFromKey("billing", "invoice-17")
	for range 2 {
		res, err := c.CallTool(ctx, "charge", map[string]any{"amount": 12}, mcpclient.WithRequestID(id))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Text(); got != "charged" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times under one job key, want 1", n)
	}
	if _, err := c.CallTool(ctx, "charge", map[string]any{"amount": 13}, mcpclient.WithRequestID(id)); !errors.Is(err, mcpclient.ErrRequestIDReused) {
		t.Fatalf("the job key with other arguments: %v, want ErrRequestIDReused", err)
	}
}
