// Command echoserver serves the benchmarks' echo servers (see package echoserver) over
// Streamable HTTP on a loopback port: the stateful go-sdk server at /json (JSON answers) and
// /sse (SSE answers), the stateless one at /stateless/json and /stateless/sse, and the mcp-go
// server at /mcpgo/json and /mcpgo/sse. It prints "http://127.0.0.1:PORT" on its first line of
// output and exits when its standard input closes, so that it never outlives the benchmark that
// started it.
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/northstar-mcp/mcpclient/bench/echoserver"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	srv := &http.Server{Handler: echoserver.Handler()}
	log.Fatal(srv.Serve(ln))
}
