package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// ProtectedResourceMetadata is an MCP server's OAuth protected resource metadata (RFC 9728).
type ProtectedResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers,omitempty"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

// ServerMetadata is an authorization server's metadata (RFC 8414, or OpenID Connect
// discovery), the fields the client uses.
type ServerMetadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint                              string   `json:"token_endpoint,omitempty"`
	RegistrationEndpoint                       string   `json:"registration_endpoint,omitempty"`
	ScopesSupported                            []string `json:"scopes_supported,omitempty"`
	GrantTypesSupported                        []string `json:"grant_types_supported,omitempty"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	TokenEndpointAuthSigningAlgValuesSupported []string `json:"token_endpoint_auth_signing_alg_values_supported,omitempty"`
	DPoPSigningAlgValuesSupported              []string `json:"dpop_signing_alg_values_supported,omitempty"`
	ClientIDMetadataDocumentSupported          bool     `json:"client_id_metadata_document_supported,omitempty"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported,omitempty"`
}

// Errors of discovery, found with errors.Is in the chain of an authorization's error.
var (
	// ErrResourceMismatch: the protected resource metadata names another resource than the MCP
	// server the client talks to. Its authorization servers are not trusted with a token.
	ErrResourceMismatch = errors.New("oauth: protected resource metadata is for another resource")
	// ErrIssuerMismatch: an authorization server's metadata, or its authorization response
	// (the iss parameter, RFC 9207), names another issuer than the one the client asked.
	ErrIssuerMismatch = errors.New("oauth: issuer mismatch")
	// ErrNoPKCE: the authorization server does not advertise PKCE with S256, which MCP requires.
	ErrNoPKCE = errors.New("oauth: the authorization server does not support PKCE S256")
	// ErrInsecureEndpoint: the authorization server's metadata names an endpoint that is no
	// absolute http(s) URL, or a plaintext one for an MCP server reached over https, which
	// would put codes, secrets and tokens on the wire in clear.
	ErrInsecureEndpoint = errors.New("oauth: insecure authorization server endpoint")
	// ErrNoMetadata: no authorization server metadata could be found.
	ErrNoMetadata = errors.New("oauth: no authorization server metadata")
)

// maxMetadataSize bounds a metadata document or a registration response.
const maxMetadataSize = 1 << 20

// getJSON fetches u and decodes its JSON body into v. found is false for a 4xx answer, which
// discovery reads as "not here".
func getJSON(ctx context.Context, hc *http.Client, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", discoveryProtocolVersion)
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("oauth: GET %s: HTTP %d", redactURL(u), resp.StatusCode)
	}
	if err := decodeJSON(resp, v); err != nil {
		return false, fmt.Errorf("oauth: GET %s: %w", redactURL(u), err)
	}
	return true, nil
}

// discoveryProtocolVersion is the MCP revision the metadata requests name, as the authorization
// specification asks of a client that has not negotiated one yet.
const discoveryProtocolVersion = "2025-11-25"

func decodeJSON(resp *http.Response, v any) error {
	// Servers label JSON carelessly (text/plain is common), and the body is parsed as JSON
	// whatever the label; an HTML page, though, is a login page or a captive portal, and says so.
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/html" {
		return fmt.Errorf("content type %q, want JSON", mt)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataSize+1))
	if err != nil {
		return err
	}
	if len(body) > maxMetadataSize {
		return fmt.Errorf("more than %d bytes", maxMetadataSize)
	}
	return json.Unmarshal(body, v)
}

// redactURL drops the query and fragment of u for errors and logs.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(invalid URL)"
	}
	p.RawQuery, p.Fragment, p.User = "", "", nil
	return p.String()
}

// canonicalResource is the resource identifier of an MCP endpoint (RFC 8707): its URL without
// query or fragment, scheme and host lowercased, without a trailing slash on the path.
func canonicalResource(u *url.URL) string {
	c := url.URL{Scheme: strings.ToLower(u.Scheme), Host: strings.ToLower(u.Host), Path: strings.TrimSuffix(u.Path, "/")}
	return c.String()
}

// prmURLs lists where the protected resource metadata of the endpoint may be: the URL the
// server's challenge names, else the path-aware well-known location, then the root one.
func prmURLs(endpoint *url.URL, fromChallenge string) ([]string, error) {
	if fromChallenge != "" {
		u, err := endpoint.Parse(fromChallenge)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("oauth: resource_metadata %q is no URL", fromChallenge)
		}
		if u.Scheme == "http" && endpoint.Scheme == "https" {
			return nil, fmt.Errorf("oauth: resource_metadata %s is not https", redactURL(u.String()))
		}
		return []string{u.String()}, nil
	}
	root := url.URL{Scheme: endpoint.Scheme, Host: endpoint.Host, Path: "/.well-known/oauth-protected-resource"}
	var out []string
	if p := strings.TrimSuffix(endpoint.Path, "/"); p != "" {
		withPath := root
		withPath.Path += p
		out = append(out, withPath.String())
	}
	return append(out, root.String()), nil
}

// fetchResourceMetadata finds the protected resource metadata of endpoint and checks that it
// is endpoint's. It returns nil, nil when the server publishes none (a 2025-03-26 server).
func fetchResourceMetadata(ctx context.Context, hc *http.Client, endpoint *url.URL, fromChallenge string) (*ProtectedResourceMetadata, error) {
	urls, err := prmURLs(endpoint, fromChallenge)
	if err != nil {
		return nil, err
	}
	for _, u := range urls {
		var prm ProtectedResourceMetadata
		found, err := getJSON(ctx, hc, u, &prm)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		if !resourceCovers(prm.Resource, endpoint) {
			return nil, fmt.Errorf("%w: %q, the client talks to %s", ErrResourceMismatch, prm.Resource, redactURL(endpoint.String()))
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("oauth: protected resource metadata at %s names no authorization server", redactURL(u))
		}
		return &prm, nil
	}
	if fromChallenge != "" {
		return nil, fmt.Errorf("oauth: no protected resource metadata at %s", redactURL(urls[0]))
	}
	return nil, nil
}

// resourceCovers reports whether the resource identifier a protected resource metadata
// document declares covers endpoint: the same origin, and a path that is endpoint's or one of
// its parents (a server may protect all its paths as one resource).
func resourceCovers(resource string, endpoint *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || r.RawQuery != "" || r.Fragment != "" {
		return false
	}
	if !strings.EqualFold(r.Scheme, endpoint.Scheme) || !strings.EqualFold(hostPort(r), hostPort(endpoint)) {
		return false
	}
	rp := strings.TrimSuffix(r.Path, "/")
	ep := strings.TrimSuffix(endpoint.Path, "/")
	return rp == "" || ep == rp || strings.HasPrefix(ep, rp+"/")
}

// hostPort is u's host with its port, the scheme's default made explicit.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Hostname()) + ":" + port
}

// sameOrigin reports whether a and b share scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && hostPort(a) == hostPort(b)
}

// metadataURLs lists where the metadata of the issuer may be, in the order the MCP
// authorization specification gives: for an issuer with a path, OAuth metadata then OpenID
// discovery with the path inserted, then OpenID discovery with the path appended; for one
// without, OAuth then OpenID.
func metadataURLs(issuer *url.URL) []string {
	origin := url.URL{Scheme: issuer.Scheme, Host: issuer.Host}
	at := func(path string) string { o := origin; o.Path = path; return o.String() }
	p := strings.TrimSuffix(issuer.Path, "/")
	if p == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}
	}
	return []string{
		at("/.well-known/oauth-authorization-server" + p),
		at("/.well-known/openid-configuration" + p),
		at(p + "/.well-known/openid-configuration"),
	}
}

// fetchServerMetadata finds the authorization server metadata of issuer and checks that it
// names issuer (RFC 8414 §3.3): metadata for another issuer is refused, for whoever wrote it
// could send the client's credentials anywhere. found is false when no location had any.
func fetchServerMetadata(ctx context.Context, hc *http.Client, issuer string) (meta *ServerMetadata, found bool, err error) {
	iu, err := url.Parse(issuer)
	if err != nil || (iu.Scheme != "https" && iu.Scheme != "http") || iu.Host == "" || iu.RawQuery != "" || iu.Fragment != "" {
		return nil, false, fmt.Errorf("oauth: authorization server %q is no issuer URL", issuer)
	}
	for _, u := range metadataURLs(iu) {
		var m ServerMetadata
		ok, err := getJSON(ctx, hc, u, &m)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			continue
		}
		if m.Issuer != issuer && m.Issuer != strings.TrimSuffix(issuer, "/") && m.Issuer+"/" != issuer {
			return nil, true, fmt.Errorf("%w: metadata at %s is for %q, not %q", ErrIssuerMismatch, redactURL(u), m.Issuer, issuer)
		}
		if m.AuthorizationEndpoint == "" && m.TokenEndpoint == "" {
			return nil, true, fmt.Errorf("oauth: metadata at %s names no endpoint", redactURL(u))
		}
		return &m, true, nil
	}
	return nil, false, nil
}

// fallbackMetadata is what a 2025-03-26 server without metadata implies: its origin is the
// authorization server, with the default endpoints.
func fallbackMetadata(endpoint *url.URL) *ServerMetadata {
	origin := url.URL{Scheme: endpoint.Scheme, Host: endpoint.Host}
	at := func(p string) string { o := origin; o.Path = p; return o.String() }
	return &ServerMetadata{
		Issuer:                        origin.String(),
		AuthorizationEndpoint:         at("/authorize"),
		TokenEndpoint:                 at("/token"),
		RegistrationEndpoint:          at("/register"),
		CodeChallengeMethodsSupported: []string{"S256"},
	}
}

// checkEndpoints refuses metadata whose issuer or endpoints are no absolute http(s) URLs, or
// are plaintext for an MCP server reached over https. Plaintext stays allowed on loopback
// hosts (local development, tests) and where the MCP server itself is plaintext: there the
// deployment chose no TLS, and refusing would only break it.
func checkEndpoints(resource *url.URL, meta *ServerMetadata) error {
	for _, e := range []struct{ name, value string }{
		{"issuer", meta.Issuer},
		{"authorization_endpoint", meta.AuthorizationEndpoint},
		{"token_endpoint", meta.TokenEndpoint},
		{"registration_endpoint", meta.RegistrationEndpoint},
	} {
		if e.value == "" {
			continue
		}
		u, err := url.Parse(e.value)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("%w: %s is no http(s) URL", ErrInsecureEndpoint, e.name)
		}
		if u.Scheme == "http" && resource.Scheme == "https" && !isLoopbackHost(u.Hostname()) {
			return fmt.Errorf("%w: %s %s is plaintext", ErrInsecureEndpoint, e.name, redactURL(e.value))
		}
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func supports(list []string, v string) bool { return slices.Contains(list, v) }
