//go:build !unix

package jsonrpc

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
