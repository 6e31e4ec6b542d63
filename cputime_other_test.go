//go:build !unix

package mcpclient

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
