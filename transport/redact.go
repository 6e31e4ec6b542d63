package transport

import (
	"errors"
	"net/url"
)

// redactQuery hides the query of the URL that net/http puts in the error of a failed request.
// A legacy endpoint's query names the session (…?sessionId=…), and a Streamable HTTP URL's may
// carry a token: bearers that errors, and the logs they end up in, must not show.
func redactQuery(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactedURL(ue.URL)
	}
	return err
}

// redactedURL returns s with its password and the values of its query replaced by "xxxxx".
func redactedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
