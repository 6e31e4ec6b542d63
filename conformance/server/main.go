// Command server is the MCP server the official conformance suite's server scenarios drive:
// an mcptest server with the fixtures those scenarios expect (tools, resources, prompts,
// completion, skills), served over Streamable HTTP at /mcp.
//
// Usage: server [-addr HOST:PORT] [-v]
//
//	server -revisions
//
// Once listening it prints the endpoint's URL, http://localhost:PORT/mcp, on a line of its own
// on stdout, for a script to read; it serves until interrupted (SIGINT, SIGTERM). -v logs what the
// server does to stderr. -revisions prints the protocol revisions the server speaks, one a line,
// and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "localhost:0", "address to listen on")
	verbose := flag.Bool("v", false, "log what the server does to stderr")
	listRevisions := flag.Bool("revisions", false, "print the protocol revisions the server speaks and exit")
	flag.Parse()
	if *listRevisions {
		for _, r := range revisions {
			fmt.Println(r)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(ctx, *addr, os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, "conformance server:", err)
		os.Exit(1)
	}
}

// endpointPath is where the MCP endpoint is served. The mcptest handler also serves the legacy
// HTTP+SSE transport's paths (/sse, /message) beside whatever path it is given; mounting it on
// this one path alone keeps them out.
const endpointPath = "/mcp"

// run serves the conformance server on addr until ctx ends, after printing its endpoint's URL
// on out.
func run(ctx context.Context, addr string, out io.Writer, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mcp := newServer(log)
	defer mcp.Close()
	mux := http.NewServeMux()
	mux.Handle(endpointPath, mcp)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// localhost, not the address bound: the DNS rebinding scenario needs a localhost URL.
	fmt.Fprintf(out, "http://localhost:%d%s\n", ln.Addr().(*net.TCPAddr).Port, endpointPath)

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Open SSE streams never end by themselves: closing the MCP server ends them, so that
	// Shutdown does not wait for its timeout.
	mcp.Close()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
