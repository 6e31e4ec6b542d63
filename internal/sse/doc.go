// Package sse reads Server-Sent Events as the HTML Living Standard defines them: r3labs/sse's
// EventStreamReader finds the event boundaries, and this package parses the fields.
package sse

import _ "github.com/r3labs/sse/v2" // framing; kept in go.mod until reader.go uses it
