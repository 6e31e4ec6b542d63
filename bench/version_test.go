package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// protocolVersion reports the revision a connected client negotiated.
func protocolVersion(c client) string {
	switch c := c.(type) {
	case oursClient:
		return c.c.ProtocolVersion()
	case gosdkClient:
		return c.cs.InitializeResult().ProtocolVersion
	case mcpgoClient:
		return c.version
	case *rawHTTP:
		return c.version
	case *rawPipe:
		return rawProtocol
	}
	return "?"
}

// TestVersions logs the protocol revision each client negotiates in each setup (go test -v):
// http-* with the stateful go-sdk server, stateless-* with the stateless one, mcpgo-* with the
// mcp-go server.
func TestVersions(t *testing.T) {
	ctx := context.Background()
	setups := []string{}
	for _, srv := range []string{"http", "stateless", "mcpgo"} {
		for _, resp := range []string{"json", "sse"} {
			setups = append(setups, srv+"-"+resp)
		}
	}
	for _, setup := range append(setups, "memory-pipe", "memory-native") {
		for _, name := range httpClients {
			var c client
			var err error
			switch setup {
			case "memory-pipe":
				c, err = connectPipe(ctx, name)
			case "memory-native":
				if name == raw {
					continue
				}
				c, err = connectNative(ctx, name)
			default:
				srv, resp, _ := strings.Cut(setup, "-")
				s := map[string]echoServer{"http": gosdkStateful, "stateless": gosdkStateless, "mcpgo": mcpgoServer}[srv]
				hc, closeIdle := pooledClient(nil)
				defer closeIdle()
				c, err = connectServer(ctx, name, s, s.url(serverURL, resp), hc)
			}
			if err != nil {
				t.Fatalf("%s %s: %v", setup, name, err)
			}
			t.Log(fmt.Sprintf("%-15s %-5s %s", setup, name, protocolVersion(c)))
			c.close()
		}
	}
}
