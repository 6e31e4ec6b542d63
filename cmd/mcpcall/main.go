// Command mcpcall sends one MCP request and prints its result, for people and scripts.
//
//	mcpcall [flags] METHOD [PARAMS_JSON | @FILE | -]
//	mcpcall [flags] call TOOL [KEY=VALUE | KEY:=JSON ...]
//	mcpcall [flags] -tool TOOL [-args JSON_OBJECT | KEY=VALUE | KEY:=JSON ...]
//
// It connects (Streamable HTTP with -url, legacy HTTP+SSE with -sse, a spawned stdio server
// with -cmd), negotiates, sends METHOD with PARAMS (default {}), prints the JSON-RPC result as
// one line of JSON on stdout, and ends the session, except after exit codes 4 and 5, when the
// session is left alone so that the server's receipt for the request survives for a later
// resend under the same id (-id).
//
// With -journal FILE, the request is recorded in FILE (created if need be) before its first byte
// is sent, and its outcome after. A run that finds in FILE an unresolved request of the same
// METHOD and PARAMS to the same server (and with -id, that id) left by an earlier run that died
// mid-call resends it, the same bytes under the same id, and prints its outcome as if it were
// its own: a server that keeps receipts and still holds one answers without running it again.
// When resending could run it twice (the server's receipts did not survive, or it declared
// none), mcpcall sends nothing and exits 4 naming the id; run it again with -id ID to resend it
// all the same, once you have looked at the server's state.
//
// Under -journal a command's request id is derived from the command (mcpclient.IDFromKey of the
// server, METHOD and PARAMS, the latter in key order), so the same command run again after a
// success is the same request: a server that still holds its receipt answers with the answer it
// kept, which mcpcall prints, saying so on stderr; otherwise mcpcall sends nothing and exits 5,
// as the request was answered before. -new sends the command as a new request under a new id,
// which runs it again.
//
// With -auth, a server that requires OAuth is signed in to through the browser: mcpcall prints
// the authorization URL, opens it, and waits for the authorization server to redirect back to a
// listener on 127.0.0.1; the tokens are kept in -token-file (mode 0600), so that later runs sign
// in no more while the refresh token lasts. Before the browser opens, mcpcall prints the
// authorization server the MCP server named; -auth-issuer pins it, so that a server naming
// another one is refused.
//
// The two short forms send a tools/call: call TOOL and -tool TOOL take the tool's name, and its
// arguments from -args, a JSON object, or from words: KEY=VALUE gives VALUE as JSON when it
// parses as JSON (12, true, null, "12", [1,2], {"a":1}) and as the string VALUE otherwise;
// KEY:=JSON gives JSON that must parse. The first '=' ends KEY. As METHOD, call is the short
// form's word: MCP names its methods with a '/', and no method named call can be sent.
//
// With -v every frame sent and received is traced on stderr, one line each: -> or <-, the HTTP
// method, endpoint and status (or stdio), and the JSON, cut after 64 KiB. The trace shows no
// credential: of the request headers only the Authorization scheme appears, every URL has its
// userinfo, query values and fragment masked, and the OAuth requests of -auth are not traced.
//
// -h prints the usage on stdout, and exits 0.
//
// A tools/call result is printed as it came: mcpcall lists no tools, so it does not check
// structuredContent against the tool's outputSchema (Client.CallTool checks only tools it has
// listed).
//
// METHOD ping without PARAMS asks whether the server is alive in any revision: it sends ping,
// or server/discover to a 2026-07-28 server, which has no ping, and prints {}.
//
// Exit codes:
//
//	0  result
//	1  usage or local error, found before anything is sent when it is one that every run would
//	   meet: an endpoint that is no http or https URL with a host, a -header that is no
//	   "Name: value" net/http would send, a -cmd program that cannot be run, a tools/call
//	   without a tool name
//	2  definite failure: a JSON-RPC error, an HTTP 4xx other than 401/403/404-session/409/429,
//	   or a tools/call result with isError:true (which is still printed)
//	3  not executed: every attempt was refused before execution (dial, DNS, TLS, 429 or 503
//	   with the server's Retry-After, 401 or 403 that no authorization could clear)
//	4  outcome unknown (a 5xx without Retry-After, a reset after sending, a malformed or
//	   oversized answer: the request may have run)
//	5  request-id conflict (409, MCP_REQUEST_ID_REUSED, an in-flight refusal of a resend; with
//	   -journal, an -id answered before that no receipt can answer again, or one another
//	   request replaced: nothing is sent)
//
// stdout is empty unless a result arrived; stderr has one line naming the error class, the
// request id (the one the error names), the session id and the attempts, after what a stdio
// server wrote to its stderr and the -v trace. A server refusing the request for want of
// authorization, when -auth was not given, is told in that line to run again with -auth.
//
// No text from the server reaches the terminal able to act on it. In mcpcall's stderr line every
// character that is not printable (C0 and C1 controls, DEL, newlines, line separators,
// bidirectional formatting, bytes that are no UTF-8) is escaped as Go quotes it: \x1b, \r, \n,
// \u009b. A stdio server's stderr is passed on with the same escapes but its newlines and tabs.
// stdout's JSON carries those characters as \u escapes, which decode to the same text (a byte
// that is no UTF-8 as U+FFFD).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/redact"
	"github.com/northstar-mcp/mcpclient/internal/termsafe"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/transport"
)

// Exit codes of the contract.
const (
	exitOK          = 0
	exitLocal       = 1
	exitFailed      = 2
	exitNotExecuted = 3
	exitUnknown     = 4
	exitConflict    = 5
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

type options struct {
	url, sse, cmd string
	id            string
	idSet         bool
	attempts      int
	retry         string
	timeout       time.Duration
	headers       headerFlags
	auth          bool
	tokenFile     string
	authIssuer    string
	journal       string
	fresh         bool // -new
	verbose       bool
	tool          string
	toolArgs      string
	toolArgsSet   bool
	// httpClient is the client of the HTTP transports when -v traces them, or nil.
	httpClient *http.Client
	method     string
	params     json.RawMessage
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `usage: mcpcall [flags] METHOD [PARAMS_JSON | @FILE | -]
       mcpcall [flags] call TOOL [KEY=VALUE | KEY:=JSON ...]
       mcpcall [flags] -tool TOOL [-args JSON_OBJECT | KEY=VALUE | KEY:=JSON ...]

A tool's KEY=VALUE argument is JSON when VALUE parses as JSON (12, true, null, "12", [1],
{"a":1}), else the string VALUE; KEY:=JSON must parse.

`)
	fs.PrintDefaults()
}

// parseArgs reads the command line. -h and -help print the usage on stdout and return
// flag.ErrHelp; what the flag package says of a bad flag goes to stderr.
func parseArgs(args []string, stdin io.Reader, stdout, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("mcpcall", flag.ContinueOnError)
	var flagOutput bytes.Buffer
	fs.SetOutput(&flagOutput)
	fs.StringVar(&o.url, "url", "", "Streamable HTTP endpoint")
	fs.StringVar(&o.sse, "sse", "", "legacy HTTP+SSE endpoint")
	fs.StringVar(&o.cmd, "cmd", "", "spawn a stdio server (split like a shell)")
	fs.Func("id", "send METHOD under this request id (a JSON string) instead of a generated one", func(v string) error {
		o.id, o.idSet = v, true
		return nil
	})
	fs.IntVar(&o.attempts, "attempts", mcpclient.DefaultMaxAttempts, "at most N sends of one request (1 = no retry)")
	fs.StringVar(&o.retry, "retry", "auto", "auto | always | never")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "overall deadline")
	fs.Var(&o.headers, "header", "extra HTTP header 'K: V', repeatable")
	fs.BoolVar(&o.auth, "auth", false, "authorize with OAuth when the server asks: sign in through the browser (a loopback redirect), tokens kept in -token-file")
	fs.StringVar(&o.journal, "journal", "", "record the request in this file before sending it, under an id derived from the command: the same command run again, after a kill mid-call or a success, is the same request, which the server's receipt answers without running it again")
	fs.BoolVar(&o.fresh, "new", false, "with -journal, send the command as a new request under a new id even if it was answered before: it runs again")
	fs.StringVar(&o.authIssuer, "auth-issuer", "", "the only authorization server (issuer URL) -auth signs in with")
	fs.StringVar(&o.tokenFile, "token-file", "", "where -auth keeps tokens (mode 0600; default: the user's config directory, mcpclient/tokens.json)")
	fs.BoolVar(&o.verbose, "v", false, "trace every frame sent and received on stderr, with its HTTP method, endpoint and status; credentials are masked")
	fs.StringVar(&o.tool, "tool", "", "call this tool (tools/call); its arguments come from -args or from KEY=VALUE words")
	fs.Func("args", "the arguments of -tool, a JSON object", func(v string) error {
		o.toolArgs, o.toolArgsSet = v, true
		return nil
	})
	fs.Usage = func() { usage(fs) }
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		io.Copy(stdout, &flagOutput)
		return nil, err
	}
	io.Copy(stderr, &flagOutput)
	if err != nil {
		return nil, err
	}
	endpoints := 0
	for _, e := range []string{o.url, o.sse, o.cmd} {
		if e != "" {
			endpoints++
		}
	}
	switch {
	case endpoints != 1:
		return nil, errors.New("give exactly one of -url, -sse and -cmd")
	case o.toolArgsSet && o.tool == "":
		return nil, errors.New("-args needs -tool")
	case o.tool == "" && (fs.NArg() < 1 || fs.NArg() > 2) && fs.Arg(0) != "call":
		return nil, errors.New("give METHOD and at most one PARAMS argument")
	case o.attempts < 1:
		return nil, errors.New("-attempts must be at least 1")
	case o.timeout <= 0:
		return nil, errors.New("-timeout must be positive")
	case o.tool == "" && fs.Arg(0) == "":
		return nil, errors.New("METHOD is empty")
	case o.auth && o.cmd != "":
		return nil, errors.New("-auth is for -url and -sse: a stdio server takes no OAuth")
	case o.tokenFile != "" && !o.auth:
		return nil, errors.New("-token-file needs -auth")
	case o.authIssuer != "" && !o.auth:
		return nil, errors.New("-auth-issuer needs -auth")
	case o.fresh && o.journal == "":
		return nil, errors.New("-new needs -journal: without it every run is a new request")
	case o.fresh && o.idSet:
		return nil, errors.New("give -new or -id, not both")
	}
	for name, endpoint := range map[string]string{"-url": o.url, "-sse": o.sse} {
		if endpoint != "" {
			if err := checkEndpoint(endpoint); err != nil {
				return nil, fmt.Errorf("%s %q: %w", name, redact.URL(endpoint), err)
			}
		}
	}
	switch {
	case o.tool != "":
		if err := o.toolCall(o.tool, fs.Args()); err != nil {
			return nil, err
		}
		return o, nil
	case fs.Arg(0) == "call":
		if fs.NArg() < 2 || fs.Arg(1) == "" {
			return nil, errors.New("call needs the tool's name: call TOOL [KEY=VALUE ...]")
		}
		if err := o.toolCall(fs.Arg(1), fs.Args()[2:]); err != nil {
			return nil, err
		}
		return o, nil
	}
	o.method = fs.Arg(0)
	raw := []byte("{}")
	if fs.NArg() == 2 {
		var err error
		switch p := fs.Arg(1); {
		case p == "-":
			raw, err = io.ReadAll(stdin)
		case strings.HasPrefix(p, "@"):
			raw, err = os.ReadFile(p[1:])
		default:
			raw = []byte(p)
		}
		if err != nil {
			return nil, fmt.Errorf("reading PARAMS: %w", err)
		}
	}
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("PARAMS must be a JSON object")
	}
	o.params = raw
	if o.method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &p); p.Name == "" {
			return nil, errors.New(`tools/call PARAMS need the tool's name: {"name":"…","arguments":{…}}`)
		}
	}
	return o, nil
}

// toolCall makes the tools/call of tool with the arguments of -args or of KEY=VALUE words.
func (o *options) toolCall(tool string, words []string) error {
	arguments := json.RawMessage("{}")
	switch {
	case !utf8.ValidString(tool):
		return errors.New("the tool's name is not UTF-8, which JSON requires")
	case o.toolArgsSet && len(words) > 0:
		return errors.New("give the tool's arguments as -args or as KEY=VALUE words, not both")
	case o.toolArgsSet:
		raw := bytes.TrimSpace([]byte(o.toolArgs))
		if !json.Valid(raw) || len(raw) == 0 || raw[0] != '{' {
			return errors.New("-args must be a JSON object")
		}
		arguments = raw
	case len(words) > 0:
		a, err := toolArguments(words)
		if err != nil {
			return err
		}
		arguments = a
	}
	params, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{tool, arguments})
	if err != nil {
		return fmt.Errorf("the tool's arguments: %w", err)
	}
	o.method, o.params = "tools/call", params
	return nil
}

// checkEndpoint refuses an endpoint that no attempt could ever reach.
func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		// Not err: url.Parse quotes the URL, and names the part it choked on.
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("the scheme must be http or https")
	case u.Host == "":
		return errors.New("no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("the port must be 1 to 65535")
		}
	}
	return nil
}

// transport builds the transport; a stdio server's stderr goes to term.
func (o *options) transport(term *terminal) (transport.Transport, error) {
	header := http.Header{}
	for i, h := range o.headers {
		// The header itself is not shown: its value may be a credential.
		k, v, ok := strings.Cut(h, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("-header #%d is not 'K: V'", i+1)
		case !validHeaderName(k):
			return nil, fmt.Errorf("-header #%d: the name is not an HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", i+1)
		case !validHeaderValue(v):
			return nil, fmt.Errorf("-header %s: the value holds a control character (CR, LF, NUL...)", k)
		}
		header.Add(k, v)
	}
	var auth transport.Authorizer
	if o.auth {
		a, err := o.authorizer(term)
		if err != nil {
			return nil, err
		}
		auth = a
	}
	var trace *tracer
	if o.verbose {
		trace = &tracer{term: term}
		if o.cmd == "" && o.httpClient == nil {
			o.httpClient = trace.httpClient()
		}
	}
	switch {
	case o.url != "":
		return &transport.HTTP{URL: o.url, Header: header, Authorizer: auth, Client: o.httpClient}, nil
	case o.sse != "":
		return &transport.SSE{URL: o.sse, Header: header, Authorizer: auth, Client: o.httpClient}, nil
	}
	words, err := splitCommand(o.cmd)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, errors.New("-cmd is empty")
	}
	if _, err := exec.LookPath(words[0]); err != nil {
		return nil, fmt.Errorf("-cmd: %w", err)
	}
	cmd := &transport.Command{Path: words[0], Args: words[1:], Stderr: term}
	if trace != nil {
		return &tracedTransport{next: cmd, t: trace}, nil
	}
	return cmd, nil
}

func (o *options) policy() (mcpclient.RetryPolicy, error) {
	p := mcpclient.DefaultRetryPolicy()
	p.MaxAttempts = o.attempts
	switch o.retry {
	case "auto":
		p.Mode = mcpclient.RetryAuto
	case "always":
		p.Mode = mcpclient.RetryAlways
	case "never":
		p.Mode = mcpclient.RetryNever
	default:
		return p, fmt.Errorf("-retry %q: want auto, always or never", o.retry)
	}
	return p, nil
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	term := newTerminal(stderr)
	defer term.close()
	o, err := parseArgs(args, stdin, stdout, term)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		term.printf("mcpcall: usage: %v", err)
		return exitLocal
	}
	tr, err := o.transport(term)
	if err != nil {
		term.printf("mcpcall: usage: %v", err)
		return exitLocal
	}
	if o.httpClient != nil {
		defer o.httpClient.CloseIdleConnections() // after the client's Close: its DELETE
	}
	policy, err := o.policy()
	if err != nil {
		term.printf("mcpcall: usage: %v", err)
		return exitLocal
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	clientOpts := []mcpclient.Option{mcpclient.WithRetryPolicy(policy),
		mcpclient.WithClientInfo(mcpclient.Implementation{Name: "mcpcall", Version: mcpclient.Version})}
	if o.journal != "" {
		j, err := journal.OpenFile(o.journal)
		if err != nil {
			term.printf("mcpcall: journal: %v", err)
			return exitLocal
		}
		defer j.Close() // after the client's: what it settled is written
		clientOpts = append(clientOpts, mcpclient.WithJournal(j))
	}
	c, err := mcpclient.Connect(ctx, tr, clientOpts...)
	if err != nil {
		// Nothing of METHOD was sent.
		code := exitCode(err)
		if code == exitUnknown {
			code = exitNotExecuted
		}
		report(term, o.hint(err), "")
		return code
	}
	var callOpts []mcpclient.CallOption
	if o.idSet {
		callOpts = append(callOpts, mcpclient.WithRequestID(mcpclient.StringID(idText(o.id))))
	}
	if o.method == "ping" && isEmptyObject(o.params) {
		// Client.Ping asks whether the server is alive in every revision, 2026-07-28 included,
		// which has no ping.
		if err := c.Ping(ctx, callOpts...); err != nil {
			return failed(c, err, term, o)
		}
		c.Close()
		io.WriteString(stdout, "{}\n")
		return exitOK
	}
	var req *mcpclient.Request
	if o.journal != "" {
		var code int
		if req, code = recoverRequest(ctx, c, o, term); code >= 0 {
			return code
		}
		if !o.idSet && !o.fresh {
			// The same command is the same request: a run after a success finds it answered
			// rather than sending it as a new one.
			id, params, err := commandID(o)
			if err != nil {
				c.Close()
				term.printf("mcpcall: usage: PARAMS: %v", err)
				return exitLocal
			}
			// Sent in the form the id was derived from, so that the same command spelled
			// otherwise is the same bytes under the id.
			o.params = params
			callOpts = append(callOpts, mcpclient.WithRequestID(id))
		}
	}
	if req == nil {
		if req, err = c.NewRequest(o.method, o.params, callOpts...); err != nil {
			session := c.SessionID()
			c.Close()
			report(term, err, session)
			return exitLocal
		}
	}
	resp, err := c.Do(ctx, req)
	session := c.SessionID()
	if err != nil {
		return failed(c, err, term, o)
	}
	// The session ends before the last line, so that -v traces its end before it.
	c.Close()
	if resp.Replayed {
		term.printf("mcpcall: request %s was answered before: this is the answer the server kept for it, not a new run", resp.Request.ID().JSON())
	}
	var line bytes.Buffer
	if err := json.Compact(&line, resp.Result); err != nil {
		term.endTrace()
		term.printf("mcpcall: protocol error: request %s session %q attempts %d: result is not JSON", resp.Request.ID().JSON(), session, resp.Attempts)
		return exitFailed
	}
	stdout.Write(append(termsafe.JSON(line.Bytes()), '\n'))
	if o.method == "tools/call" && isToolError(resp.Result) {
		term.endTrace()
		term.printf("mcpcall: tool error: request %s session %q attempts %d: the result has isError:true", resp.Request.ID().JSON(), session, resp.Attempts)
		return exitFailed
	}
	return exitOK
}

// failed ends the client, leaving the session open when the request's receipt there must
// survive, and reports the error of the request sent: last, after what ending the client brought
// (a stdio server's last words, the -v trace of the session's end).
func failed(c *mcpclient.Client, err error, term *terminal, o *options) int {
	code := exitCode(err)
	session := c.SessionID()
	if code == exitUnknown || code == exitConflict {
		c.Detach() // the session, and the receipt for the request, must survive
	} else {
		c.Close() // ends the session
	}
	report(term, o.hint(err), session)
	return code
}

// hint adds to err what the user can do about it with a flag of mcpcall's.
func (o *options) hint(err error) error {
	if !o.auth && o.cmd == "" && errors.Is(err, mcpclient.ErrUnauthorized) {
		return &hintedError{err: err, hint: "the server wants authorization: run again with -auth to sign in through the browser"}
	}
	if o.journal != "" && !o.idSet && errors.Is(err, mcpclient.ErrAlreadyAnswered) {
		return &hintedError{err: err, hint: "this command was answered before and the server no longer holds the answer: run again with -new to send it as a new request, which runs it again"}
	}
	return err
}

// A hintedError is an error with advice for the user after it.
type hintedError struct {
	err  error
	hint string
}

func (e *hintedError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *hintedError) Unwrap() error { return e.err }

func isEmptyObject(params json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(params, &obj) == nil && len(obj) == 0
}

// idText accepts the id as plain text or as a JSON string literal ("abc" with its quotes).
func idText(v string) string {
	var s string
	if strings.HasPrefix(v, `"`) && json.Unmarshal([]byte(v), &s) == nil {
		return s
	}
	return v
}

func isToolError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

// exitCode maps an error to the contract's exit code.
func exitCode(err error) int {
	if errors.Is(err, transport.ErrMisconfigured) {
		return exitLocal // not "not executed": no later run would fare better
	}
	switch mcpclient.CodeOf(err) {
	case mcpclient.CodeOutcomeUnknown:
		return exitUnknown
	case mcpclient.CodeRequestInFlight, mcpclient.CodeRequestIDReused, mcpclient.CodeAlreadyAnswered, mcpclient.CodeSuperseded:
		return exitConflict
	case mcpclient.CodeNotDelivered, mcpclient.CodeUnauthorized:
		return exitNotExecuted
	case mcpclient.CodeServerError, mcpclient.CodeUnsupportedVersion, mcpclient.CodeProtocol:
		return exitFailed
	}
	return exitLocal
}

// report writes the one stderr line, the last: the error class, the request id, the session id
// and the attempts, and the error, which quotes the server.
func report(term *terminal, err error, session string) {
	class := "error"
	attempts := 0
	var e *mcpclient.Error
	if errors.As(err, &e) {
		class = e.Code.String()
		attempts = e.Attempts
	}
	id := requestIDOf(err)
	if id == "" {
		id = `""`
	}
	term.endTrace()
	term.printf("mcpcall: %s: request %s session %q attempts %d: %v", class, id, session, attempts, err)
}

// requestIDOf returns the JSON text of the id the error names, or "": that of the request of the
// first *mcpclient.Error in its chain that has one, else that of the first *transport.Error that
// names one. A failure to open the session is an *mcpclient.Error without a request, about the
// handshake request its transport error names.
func requestIDOf(err error) string {
	var fromTransport string
	var walk func(error) string
	walk = func(err error) string {
		for err != nil {
			switch e := err.(type) {
			case *mcpclient.Error:
				if !e.Request.ID().IsZero() {
					return e.Request.ID().JSON()
				}
			case *transport.Error:
				if fromTransport == "" {
					fromTransport = e.ID
				}
			}
			switch u := err.(type) {
			case interface{ Unwrap() error }:
				err = u.Unwrap()
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					if id := walk(inner); id != "" {
						return id
					}
				}
				return ""
			default:
				return ""
			}
		}
		return ""
	}
	if id := walk(err); id != "" {
		return id
	}
	return fromTransport
}

// validHeaderName reports whether k is an HTTP token, as net/http requires of a header name.
func validHeaderName(k string) bool {
	for _, c := range []byte(k) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return k != ""
}

// validHeaderValue reports whether net/http would send v: no control character but tab.
func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
