package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/headers"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The per-request _meta keys of the stateless revisions (2026-07-28 and later).
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
)

// legacyOffer is the revision the client offers in initialize.
func (c *Client) legacyOffer() string {
	if c.cfg.version != "" && !isModern(c.cfg.version) {
		return c.cfg.version
	}
	return LatestLegacyProtocolVersion
}

// DiscoverResult is a stateless server's answer to server/discover.
type DiscoverResult struct {
	SupportedVersions []string                   `json:"supportedVersions"`
	Capabilities      ServerCapabilities         `json:"capabilities"`
	Instructions      string                     `json:"instructions,omitempty"`
	ServerInfo        *Implementation            `json:"serverInfo,omitempty"` // before the spec moved it into _meta
	Meta              map[string]json.RawMessage `json:"_meta,omitempty"`
}

func (d *DiscoverResult) serverInfo() Implementation {
	var info Implementation
	if raw, ok := d.Meta[MetaServerInfo]; ok && json.Unmarshal(raw, &info) == nil {
		return info
	}
	if d.ServerInfo != nil {
		return *d.ServerInfo
	}
	return info
}

// A lifecycle is what the opening exchange of a connection settled: a stateless revision, or the
// initialize handshake with the revision to offer.
type lifecycle struct {
	modern  bool
	version string // modern: the revision to use; legacy: the one to offer
	result  *DiscoverResult
	// redial: the probe cost the connection (an older server that ended the session over it);
	// initialize needs a new one.
	redial bool
}

// discoverTimeout bounds the wait for an answer to server/discover: an older server may ignore
// it, or answer 202 and nothing more.
const discoverTimeout = 5 * time.Second

var errNoDiscoverAnswer = errors.New("mcpclient: no answer to server/discover")

// discoverAttempts bounds the server/discover exchanges of one connection: one, and one more
// with the revision a -32022 refusal names.
const discoverAttempts = 2

// discover settles the lifecycle of a new connection by server/discover. Any answer other than
// a DiscoverResult naming a stateless revision the client speaks, or a -32022 refusal naming one,
// identifies an older server; errors are returned only when nothing was learned (the request did
// not get through) or when the pinned stateless revision is refused.
func (c *Client) discover(ctx context.Context, s *session) (lifecycle, error) {
	pinned := c.cfg.version != "" && isModern(c.cfg.version)
	version := LatestProtocolVersion
	if pinned {
		version = c.cfg.version
	}
	legacy := lifecycle{version: c.legacyOffer()}
	for range discoverAttempts {
		req, err := c.build(requestSpec{method: "server/discover", version: version})
		if err != nil {
			return lifecycle{}, err
		}
		probeCtx, cancel := context.WithTimeoutCause(ctx, discoverTimeout, errNoDiscoverAnswer)
		raw, err := s.exchange(probeCtx, req)
		cancel()
		if errors.Is(err, errNoDiscoverAnswer) && ctx.Err() == nil {
			return legacy, nil // no answer within reason: an older server
		}
		if err == nil {
			var res DiscoverResult
			if json.Unmarshal(raw, &res) != nil {
				return legacy, nil
			}
			if v := bestVersion(res.SupportedVersions, version, true); v != "" {
				return lifecycle{modern: true, version: v, result: &res}, nil
			}
			// A legacy server that answers every method with an empty result.
			if pinned {
				return lifecycle{}, &Error{Code: CodeUnsupportedVersion, Err: fmt.Errorf("server/discover named no revision of %v", res.SupportedVersions)}
			}
			return legacy, nil
		}
		var rpc *RPCError
		switch {
		case errors.As(err, &rpc) && rpc.Code == RPCUnsupportedProtocolVersion:
			supported := rpc.supportedVersions()
			if v := bestVersion(supported, version, true); v != "" {
				version = v
				continue
			}
			if v := bestVersion(supported, "", false); v != "" && !pinned {
				return lifecycle{version: v}, nil
			}
			return lifecycle{}, &Error{Code: CodeUnsupportedVersion, Request: req, ID: req.id, Attempts: 1,
				Err: fmt.Errorf("the server speaks %v; this client speaks %v: %w", supported, supportedVersions, err)}
		case pinned && (rpc != nil || transport.OutcomeOf(err) == OutcomeAnswered):
			return lifecycle{}, &Error{Code: CodeServerError, Request: req, ID: req.id, Attempts: 1, Err: err}
		case errors.Is(err, transport.ErrSessionNotFound):
			legacy.redial = true
			return legacy, nil
		case rpc != nil || transport.OutcomeOf(err) == OutcomeAnswered:
			return legacy, nil // whatever refused server/discover is an older server
		}
		return lifecycle{}, err // nothing got through; the caller dials again
	}
	return lifecycle{}, &Error{Code: CodeUnsupportedVersion, Err: errors.New("the server kept refusing the protocol revision it named")}
}

// supportedVersions reads data.supported of a -32022 refusal.
func (e *RPCError) supportedVersions() []string {
	var data struct {
		Supported []string `json:"supported"`
	}
	json.Unmarshal(e.Data, &data) // a refusal without the list names nothing
	return data.Supported
}

// bestVersion picks from the server's list the revision to use: prefer if listed, else the
// newest the client speaks of the wanted era. "" when there is none.
func bestVersion(server []string, prefer string, modern bool) string {
	if prefer != "" && slices.Contains(server, prefer) && isSupportedVersion(prefer) {
		return prefer
	}
	for _, v := range supportedVersions {
		if isModern(v) == modern && slices.Contains(server, v) {
			return v
		}
	}
	return ""
}

// statelessMeta returns the _meta every request of a stateless revision carries: the revision,
// the client's capabilities and identity, and its log level once set. The map is shared and
// never modified.
func (c *Client) statelessMeta(version string) (map[string]json.RawMessage, error) {
	level, _ := c.logLevel.Load().(string)
	m := c.meta.Load()
	if m == nil || m.version != version || m.level != level {
		caps, err := json.Marshal(c.cfg.modernCapabilities())
		if err != nil {
			return nil, err
		}
		info, err := json.Marshal(c.cfg.info)
		if err != nil {
			return nil, err
		}
		v, _ := json.Marshal(version) // a Go string always marshals
		m = &modernMeta{version: version, level: level, set: map[string]json.RawMessage{
			MetaProtocolVersion:    v,
			MetaClientCapabilities: caps,
			MetaClientInfo:         info,
		}}
		if level != "" {
			m.set[MetaLogLevel], _ = json.Marshal(level)
		}
		c.meta.Store(m)
	}
	return m.set, nil
}

// modernMeta is the _meta every request of a stateless revision carries, encoded once: the
// client's capabilities and identity do not change, and its revision and log level seldom do.
// set is never modified once stored.
type modernMeta struct {
	version, level string
	set            map[string]json.RawMessage
}

// modernCapabilities is what the client declares on each request of a stateless revision:
// always a JSON object per capability, never null.
func (c *config) modernCapabilities() map[string]json.RawMessage {
	caps := map[string]json.RawMessage{}
	if c.roots != nil {
		caps["roots"] = json.RawMessage(`{}`)
	}
	if c.sampling != nil {
		caps["sampling"] = json.RawMessage(`{}`)
	}
	if e := c.elicitationCapability(); e != nil {
		caps["elicitation"] = e
	}
	return caps
}

// modern reports whether the current session speaks a stateless revision.
func (c *Client) modern() bool {
	s := c.current()
	return s != nil && s.modern
}

// addParamHeaders adds the Mcp-Param-* headers a tools/call with arguments args carries, from
// the listed tool's x-mcp-header declarations. An unlisted tool gets none; a server that
// requires them answers -32020, and the call is sent again after listing the tools.
func (c *Client) addParamHeaders(h map[string]string, tool string, args json.RawMessage) error {
	decl := c.tools.headerParamsOf(tool)
	if len(decl) == 0 {
		return nil
	}
	extra, err := headers.ParamValues(decl, args)
	if err != nil {
		return err
	}
	for k, v := range extra {
		h[k] = v
	}
	return nil
}
