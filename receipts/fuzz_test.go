package receipts_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// FuzzHTTPRequest sends one POST twice through the middleware, with any body and opt-in,
// session and authorization headers, to a handler that answers every request it gets. The
// handler always reads the body exactly as sent; a request that opted in runs once and its
// resend is a replay; any other request passes through and runs twice.
func FuzzHTTPRequest(f *testing.F) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}}}`
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":1.0,"method":"resources/read","params":{"uri":"x"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"server/discover"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call"} trailing`,
		"\xef\xbb\xbf{}",
		``,
	} {
		f.Add([]byte(body), "", "", "")
		f.Add([]byte(body), "1", "", "Bearer "+jwt(`{"iss":"i","sub":"s"}`))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), " 1 ", "session", "Bearer a.b.c")
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), "0", "", "Basic x")

	f.Fuzz(func(t *testing.T, body []byte, optIn, session, auth string) {
		const maxBody = 1024
		var executions int
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, _ := io.ReadAll(r.Body)
			if !bytes.Equal(got, body) {
				t.Fatalf("the handler read %q, want %q", got, body)
			}
			executions++
			msgs, err := jsonrpc.Decode(got)
			if err != nil || len(msgs) != 1 || msgs[0].Kind() != jsonrpc.KindRequest {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(jsonrpc.AppendResult(nil, msgs[0].ID, []byte(`{"n":1}`)))
		})
		h := receipts.HTTP(handler, receipts.Options{MaxBodyBytes: maxBody, Logger: discardLogger()})
		send := func() *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
			for name, v := range map[string]string{receipts.HeaderOptIn: optIn, "Mcp-Session-Id": session, "Authorization": auth} {
				if v != "" {
					r.Header.Set(name, v)
				}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec
		}
		first, second := send(), send()

		headerOptIn := string(bytes.TrimSpace([]byte(optIn))) == "1"
		optedIn, mismatch := receiptedAndOptedIn(body, headerOptIn)
		switch {
		case len(body) > maxBody && headerOptIn:
			if first.Code != http.StatusRequestEntityTooLarge || executions != 0 {
				t.Fatalf("opted-in body over the bound: %d, %d executions", first.Code, executions)
			}
		case mismatch && len(body) <= maxBody:
			if first.Code != http.StatusBadRequest || second.Code != http.StatusBadRequest || executions != 0 {
				t.Fatalf("header and _meta disagree: %d, %d, %d executions", first.Code, second.Code, executions)
			}
		case optedIn && len(body) <= maxBody:
			if executions != 1 {
				t.Fatalf("an opted-in request ran %d times", executions)
			}
			if second.Header().Get(receipts.HeaderReplay) != "1" || second.Code != http.StatusOK {
				t.Fatalf("resend = %d %s, want a replay", second.Code, second.Body)
			}
			if got, want := second.Body.String(), string(receipts.MarkReplay(bytes.TrimSpace(first.Body.Bytes()))); got != want {
				t.Fatalf("replay %s, want %s", got, want)
			}
		default:
			if executions != 2 {
				t.Fatalf("a request that did not opt in ran %d times", executions)
			}
			if second.Header().Get(receipts.HeaderReplay) != "" {
				t.Fatal("a request that did not opt in was replayed")
			}
		}
	})
}

// receiptedAndOptedIn says, independently of the middleware, whether body is one request that
// gets a receipt and opted in by header or by its _meta; mismatch is true for a request of the
// stateless revision (its _meta names a protocol version) whose header and _meta disagree.
func receiptedAndOptedIn(body []byte, headerOptIn bool) (optedIn, mismatch bool) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return false, false
	}
	msgs, err := jsonrpc.Decode(body)
	if err != nil || len(msgs) != 1 || msgs[0].Kind() != jsonrpc.KindRequest || string(bytes.TrimSpace(msgs[0].ID)) == "null" {
		return false, false
	}
	switch msgs[0].Method {
	case "initialize", "server/discover", "ping":
		return false, false
	}
	params := msgs[0].Params
	inMeta := metaNames(params, "_meta", "io.modelcontextprotocol/clientCapabilities", "extensions", receipts.ExtensionID)
	if metaNames(params, "_meta", "io.modelcontextprotocol/protocolVersion") {
		return inMeta, inMeta != headerOptIn
	}
	return headerOptIn || inMeta, false
}

// metaNames reports whether the JSON object params has a member at path, through nested
// objects, with keys matched exactly.
func metaNames(params []byte, path ...string) bool {
	var v any
	if json.Unmarshal(params, &v) != nil {
		return false
	}
	for _, key := range path {
		obj, isObject := v.(map[string]any)
		if !isObject {
			return false
		}
		var found bool
		if v, found = obj[key]; !found {
			return false
		}
	}
	return true
}
