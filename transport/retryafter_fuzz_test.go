package transport

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// FuzzRetryAfter checks retryAfter against the header's two forms: delay-seconds gives exactly
// that many seconds, an HTTP date in the future the time until it, and anything else nothing.
// It never gives a negative delay, and a larger number of seconds never gives a shorter delay.
func FuzzRetryAfter(f *testing.F) {
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, seed := range []struct {
		v   string
		now int64
	}{
		{"", 0},
		{"0", 0},
		{"3", 0},
		{"120", 0},
		{"1000000", 0},
		{"+5", 0},
		{"007", 0},
		{"-5", 0},
		{" 5", 0},
		{"5 ", 0},
		{"1.5", 0},
		{"1e3", 0},
		{"soon", 0},
		{"9223372036", 0},
		{base.Add(90 * time.Second).Format(http.TimeFormat), 0},
		{base.Add(-time.Minute).Format(http.TimeFormat), 0},
		{base.Format(http.TimeFormat), 0},
		{base.Add(2 * time.Second).Format(time.RFC850), 0},
		{base.Add(time.Hour).Format(time.ANSIC), 0},
		{"Fri, 31 Dec 9999 23:59:59 GMT", 0},
		{"Mon, 01 Jan 0001 00:00:00 GMT", 0},
		{"Sun, 29 Nov 2026 12:00:30 GMT", -3600},
		{"Sun, 29 Nov 2026 12:00:30 PST", 0},
	} {
		f.Add(seed.v, seed.now)
	}
	oneMillion := retryAfter("1000000", base)
	f.Fuzz(func(t *testing.T, v string, nowOffset int64) {
		// now ranges over about ±317 years around base, inside what HTTP dates can name.
		now := base.Add(time.Duration(nowOffset%10_000_000_000) * time.Second)
		got := retryAfter(v, now)
		if got < 0 {
			t.Fatalf("retryAfter(%q, %v) = %v, negative", v, now, got)
		}
		if s, err := strconv.Atoi(v); err == nil {
			switch {
			case s < 0:
				if got != 0 {
					t.Fatalf("retryAfter(%q) = %v, want 0 for negative seconds", v, got)
				}
			case s <= 1_000_000:
				if want := time.Duration(s) * time.Second; got != want {
					t.Fatalf("retryAfter(%q) = %v, want %v", v, got, want)
				}
			default:
				// Too many seconds to take literally may be dropped or capped, never shortened.
				if got != 0 && got < oneMillion {
					t.Fatalf("retryAfter(%q) = %v: shorter than retryAfter(%q) = %v", v, got, "1000000", oneMillion)
				}
			}
			return
		}
		if at, err := http.ParseTime(v); err == nil {
			want := time.Duration(0)
			if at.After(now) {
				want = at.Sub(now)
			}
			if got != want {
				t.Fatalf("retryAfter(%q, %v) = %v, want %v (date %v)", v, now, got, want, at)
			}
			return
		}
		if got != 0 {
			t.Fatalf("retryAfter(%q) = %v for a value that is neither seconds nor an HTTP date", v, got)
		}
	})
}
