// Package sse reads Server-Sent Events as the HTML Living Standard defines them.
//
// It frames lines itself, in one linear pass. It used r3labs/sse's EventStreamReader for that
// until issue 6 measured it: r3labs searches its whole buffer again after every read, and at
// 1 MiB, in 16 KiB reads, it took 2.2x the time of this package's scanner (5.4x at 64 KiB,
// 4.3x at 16 MiB; go test -bench=Framing -count=6 ./internal/sse, with benchstat). The r3labs
// reader stays in the tests as the benchmark's baseline.
package sse
