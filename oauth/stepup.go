package oauth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// ErrStepUpRefused reports a step-up (more scopes, after a 403 insufficient_scope) that the
// authorization server did not grant, recently: asking again at once would cost the user
// another sign-in for the same answer, so it is not asked again before RetryAt. errors.As gives
// the *StepUpRefusedError.
var ErrStepUpRefused = errors.New("oauth: the authorization server did not grant the scopes asked")

// StepUpRefusedError is ErrStepUpRefused with the resource, the scopes and when the step-up may
// be tried again.
type StepUpRefusedError struct {
	Resource string
	Scopes   []string
	// RetryAt is when the step-up will be asked again.
	RetryAt time.Time
	// Recently is true when no authorization was attempted, for one had failed before RetryAt.
	Recently bool
	// Err is the authorization server's refusal, if it refused rather than granted less.
	Err error
}

func (e *StepUpRefusedError) Error() string {
	when := "was refused"
	if e.Recently {
		when = "was refused recently"
	}
	msg := fmt.Sprintf("oauth: a step-up to the scopes %q for %s %s; not asked again before %s",
		e.Scopes, e.Resource, when, e.RetryAt.UTC().Format(time.RFC3339))
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *StepUpRefusedError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrStepUpRefused}
	}
	return []error{ErrStepUpRefused, e.Err}
}

// defaultStepUpRetryAfter is how long a failed step-up is remembered when Config says nothing.
const defaultStepUpRetryAfter = 10 * time.Minute

// maxRememberedStepUps bounds the failed step-ups remembered: a server can name any number of
// scope sets, and the memory must not grow with them.
const maxRememberedStepUps = 256

// stepUpMemory remembers the step-ups the authorization server did not grant, per resource and
// scope set, until they may be asked again.
type stepUpMemory struct {
	ttl time.Duration // negative: nothing remembered

	mu     sync.Mutex
	failed map[string]time.Time // by stepUpKey: when it may be asked again
	// lastCreds came from the step-up lastKey, and the authorization server did not say which
	// scopes it granted: if it refuses them again for the same scopes, they were not granted.
	lastCreds *Credentials
	lastKey   string
}

func newStepUpMemory(ttl time.Duration) *stepUpMemory {
	if ttl == 0 {
		ttl = defaultStepUpRetryAfter
	}
	return &stepUpMemory{ttl: ttl, failed: make(map[string]time.Time)}
}

// stepUpKey names a step-up: the resource and the set of scopes asked, in any order.
func stepUpKey(resource string, scopes []string) string {
	s := slices.Clone(scopes)
	slices.Sort(s)
	return resource + " " + strings.Join(slices.Compact(s), " ")
}

// refusedUntil is when the step-up key may be asked again, if it failed recently.
func (m *stepUpMemory) refusedUntil(key string, now time.Time) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.failed[key]
	if ok && !now.Before(until) {
		delete(m.failed, key)
		return time.Time{}, false
	}
	return until, ok
}

// fail remembers that the step-up key failed at now, and returns when it may be asked again.
func (m *stepUpMemory) fail(key string, now time.Time) time.Time {
	if m.ttl < 0 {
		return now
	}
	until := now.Add(m.ttl)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastKey == key {
		m.lastCreds, m.lastKey = nil, ""
	}
	if _, ok := m.failed[key]; !ok && len(m.failed) >= maxRememberedStepUps {
		oldest := ""
		for k, u := range m.failed {
			if !now.Before(u) {
				delete(m.failed, k)
			} else if oldest == "" || u.Before(m.failed[oldest]) {
				oldest = k
			}
		}
		if len(m.failed) >= maxRememberedStepUps {
			delete(m.failed, oldest)
		}
	}
	m.failed[key] = until
	return until
}

// attempted records that c came from the step-up key.
func (m *stepUpMemory) attempted(c *Credentials, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastCreds, m.lastKey = c, key
}

// wasAttempt reports whether c came from the step-up key.
func (m *stepUpMemory) wasAttempt(c *Credentials, key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return c != nil && c == m.lastCreds && key == m.lastKey
}

// stepUpFailed remembers a failed step-up and returns its error; cause is the authorization
// server's refusal, if it refused.
func (a *Authorizer) stepUpFailed(key, resource string, scopes []string, cause error) error {
	until := a.stepUps.fail(key, time.Now())
	a.log.Debug("oauth: step-up not granted", "scopes", scopes, "retry_at", until)
	return &StepUpRefusedError{Resource: resource, Scopes: slices.Clone(scopes), RetryAt: until, Err: cause}
}

// scopeRefused reports whether err is the authorization server's answer to the scopes asked (the
// user or the server refused them), which asking again would not change; a failure of the
// server or the network is no such answer.
func scopeRefused(err error) bool {
	if errors.Is(err, ErrAuthorizationDenied) {
		return true
	}
	var re *oauth2.RetrieveError
	if errors.Is(err, ErrGrant) && errors.As(err, &re) {
		switch re.ErrorCode {
		case "invalid_scope", "access_denied", "unauthorized_client":
			return true
		}
	}
	return false
}

// covers reports whether granted holds every scope of asked.
func covers(granted, asked []string) bool {
	for _, s := range asked {
		if !slices.Contains(granted, s) {
			return false
		}
	}
	return true
}
