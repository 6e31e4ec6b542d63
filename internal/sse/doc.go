// Package sse reads Server-Sent Events as the HTML Living Standard defines them.
//
// It frames lines itself, in one linear pass, rather than with r3labs/sse's EventStreamReader,
// which searches its whole buffer again after every read and so slows down as events grow (see
// BenchmarkFraming). The r3labs reader stays in the tests as the benchmark's baseline.
package sse
