// OAuth connects to an MCP server that requires authorization, end to end on this machine.
//
// It starts an authorization server (mcptest.AuthServer) and an MCP server it protects, then
// connects as a CLI does: the server's 401 leads the client to the authorization server's
// metadata, it registers itself, and the user signs in through the browser, which comes back
// to a listener on 127.0.0.1 (oauth.Loopback). Here a small HTTP client stands in for the
// browser and the user who approves. The tokens go into a 0600 file, so a second run of the
// client signs in no more. Last, the server revokes every token while a booking is being made:
// the refused call did not run, and the client sends the same request again once authorized.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/oauth"
	"github.com/northstar-mcp/mcpclient/transport"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "oauth:", err)
		os.Exit(1)
	}
}

// bookings is the side effect of the "reserve" tool.
type bookings struct {
	mu    sync.Mutex
	rooms []string
}

func (b *bookings) reserve(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	var args struct {
		Room string `json:"room"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rooms = append(b.rooms, args.Room)
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("booked room " + args.Room)}}, nil
}

func (b *bookings) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.rooms)
}

// browser stands in for the user's browser: it opens the authorization URL and follows the
// authorization server's redirect back to the loopback listener, as a user who approves would.
func browser(signIns *int) func(ctx context.Context, url string) error {
	return func(ctx context.Context, url string) error {
		*signIns++
		fmt.Println("   browser: opening the authorization server's sign-in page")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
}

// connect connects as a CLI run does: the authorization code flow through the loopback
// listener, the tokens in the file.
func connect(ctx context.Context, url, tokenFile string, signIns *int) (*mcpclient.Client, error) {
	redirect := &oauth.Loopback{Open: browser(signIns)}
	auth, err := oauth.New(oauth.Config{
		Grant: oauth.AuthorizationCode{Redirect: redirect, ClientName: "oauth example"},
		Store: oauth.NewFileStore(tokenFile),
	})
	if err != nil {
		return nil, err
	}
	return mcpclient.Connect(ctx, &transport.HTTP{URL: url, Authorizer: auth})
}

func run(ctx context.Context) error {
	as := mcptest.NewAuthServer(mcptest.WithAuthScopes("bookings"))
	defer as.Close()
	b := &bookings{}
	srv := mcptest.NewHTTPServer(
		mcptest.WithAuthorization(as, "bookings"),
		mcptest.WithTool(mcpclient.Tool{Name: "reserve", Description: "Book a room."}, b.reserve),
	)
	defer srv.Close()

	dir, err := os.MkdirTemp("", "mcpclient-oauth-example")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tokenFile := filepath.Join(dir, "tokens.json")

	fmt.Println("1. first run: the server answers 401; the client discovers, registers and signs in")
	var signIns int
	c, err := connect(ctx, srv.URL, tokenFile, &signIns)
	if err != nil {
		return err
	}
	res, err := c.CallTool(ctx, "reserve", map[string]string{"room": "12"})
	if err != nil {
		return err
	}
	c.Close()
	st := as.Stats()
	fmt.Printf("   %s; sign-ins %d, registrations %d, scopes asked %v\n", res.Text(), signIns, st.Registrations, st.Scopes)
	if fi, err := os.Stat(tokenFile); err == nil {
		fmt.Printf("   tokens kept in %s, mode %v\n\n", filepath.Base(tokenFile), fi.Mode().Perm())
	}

	fmt.Println("2. second run: the stored token is used, no browser")
	c, err = connect(ctx, srv.URL, tokenFile, &signIns)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CallTool(ctx, "reserve", map[string]string{"room": "14"}); err != nil {
		return err
	}
	fmt.Printf("   booked room 14; sign-ins still %d\n\n", signIns)
	if signIns != 1 {
		return errors.New("the second run signed in again")
	}

	fmt.Println("3. every token revoked: the next call is refused before it runs, then sent again")
	as.RevokeAll()
	before := b.count()
	req, err := c.NewRequest("tools/call", mcpclient.CallToolParams{Name: "reserve", Arguments: map[string]string{"room": "16"}})
	if err != nil {
		return err
	}
	if _, err := c.Do(ctx, req); err != nil {
		return err
	}
	var refused, served int
	for _, r := range srv.Requests() {
		if r.ID == req.ID() {
			if r.Refused != 0 {
				refused++
			} else {
				served++
			}
		}
	}
	fmt.Printf("   request %v: refused %d time(s), served %d time(s), rooms booked %d (one more); sign-ins %d\n",
		req.ID(), refused, served, b.count()-before, signIns)
	if refused != 1 || served != 1 || b.count()-before != 1 {
		return errors.New("the refused call was not sent again once, under its id")
	}
	return nil
}
