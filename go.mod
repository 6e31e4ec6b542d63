module github.com/northstar-mcp/mcpclient

go 1.25

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/google/uuid v1.6.0
	go.uber.org/goleak v1.3.0
)
