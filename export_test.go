package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Every test checks net/http's kind of promise: each error an exported method returns is, or
// wraps, an *Error. Violations are collected here and reported by TestMain.
var (
	untypedMu sync.Mutex
	untyped   []string
)

func init() {
	testHookReturned = func(err error) {
		var e *Error
		if !errors.As(err, &e) {
			untypedMu.Lock()
			untyped = append(untyped, fmt.Sprintf("%T: %v", err, err))
			untypedMu.Unlock()
		}
	}
}

// UntypedErrors returns the errors returned so far that were not *Error.
func UntypedErrors() []string {
	untypedMu.Lock()
	defer untypedMu.Unlock()
	return append([]string(nil), untyped...)
}

// WithInboxHardLimitForTest lowers the bytes a session queues for its handlers while calls
// await answers.
func WithInboxHardLimitForTest(n int) Option {
	return optionFunc(func(c *config) { c.ownHooks().inbox.hardBytes = n })
}

// WithJoinHookForTest makes f run, under the ledger's lock, whenever a caller joins the attempt
// loop already running for an id.
func WithJoinHookForTest(f func(ID)) Option {
	return optionFunc(func(c *config) { c.ownHooks().onJoin = f })
}

// MaxServerRequestsForTest is the number of server requests a session handles at once.
const MaxServerRequestsForTest = maxServerRequests

// IDKeyForTest is idKey.
func IDKeyForTest(raw []byte) (string, error) { return idKey(raw) }

// EncodeToolCallForTest returns the params CallTool sends.
func EncodeToolCallForTest(name string, args json.RawMessage) []byte {
	var a any
	if args != nil {
		a = args
	}
	call, err := encodeToolCall(name, a, 0)
	if err != nil {
		panic(err)
	}
	return call.raw
}

// WithSupersedeHookForTest makes f run between the building of a superseding request and its
// sending.
func WithSupersedeHookForTest(f func()) Option {
	return optionFunc(func(c *config) { c.ownHooks().onSupersedeBuilt = f })
}

// The tests of this package share one process, and with it the memory of older servers, while
// reusing ports and fixed URLs for servers of every kind: each test starts with a server it
// has never met, unless it asks for the memory (RememberOlderServersForTest).
func init() { olderServers.reset(0, 0) }

// RememberOlderServersForTest makes the process remember older servers for lifetime, max at
// once, for the rest of t; t must not be parallel.
func RememberOlderServersForTest(t interface{ Cleanup(func()) }, lifetime time.Duration, max int) {
	olderServers.reset(lifetime, max)
	t.Cleanup(func() { olderServers.reset(0, 0) })
}

// OlderServersForTest returns the number of endpoints the process remembers as older servers.
func OlderServersForTest() int {
	olderServers.mu.Lock()
	defer olderServers.mu.Unlock()
	return len(olderServers.entries)
}
