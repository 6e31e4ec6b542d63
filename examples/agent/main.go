// Agent shows an agent's tool-calling loop on mcpclient, over stdio and over Streamable HTTP.
//
// A model (a script here: see model.go) picks the tools; the client answers what the server asks
// while a tool runs: sampling/createMessage with the model (WithSamplingHandler),
// elicitation/create with the user (WithElicitationHandler), and progress reports of each call
// (WithProgress). The agent's calls have side effects, and the reply to the booking is lost after
// the table was booked (over HTTP the response stream breaks; over stdio the answer never comes,
// and the call's idle timeout ends it): the call ends with ErrOutcomeUnknown, and the agent looks
// for the booking with a read-only tool before anything else, instead of booking again. How it
// goes on from what it finds, with Resend or SupersedeToolCall when they apply, is in agent.go.
//
// The server is an mcptest server with a bistro's tools (bistro.go), in this same program. Over
// stdio the program runs itself as a child process with the argument serve-stdio, which serves
// its stdin and stdout with mcptest's ServeStream; over HTTP the server runs in process.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// serveStdioArg makes the program the server side over stdio.
const serveStdioArg = "serve-stdio"

// idleTimeout ends a call that hears nothing for that long, neither answer nor progress: over
// stdio a lost reply leaves nothing else to end it.
const idleTimeout = time.Second

func main() {
	if len(os.Args) == 2 && os.Args[1] == serveStdioArg {
		if err := serveStdio(); err != nil {
			fmt.Fprintln(os.Stderr, "agent server:", err)
			os.Exit(1)
		}
		return
	}
	for _, over := range []string{"stdio", "http"} {
		if _, err := run(context.Background(), os.Stdout, over); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
	}
}

// sseAnswers has the HTTP server answer with SSE streams, which carry a call's progress and the
// server's requests on the call's own response stream, and tell the client (retry: 1ms) to
// resume a broken one at once.
var sseAnswers = mcptest.WithSSEResponses(time.Millisecond)

// serveStdio serves the demo's server over this process's stdin and stdout, until stdin ends.
func serveStdio() error {
	srv := mcptest.NewServer(demoServer(&bistro{})...)
	defer srv.Close()
	return srv.ServeStream(context.Background(), os.Stdin, os.Stdout)
}

// A summary is what one run did.
type summary struct {
	Answer string
	// Reservations is how many the bistro holds at the end, as the server says: one per
	// book_table that ran.
	Reservations int
	// Samples, Questions and ProgressReports count what the client's handlers received.
	Samples, Questions, ProgressReports int64
}

// run carries out the demo's task over stdio (this program as a child process) or over
// Streamable HTTP (a server in process), and writes what happens to w.
func run(ctx context.Context, w io.Writer, over string) (*summary, error) {
	var tr transport.Transport
	switch over {
	case "stdio":
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		tr = &transport.Command{Path: exe, Args: []string{serveStdioArg}, Stderr: os.Stderr}
		fmt.Fprintf(w, "== over stdio: %s %s as the server\n", exe, serveStdioArg)
	case "http":
		srv := mcptest.NewHTTPServer(append(demoServer(&bistro{}), sseAnswers)...)
		defer srv.Close()
		tr = srv.Transport()
		fmt.Fprintf(w, "== over Streamable HTTP: %s\n", srv.URL)
	default:
		return nil, fmt.Errorf("no transport %q: stdio or http", over)
	}
	return runAgent(ctx, &printer{w: w}, tr)
}

// runAgent connects to the server behind tr, with the client's handlers, and carries out the
// demo's task. opts go to Connect after the handlers.
func runAgent(ctx context.Context, out *printer, tr transport.Transport, opts ...mcpclient.Option) (*summary, error) {
	t := task{Wish: "quiet", Party: 2, Time: "19:30"}
	m := &model{task: t, out: out}
	u := &user{name: "Ada Lovelace", out: out}
	var progress atomic.Int64
	c, err := mcpclient.Connect(ctx, tr, append([]mcpclient.Option{
		mcpclient.WithSamplingHandler(m.sample),
		mcpclient.WithElicitationHandler(u.answer),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out.printf("connected to %s, protocol %s, receipts: %s", c.ServerInfo().Name, c.ProtocolVersion(), cmp.Or(string(c.Receipts()), "none"))
	out.printf("task: %s", t)

	a := &agent{c: c, model: m, out: out,
		callOpts: []mcpclient.CallOption{
			// A progress handler runs on the goroutine that reads the connection: it only prints.
			mcpclient.WithProgress(func(p mcpclient.Progress) {
				progress.Add(1)
				out.printf("  progress %v/%v: %s", p.Progress, p.Total, p.Message)
			}),
			mcpclient.WithTimeouts(idleTimeout, 0),
		},
		inspectors: map[string]inspector{"book_table": findReservation},
	}
	answer, err := a.run(ctx)
	if err != nil {
		return nil, err
	}
	out.printf("model answers: %s", answer)

	// What the bistro holds now, as the server says: the proof that the table was booked once.
	res, err := c.CallTool(ctx, "find_reservations", nil)
	if err != nil {
		return nil, err
	}
	var held struct {
		Reservations []reservation `json:"reservations"`
	}
	if err := json.Unmarshal(res.StructuredContent, &held); err != nil {
		return nil, err
	}
	out.printf("the bistro holds %d reservation(s):\n%s\n", len(held.Reservations), res.Text())
	return &summary{Answer: answer, Reservations: len(held.Reservations),
		Samples: m.samples.Load(), Questions: u.asked.Load(), ProgressReports: progress.Load()}, nil
}
