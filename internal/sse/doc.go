// Package sse reads Server-Sent Events as the HTML Living Standard defines them: r3labs/sse's
// EventStreamReader finds the event boundaries, and this package parses the fields.
package sse
