package transport

import (
	"errors"
	"net/url"

	"github.com/northstar-mcp/mcpclient/internal/redact"
)

// redactQuery hides the userinfo and the query of the URL that net/http puts in the error of a
// failed request. A legacy endpoint's query names the session (…?sessionId=…), and a Streamable
// HTTP URL's may carry a token: bearers that errors, and the logs they end up in, must not show.
func redactQuery(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact.URL(ue.URL)
	}
	return err
}
