package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
	"github.com/northstar-mcp/mcpclient/transport"
)

// A worker process of a fleet: its calls are recorded in the shared table before they are sent;
// at start, and now and then, it takes up what dead workers left unresolved.
func Example() {
	ctx := context.Background()
	j, err := postgres.Connect(ctx, "postgres://agent@db.internal/agents",
		postgres.WithLease(10*time.Second)) // a dead worker's calls wait this long to be taken up
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close() // after the client
	const url = "https://tools.internal/mcp"
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url}, mcpclient.WithJournal(j),
		mcpclient.WithServerIdentity(url)) // the same name in every worker, whatever its route
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for r, err := range c.Recover(ctx) {
		switch {
		case r.Request == nil:
			log.Fatal(err) // the journal could not be read
		case err == nil:
			// Safe to resend: the server's receipts answer for it, or it is idempotent.
			_, err = c.Resend(ctx, r.Request)
		}
		switch {
		case errors.Is(err, mcpclient.ErrRequestInFlight):
			// Another worker took it up first.
		case errors.Is(err, mcpclient.ErrOutcomeUnknown):
			fmt.Println("inspect, then Resend, Supersede or Forget:", r.Request.ID())
		}
	}

	if _, err := c.CallTool(ctx, "book", map[string]any{"seat": "12A"}); err != nil {
		log.Print(err)
	}
}
