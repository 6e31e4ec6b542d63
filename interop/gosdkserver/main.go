// Command gosdkserver runs the interop test server, built on the official MCP go-sdk, over
// stdio (the default) or HTTP.
//
//	gosdkserver [-versions 2025-06-18,...] [-allow-exit]
//	gosdkserver -http 127.0.0.1:8080 [-mode json|sse|stateless|legacy]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient/interop/internal/gosdkserver"
)

func main() {
	versions := flag.String("versions", "", "comma-separated protocol revisions the server negotiates (default: all the SDK has)")
	allowExit := flag.Bool("allow-exit", false, "offer the exit tool, which ends the process (stdio only)")
	addr := flag.String("http", "", "serve HTTP on this address instead of stdio")
	mode := flag.String("mode", "sse", "HTTP mode: json, sse, stateless (Streamable HTTP) or legacy (HTTP+SSE)")
	flag.Parse()

	opts := gosdkserver.Options{AllowExit: *allowExit && *addr == ""}
	if *versions != "" {
		opts.Versions = strings.Split(*versions, ",")
	}
	srv := gosdkserver.New(opts)
	if *addr == "" {
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}

	get := func(*http.Request) *mcp.Server { return srv }
	var h http.Handler
	switch *mode {
	case "json", "sse", "stateless":
		h = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: *mode == "json", Stateless: *mode == "stateless"})
	case "legacy":
		h = mcp.NewSSEHandler(get, nil)
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "gosdkserver: serving %s on http://%s\n", *mode, ln.Addr())
	log.Fatal(http.Serve(ln, h))
}
