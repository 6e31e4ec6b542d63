package mcpclient

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/northstar-mcp/mcpclient/internal/headers"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/internal/metakeys"
	"github.com/northstar-mcp/mcpclient/internal/params"
)

// statelessMeta returns the _meta every request of a stateless revision carries: the revision,
// the client's capabilities and identity, and its log level once set. It is shared and never
// modified.
func (c *Client) statelessMeta(version string) (*params.Members, error) {
	var level string
	if l := c.logLevel.Load(); l != nil {
		level = *l
	}
	if level == "" && c.cfg.info == &defaultClientInfo && c.cfg.declaresOnlyReceipts() && isSupportedVersion(version) {
		// The same for every such client: shared by all of them.
		if m, ok := defaultStatelessMeta.Load(version); ok {
			return m.(*params.Members), nil
		}
		m, err := c.encodeStatelessMeta(version, "")
		if err != nil {
			return nil, err
		}
		shared, _ := defaultStatelessMeta.LoadOrStore(version, m.members)
		return shared.(*params.Members), nil
	}
	m := c.meta.Load()
	if m == nil || m.version != version || m.level != level {
		var err error
		if m, err = c.encodeStatelessMeta(version, level); err != nil {
			return nil, err
		}
		c.meta.Store(m)
	}
	return m.members, nil
}

// defaultStatelessMeta holds, by revision, the _meta of the clients that declare only receipts
// under the default clientInfo and set no log level, which is the same for all of them. Its maps
// are never modified.
var defaultStatelessMeta sync.Map // string → *params.Members

// encodeStatelessMeta encodes the _meta of the client's requests in the stateless revision version
// at the log level level ("" for none).
func (c *Client) encodeStatelessMeta(version, level string) (*statelessMetaCache, error) {
	caps := onlyReceiptsCapabilities
	if !c.cfg.declaresOnlyReceipts() {
		var err error
		if caps, err = json.Marshal(c.cfg.statelessCapabilities()); err != nil {
			return nil, err
		}
	}
	info := defaultClientInfoJSON
	if c.cfg.info != &defaultClientInfo {
		var err error
		if info, err = json.Marshal(c.cfg.info); err != nil {
			return nil, err
		}
	}
	var v json.RawMessage
	if jsonrpc.PlainString(version) { // every revision this client speaks
		v = append(append(append(make(json.RawMessage, 0, len(version)+2), '"'), version...), '"')
	} else {
		v, _ = json.Marshal(version) // a Go string always marshals
	}
	set := map[string]json.RawMessage{
		metakeys.ProtocolVersion:    v,
		metakeys.ClientCapabilities: caps,
		metakeys.ClientInfo:         info,
	}
	if level != "" {
		set[metakeys.LogLevel], _ = json.Marshal(level)
	}
	return &statelessMetaCache{version: version, level: level, members: params.NewMembers(set)}, nil
}

// statelessMetaCache is the _meta every request of a stateless revision carries, encoded once: the
// client's capabilities and identity do not change, and its revision and log level seldom do.
// members is never modified once stored.
type statelessMetaCache struct {
	version, level string
	members        *params.Members
}

// statelessCapabilities is what the client declares on each request of a stateless revision:
// always a JSON object per capability, never null.
func (c *config) statelessCapabilities() map[string]json.RawMessage {
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
	b, _ := json.Marshal(c.declaredExtensions()) // objects that marshalled once
	caps["extensions"] = b
	return caps
}

// capabilitiesWith is the client capabilities of a request of a stateless revision that declares
// extensions of its own beside the client's (the request's win over the client's of the same id).
func (c *config) capabilitiesWith(extensions map[string]json.RawMessage) json.RawMessage {
	caps := c.statelessCapabilities()
	declared := c.declaredExtensions()
	for id, settings := range extensions {
		declared[id] = settings
	}
	caps["extensions"], _ = json.Marshal(declared) // objects that marshalled once
	b, _ := json.Marshal(caps)
	return b
}

// declares reports whether req declares the extension id: the client does, for all its
// requests, or req does, for itself. Only a request of a stateless revision declares anything of
// its own.
func (c *Client) declares(req *Request, id string) bool {
	if _, ok := req.extensions[id]; ok && req.version != "" {
		return true
	}
	_, ok := c.cfg.extensions[id]
	return ok
}

// stateless reports whether the current session speaks a stateless revision.
func (c *Client) stateless() bool {
	s := c.current()
	return s != nil && s.stateless
}

// addParamHeaders adds the Mcp-Param-* headers a tools/call with arguments args carries, from
// the listed tool's x-mcp-header declarations. An unlisted tool gets none; a server that
// requires them answers -32020, and the call is sent again after listing the tools.
func (c *Client) addParamHeaders(h http.Header, tool string, args json.RawMessage) error {
	decl := c.tools.headerParamsOf(tool)
	if len(decl) == 0 {
		return nil
	}
	extra, err := headers.ParamValues(decl, args)
	if err != nil {
		return err
	}
	for k, v := range extra {
		h.Set(k, v)
	}
	return nil
}
