package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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

// JoinedForTest returns how many callers wait on the attempt loop running for id.
func (l *Ledger) JoinedForTest(id ID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[id.JSON()]; ok && e.flight != nil {
		return e.flight.waiters
	}
	return 0
}

// SetInboxHardLimitForTest lowers the bytes a session queues for its handlers while calls
// await answers, and returns a func restoring it.
func SetInboxHardLimitForTest(n int) (restore func()) {
	old := inboxHardLimitBytes
	inboxHardLimitBytes = n
	return func() { inboxHardLimitBytes = old }
}

// MaxServerRequestsForTest is the number of server requests a session handles at once.
const MaxServerRequestsForTest = maxServerRequests

// IDKeyForTest is idKey.
func IDKeyForTest(raw []byte) (string, error) { return idKey(raw) }

// EncodeToolCallForTest returns the params CallTool sends.
func EncodeToolCallForTest(name string, args json.RawMessage) []byte {
	return encodeToolCall(name, args).raw
}

// SetSupersedeHookForTest makes f run between the building of a superseding request and its
// sending, and returns a func restoring the previous hook.
func SetSupersedeHookForTest(f func()) (restore func()) {
	old := testHookSupersedeBuilt
	testHookSupersedeBuilt = f
	return func() { testHookSupersedeBuilt = old }
}
