package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/headers"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// toolIndex is what the client knows of the server's tools, from its listings: for each tool
// whether a call may run twice without harm (readOnlyHint, idempotentHint), the Mcp-Param-*
// headers its x-mcp-header declarations ask for, its outputSchema, compiled on first use, and
// its task support; and the last complete listing, which ListTools answers from.
//
// A page of a listing adds its tools; a complete listing replaces them all, forgetting tools no
// longer listed. notifications/tools/list_changed empties the index: until the tools are listed
// again no tool is taken for safe, checked or given headers on the word of a listing that may
// predate the change, and a listing that began before the notification is not stored.
type toolIndex struct {
	mu sync.Mutex
	// gen counts the notifications; a listing is stored only under the gen it began in.
	gen uint64
	// held is what the listings since the last notification said; nil when none did, as in a
	// client that never lists its tools. guarded by mu.
	held *toolListings
}

// toolListings is what a toolIndex holds once a listing came.
type toolListings struct {
	complete []*Tool // the last complete listing; nil when none is held
	// completeUntil is when the complete listing goes stale, by the server's ttlMs on its
	// pages (the soonest); zero when no page set one.
	completeUntil time.Time
	byName        map[string]*indexedTool
}

// tool returns the index's entry for the tool name, or nil. x.mu is held.
func (x *toolIndex) tool(name string) *indexedTool {
	if x.held == nil {
		return nil
	}
	return x.held.byName[name]
}

// indexedTool is one tool of the index.
type indexedTool struct {
	tool *Tool
	safe bool
	// until is when the listing that said safe goes stale (zero: never): past it the hint
	// says nothing, for the tool may have changed since.
	until   time.Time
	headers []headers.Param
	schema  *jsonschema.Schema // compiled on first use; nil when there is none to check
	tried   bool               // compiling the schema was tried
}

// generation returns the gen a listing beginning now passes to add and replace.
func (x *toolIndex) generation() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.gen
}

// add indexes one page of a listing that began in generation gen, fresh until until (zero:
// the server set no lifetime).
func (x *toolIndex) add(tools []*Tool, gen uint64, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if gen != x.gen {
		return
	}
	if x.held == nil {
		x.held = new(toolListings)
	}
	if x.held.byName == nil {
		x.held.byName = make(map[string]*indexedTool, len(tools))
	}
	for _, t := range tools {
		if t != nil {
			x.held.byName[t.Name] = indexTool(t, until)
		}
	}
}

// replace installs a complete listing that began in generation gen, fresh until until.
func (x *toolIndex) replace(list []*Tool, gen uint64, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if gen != x.gen {
		return
	}
	h := &toolListings{complete: list, completeUntil: until, byName: make(map[string]*indexedTool, len(list))}
	if h.complete == nil {
		h.complete = []*Tool{}
	}
	for _, t := range list {
		h.byName[t.Name] = indexTool(t, until)
	}
	x.held = h
}

func indexTool(t *Tool, until time.Time) *indexedTool {
	e := &indexedTool{tool: t, safe: t.Annotations.safeToRepeat(), until: until}
	if params, err := headers.Declarations(t.InputSchema); err == nil {
		e.headers = params
	}
	return e
}

// clear empties the index, for a tool list that changed.
func (x *toolIndex) clear() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gen++
	x.held = nil
}

// all returns the last complete listing; ok is false when none is held, or the one held went
// stale.
func (x *toolIndex) all() (tools []*Tool, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.held == nil || x.held.complete == nil || !fresh(x.held.completeUntil, time.Now()) {
		return nil, false
	}
	return slices.Clone(x.held.complete), true
}

// repeatable reports whether the listed tool name says a call may run twice without harm, in
// a listing still fresh: a hint past the lifetime the server gave it may no longer hold.
func (x *toolIndex) repeatable(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.tool(name)
	return e != nil && e.safe && fresh(e.until, time.Now())
}

// staleSafe reports whether the listed tool name was said to be safe to repeat by a listing
// that has gone stale since: only a fresh listing can tell whether it still is.
func (x *toolIndex) staleSafe(name string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.tool(name)
	return e != nil && e.safe && !fresh(e.until, time.Now())
}

// fresh reports whether something fresh until until (zero: for good) still is at now.
func fresh(until, now time.Time) bool { return until.IsZero() || now.Before(until) }

// freshUntil is when a result that arrived at arrival goes stale by its ttlMs; zero when it
// sets none. A ttlMs of 0, or a negative one, makes it stale at once.
func freshUntil(arrival time.Time, ttlMs *int64) time.Time {
	if ttlMs == nil {
		return time.Time{}
	}
	return arrival.Add(time.Duration(max(*ttlMs, 0)) * time.Millisecond)
}

// headerParamsOf returns the x-mcp-header declarations of a listed tool.
func (x *toolIndex) headerParamsOf(name string) []headers.Param {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.tool(name); e != nil {
		return e.headers
	}
	return nil
}

// outputSchema returns the compiled outputSchema of a listed tool, or nil when the tool is not
// listed, declares none, or has one that cannot be compiled without fetching what it refers to.
func (x *toolIndex) outputSchema(name string) *jsonschema.Schema {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.tool(name)
	if e == nil {
		return nil
	}
	if !e.tried {
		e.tried = true
		if len(e.tool.OutputSchema) > 0 {
			e.schema, _ = compileSchema(e.tool.OutputSchema) // unusable schemas are not checked
		}
	}
	return e.schema
}

// noLoader refuses every reference outside the schema itself: a server's schema must not make
// the client fetch URLs or read files.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("mcpclient: schema reference %q not followed", url)
}

func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "mcp:///outputSchema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// checkStructured checks a tool's result against the outputSchema the index gives the tool. A
// tool the index does not hold (never listed, or listed before a list_changed emptied it) is not
// checked, and nothing here lists the tools to find its schema.
func (x *toolIndex) checkStructured(name string, res *CallToolResult) error {
	if res.IsError {
		return nil
	}
	sch := x.outputSchema(name)
	if sch == nil {
		return nil
	}
	if len(res.StructuredContent) == 0 {
		return fmt.Errorf("%w: tool %s returned none", ErrStructuredContent, name)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(res.StructuredContent))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStructuredContent, err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("%w: %v", ErrStructuredContent, err)
	}
	return nil
}

// call sends method with params and decodes the result into out.
func (c *Client) call(ctx context.Context, method string, params, out any, opts ...CallOption) error {
	_, err := c.callResponse(ctx, method, params, out, opts)
	return err
}

// callResponse is call, returning the response too, for callers that name its request later.
func (c *Client) callResponse(ctx context.Context, method string, params, out any, opts []CallOption) (*Response, error) {
	req, err := c.newRequest(method, params, opts)
	if err != nil {
		return nil, returned(err)
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, returned(err)
	}
	if out == nil {
		return resp, nil
	}
	if err := resp.Decode(out); err != nil {
		return nil, returned(&Error{Code: CodeProtocol, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("decoding the %s result: %w", method, err)})
	}
	return resp, nil
}

// Ping checks that the server answers. It sends ping, or, in a stateless revision (2026-07-28),
// which has no ping, server/discover, the cheapest request there; any answer that is not an
// error means the server is alive, and the answer is not used otherwise. Without a live session
// it connects first, since the revision decides the request. Its id is fresh and nothing depends
// on it: both requests are safe to repeat and are re-issued after an uncertain attempt.
func (c *Client) Ping(ctx context.Context, opts ...CallOption) error {
	s, err := c.liveSession(ctx)
	if err != nil {
		return returned(err)
	}
	method := "ping"
	if s.stateless {
		method = "server/discover"
	}
	return c.call(ctx, method, nil, nil, opts...)
}

// liveSession returns the current session, connecting when there is none, for callers whose
// request depends on what the session settled (its revision, the server's capabilities).
func (c *Client) liveSession(ctx context.Context) (*session, error) {
	s, err := c.session(ctx)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Code: CodeNotDelivered, Err: err}
	}
	return s, nil
}

// ListToolsPage returns one page of tools/list, starting at cursor ("" for the first page).
func (c *Client) ListToolsPage(ctx context.Context, cursor string, opts ...CallOption) (*ListToolsResult, error) {
	var res ListToolsResult
	gen := c.tools.generation()
	if err := c.call(ctx, "tools/list", cursorParams{cursor}, &res, opts...); err != nil {
		return nil, err
	}
	c.tools.add(res.Tools, gen, freshUntil(time.Now(), res.TTLMs))
	return &res, nil
}

// Tools iterates over every tool the server lists, fetching pages as needed. It yields the first
// error and stops. A complete listing replaces what the client knows of the tools: the hints
// (readOnlyHint, idempotentHint) that decide whether a tools/call is safe to repeat, the
// outputSchemas CallTool checks against, and the listing ListTools answers from.
func (c *Client) Tools(ctx context.Context) iter.Seq2[*Tool, error] {
	var (
		listed []*Tool
		gen    uint64
		until  time.Time // the soonest any page goes stale
	)
	fetch := func(ctx context.Context, cursor string) ([]*Tool, string, error) {
		if cursor == "" { // a listing begins (again, when the iterator is ranged once more)
			listed, gen, until = nil, c.tools.generation(), time.Time{}
		}
		page, err := c.ListToolsPage(ctx, cursor)
		if err != nil {
			return nil, "", err
		}
		if u := freshUntil(time.Now(), page.TTLMs); !u.IsZero() && (until.IsZero() || u.Before(until)) {
			until = u
		}
		stateless := c.stateless()
		tools := make([]*Tool, 0, len(page.Tools))
		for _, t := range page.Tools {
			if t == nil {
				continue
			}
			if _, err := headers.Declarations(t.InputSchema); err != nil && stateless {
				// The protocol requires leaving out a tool whose headers cannot be sent right.
				c.log.Warn("mcpclient: tool left out of the listing", "tool", t.Name, "err", err)
				continue
			}
			tools = append(tools, t)
		}
		listed = append(listed, tools...)
		return tools, page.NextCursor, nil
	}
	return paginate(ctx, fetch, func() { c.tools.replace(listed, gen, until) })
}

// CachedTools returns the tools of the last complete listing the client holds, and lists them,
// all pages, when it holds none or the one it holds went stale by the lifetime the server gave
// it (ttlMs, 2026-07-28 and later): a complete listing (by Tools, or by CachedTools itself)
// fills the cache and notifications/tools/list_changed empties it. Tools always asks the
// server.
func (c *Client) CachedTools(ctx context.Context) ([]*Tool, error) {
	if tools, ok := c.tools.all(); ok {
		return tools, nil
	}
	return Collect(c.Tools(ctx))
}

// CallTool calls the tool name with args (anything that marshals to a JSON object, or nil).
//
// Its id is a fresh UUID unless pinned with WithRequestID, and the ledger remembers it (see
// [Ledger]). A result with IsError set is the tool's definite answer and is returned, not
// retried. After ErrOutcomeUnknown the *Error holds the frozen request: inspect what the tool
// does (did the reservation happen?) before calling Resend or Supersede with it. To keep the id
// before anything is sent, build the request with NewRequest and send it with Do.
//
// The result's structuredContent is checked against the outputSchema of the tool as the client
// last listed it (Tools, ListTools). CallTool never lists the tools itself, and a tool the client
// holds no listing of (never listed, or listed before a notifications/tools/list_changed) is not
// checked. When the check fails, the tool has run and answered, and CallTool returns both the
// result and an *Error with ErrStructuredContent (CodeStructuredContent) naming the call, as
// io.Reader returns n > 0 with an error: keep what the result says (a booking reference, say)
// before deciding what the mismatch means. With any other error the result is nil.
//
// A call that declares the tasks extension (io.modelcontextprotocol/tasks, with WithExtension for
// the client or for the call) lets a server of a stateless revision answer with a task instead
// of the result. CallTool then follows the task to its end, polling tasks/get at the interval the
// server suggests and answering its requests for input with the client's handlers, and returns
// what the task ended with: the tool's result, the JSON-RPC error that failed it
// (CodeServerError), or that it was cancelled (CodeServerError). WithTimeouts' max bounds the
// whole call, the polls included. If ctx ends first (or that bound passes), the error is
// ErrOutcomeUnknown and names the call and the task, which goes on at the server: Resend the call
// to read the task back from the server's receipt, or follow it by its id with package tasks.
func (c *Client) CallTool(ctx context.Context, name string, args any, opts ...CallOption) (*CallToolResult, error) {
	version := c.statelessVersion()
	call, err := encodeToolCall(name, args, c.metaRoomIn(version))
	if err != nil {
		return nil, returned(&Error{Code: CodeInvalidArgument, Err: fmt.Errorf("arguments of tool %s: %w", name, err)})
	}
	req, err := c.newRequestIn(version, "tools/call", call, opts)
	if err != nil {
		return nil, returned(err)
	}
	return c.sendToolCall(ctx, req)
}

// sendToolCall sends a frozen tools/call and decodes its result.
func (c *Client) sendToolCall(ctx context.Context, req *Request) (*CallToolResult, error) {
	start := time.Now()
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, returned(err)
	}
	if req.version != "" && c.acceptsTask(req) && isTaskAnswer(resp.Result) {
		if req.max > 0 {
			// The caller bounded the call, not only its request: the task's polls count too.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadlineCause(ctx, start.Add(req.max),
				fmt.Errorf("%w after %v: %w", ErrCallTimeout, req.max, context.DeadlineExceeded))
			defer cancel()
		}
		if resp, err = c.followTask(ctx, resp); err != nil {
			return nil, returned(err)
		}
		if req.response != nil {
			*req.response = *resp
		}
	}
	var res CallToolResult
	if err := decodeCallToolResult(resp.Result, &res); err != nil {
		return nil, returned(&Error{Code: CodeProtocol, Request: resp.Request, Attempts: resp.Attempts,
			Err: fmt.Errorf("decoding the tools/call result: %w", err)})
	}
	if err := c.tools.checkStructured(req.name, &res); err != nil {
		return &res, returned(&Error{Code: CodeStructuredContent, Request: resp.Request, Attempts: resp.Attempts, Err: err})
	}
	return &res, nil
}
