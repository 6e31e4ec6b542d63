// Package wait holds the one way the module waits for a while: until a duration passes or a
// context ends, whichever comes first.
package wait

import (
	"context"
	"time"
)

// For waits d, or until ctx ends; it reports whether d passed.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
