package receipts_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient/receipts"
)

func TestMarkReplay(t *testing.T) {
	const flag = `"io.github.northstar-mcp/request-receipts.replay":true`
	tests := []struct{ name, in, want string }{
		{"result without _meta",
			`{"jsonrpc":"2.0","id":1,"result":{"content":[],"n":1.50}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{` + flag + `},"content":[],"n":1.50}}`},
		{"empty result",
			`{"jsonrpc":"2.0","id":1,"result":{}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{` + flag + `}}}`},
		{"_meta with keys",
			`{"jsonrpc":"2.0","id":"x","result":{"_meta":{"a":1e2},"x":2}}`,
			`{"jsonrpc":"2.0","id":"x","result":{"_meta":{` + flag + `,"a":1e2},"x":2}}`},
		{"_meta null",
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":null}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{` + flag + `}}}`},
		{"flag already false",
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.github.northstar-mcp/request-receipts.replay":false}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"_meta":{` + flag + `}}}`},
		{"escaped keys and spacing",
			" {\"jsonrpc\":\"2.0\", \"id\":1, \"r\\u0065sult\" : { \"_met\\u0061\" : { } } }\n",
			" {\"jsonrpc\":\"2.0\", \"id\":1, \"r\\u0065sult\" : { \"_met\\u0061\" : {" + flag + " } } }\n"},
		{"duplicate result: the last one is read",
			`{"jsonrpc":"2.0","id":1,"result":{"a":1},"result":{"b":2}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"a":1},"result":{"_meta":{` + flag + `},"b":2}}`},
		{"error response", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no","data":{"x":1}}}`, ""},
		{"result null", `{"jsonrpc":"2.0","id":1,"result":null}`, ""},
		{"result no object", `{"jsonrpc":"2.0","id":1,"result":[1,2]}`, ""},
		{"_meta no object", `{"jsonrpc":"2.0","id":1,"result":{"_meta":"text"}}`, ""},
		{"invalid JSON", `{"jsonrpc":"2.0","id":1,"result":{"a":}`, ""},
		{"trailing bytes", `{"jsonrpc":"2.0","id":1,"result":{}} {}`, ""},
		{"no object", `[{"jsonrpc":"2.0","id":1,"result":{}}]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == "" {
				want = tt.in // unchanged
			}
			if got := string(receipts.MarkReplay([]byte(tt.in))); got != want {
				t.Errorf("MarkReplay(%s)\n = %s\nwant %s", tt.in, got, want)
			}
		})
	}
}

func TestDeclare(t *testing.T) {
	decl := receipts.Declaration{Scope: receipts.ScopeProcess, Epoch: "E1", RetentionMs: 1000, MaxReceipts: 5, Disconnect: receipts.DisconnectContinue}
	const ours = `"io.github.northstar-mcp/request-receipts":{"scope":"process","epoch":"E1","retentionMs":1000,"maxReceipts":5,"disconnect":"continue"}`
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"other extensions kept",
			`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/ui":{"v":1.0}}},"serverInfo":{"name":"s"}}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"extensions":{` + ours + `,"io.modelcontextprotocol/ui":{"v":1.0}}},"serverInfo":{"name":"s"}}}`, true},
		{"no extensions",
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"tools":{}}}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"extensions":{` + ours + `},"tools":{}}}}`, true},
		{"no capabilities",
			`{"jsonrpc":"2.0","id":0,"result":{"supportedVersions":["2026-07-28"]}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"extensions":{` + ours + `}},"supportedVersions":["2026-07-28"]}}`, true},
		{"ours replaced",
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{"scope":"session"}}}}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"extensions":{` + ours + `}}}}`, true},
		{"ours escaped and replaced",
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"extensions":{"io.github.northstar-mcp\/request-receipts":{}}}}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"extensions":{` + strings.Replace(ours, `"io.github.northstar-mcp/request-receipts"`, `"io.github.northstar-mcp\/request-receipts"`, 1) + `}}}}`, true},
		{"error response", `{"jsonrpc":"2.0","id":0,"error":{"code":-32600,"message":"no"}}`, "", false},
		{"capabilities no object", `{"jsonrpc":"2.0","id":0,"result":{"capabilities":7}}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := receipts.Declare([]byte(tt.in), decl)
			want := tt.want
			if !tt.ok {
				want = tt.in
			}
			if ok != tt.ok || string(got) != want {
				t.Errorf("Declare(%s)\n = %s, %v\nwant %s, %v", tt.in, got, ok, want, tt.ok)
			}
			if ok {
				var parsed struct {
					Result struct {
						Capabilities struct {
							Extensions map[string]receipts.Declaration
						}
					}
				}
				if err := json.Unmarshal(got, &parsed); err != nil || parsed.Result.Capabilities.Extensions[receipts.ExtensionID] != decl {
					t.Errorf("Declare(%s) does not read back: %+v, %v", tt.in, parsed, err)
				}
			}
		})
	}
}

// FuzzEdit edits any document: an edit leaves valid JSON whose flag or declaration reads back
// (keys matched exactly); a document it cannot edit comes back unchanged.
func FuzzEdit(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"extensions":{"a":{}}}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"x":[1,2]}}}`,
		`{"result":{"capabilities":null}}`,
		`{"result":{"capabilities":{"extensions":{"io.github.northstar-mcp\/request-receipts":1}}},"result":{}}`,
		` {"r\u0065sult" : { } } `,
		`{"result":[]}`,
		`{"error":{}}`,
		`[]`,
		`{"result":{}`,
	} {
		f.Add([]byte(s))
	}
	decl := receipts.Declaration{Scope: receipts.ScopeStore, Epoch: "e", RetentionMs: 1, Disconnect: receipts.DisconnectCancel}
	f.Fuzz(func(t *testing.T, doc []byte) {
		at := func(out []byte, path ...string) (any, bool) {
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("edited %q into invalid JSON %q: %v", doc, out, err)
			}
			for _, k := range path {
				obj, ok := v.(map[string]any)
				if !ok {
					return nil, false
				}
				if v, ok = obj[k]; !ok {
					return nil, false
				}
			}
			return v, true
		}

		out := receipts.MarkReplay(doc)
		if string(out) != string(doc) {
			if v, _ := at(out, "result", "_meta", receipts.ReplayMetaKey); v != true {
				t.Fatalf("MarkReplay(%q) = %q: no flag", doc, out)
			}
		}

		out, ok := receipts.Declare(doc, decl)
		if !ok {
			if string(out) != string(doc) {
				t.Fatalf("Declare(%q) failed and changed it to %q", doc, out)
			}
			return
		}
		v, _ := at(out, "result", "capabilities", "extensions", receipts.ExtensionID)
		if m, _ := v.(map[string]any); m["scope"] != "store" || m["disconnect"] != "cancel" || m["epoch"] != "e" {
			t.Fatalf("Declare(%q) = %q: the declaration reads back as %v", doc, out, v)
		}
	})
}
