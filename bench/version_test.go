package bench

import (
	"context"
	"fmt"
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
	case *rawHTTP, *rawPipe:
		return rawProtocol
	}
	return "?"
}

// TestVersions logs the protocol revision each client negotiates in each setup (go test -v).
func TestVersions(t *testing.T) {
	ctx := context.Background()
	for _, setup := range []string{"http-json", "http-sse", "memory-pipe", "memory-native"} {
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
				hc, closeIdle := pooledClient(nil)
				defer closeIdle()
				c, err = connectHTTP(ctx, name, serverURL+"/"+setup[len("http-"):], hc)
			}
			if err != nil {
				t.Fatalf("%s %s: %v", setup, name, err)
			}
			t.Log(fmt.Sprintf("%-13s %-5s %s", setup, name, protocolVersion(c)))
			c.close()
		}
	}
}
