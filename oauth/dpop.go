package oauth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// A DPoPKey is the key that sender-constrains tokens (RFC 9449): the authorization server binds
// each token it issues to the key's public half, and every request that presents the token
// carries a fresh proof signed with the private half. A token that leaks through a log or a
// proxy is useless without the key, which never leaves the process.
type DPoPKey struct {
	signer crypto.Signer
	alg    string
	jwk    jose.JSONWebKey // the public key, embedded in each proof
}

// GenerateDPoPKey returns a new P-256 key, whose proofs are signed with ES256, the algorithm
// every DPoP server supports.
func GenerateDPoPKey() (*DPoPKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("oauth: DPoP key: %w", err)
	}
	return NewDPoPKey(k, "")
}

// NewDPoPKey returns a DPoPKey for an existing private key (ECDSA, RSA or Ed25519), signing with
// alg, or with the key's natural algorithm when alg is empty. A key kept across runs keeps
// stored DPoP-bound tokens usable.
func NewDPoPKey(key crypto.Signer, alg string) (*DPoPKey, error) {
	alg, err := signingAlgorithm(key, alg)
	if err != nil {
		return nil, err
	}
	jwk := jose.JSONWebKey{Key: key.Public(), Algorithm: alg, Use: "sig"}
	if !jwk.Valid() {
		return nil, errors.New("oauth: DPoP key has no valid public JWK")
	}
	return &DPoPKey{signer: key, alg: alg, jwk: jwk}, nil
}

// Algorithm is the JWS algorithm of the key's proofs.
func (k *DPoPKey) Algorithm() string { return k.alg }

// Thumbprint is the key's JWK SHA-256 thumbprint (RFC 7638), base64url: what a server puts in
// a bound token's cnf.jkt claim.
func (k *DPoPKey) Thumbprint() string {
	sum, err := k.jwk.Thumbprint(crypto.SHA256)
	if err != nil { // Valid was checked when the key was made
		panic("oauth: DPoP key thumbprint: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// dpopClaims are a proof's claims (RFC 9449 §4.2).
type dpopClaims struct {
	ID       string           `json:"jti"`
	Method   string           `json:"htm"`
	URI      string           `json:"htu"`
	IssuedAt *jwt.NumericDate `json:"iat"`
	// TokenHash binds the proof to the access token presented with it.
	TokenHash string `json:"ath,omitempty"`
	Nonce     string `json:"nonce,omitempty"`
}

// proof returns a proof for a request of method to u, for accessToken if not empty.
func (k *DPoPKey) proof(method string, u *url.URL, accessToken, nonce string) (string, error) {
	c := dpopClaims{
		ID:       randomString(16),
		Method:   method,
		URI:      proofURI(u),
		IssuedAt: jwt.NewNumericDate(time.Now()),
		Nonce:    nonce,
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		c.TokenHash = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt")
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.alg), Key: k.signer}, opts)
	if err != nil {
		return "", fmt.Errorf("oauth: DPoP signer: %w", err)
	}
	return jwt.Signed(signer).Claims(c).Serialize()
}

// proofURI is the htu claim: the request's URI without query and fragment, which the server
// compares with the URI it received. A request line always has a path, so an origin with none
// is "/" on the server's side.
func proofURI(u *url.URL) string {
	p := &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if p.Path == "" {
		p.Path, p.RawPath = "/", ""
	}
	return p.String()
}

// authorize presents accessToken on req as a DPoP-bound token, with a proof for req.
func (k *DPoPKey) authorize(req *http.Request, accessToken string, nonces *dpopNonces) error {
	p, err := k.proof(req.Method, req.URL, accessToken, nonces.get(req.URL))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "DPoP "+accessToken)
	req.Header.Set("DPoP", p)
	return nil
}

// transport wraps base so that each request (to the token endpoint) carries a proof, and one
// refused for want of a server nonce is sent once more with the nonce the server gave.
func (k *DPoPKey) transport(base http.RoundTripper, nonces *dpopNonces) http.RoundTripper {
	return &dpopTransport{key: k, base: base, nonces: nonces}
}

type dpopTransport struct {
	key    *DPoPKey
	base   http.RoundTripper
	nonces *dpopNonces
}

// maxErrorBody bounds how much of an error answer is read to look for use_dpop_nonce.
const maxErrorBody = 64 << 10

func (t *dpopTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.send(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest || resp.Header.Get("DPoP-Nonce") == "" {
		return resp, err
	}
	// A server that wants a nonce answers 400 use_dpop_nonce with the nonce in DPoP-Nonce
	// (RFC 9449 §8); anything else is the answer.
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error != "use_dpop_nonce" || req.GetBody == nil && req.Body != nil {
		return resp, nil
	}
	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return resp, nil
		}
		retry.Body = b
	}
	return t.send(retry)
}

// send adds a proof to a copy of req (a RoundTripper must not change its request) and
// remembers the nonce the server answers with.
func (t *dpopTransport) send(req *http.Request) (*http.Response, error) {
	p, err := t.key.proof(req.Method, req.URL, "", t.nonces.get(req.URL))
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("DPoP", p)
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		if n := resp.Header.Get("DPoP-Nonce"); n != "" {
			t.nonces.set(req.URL, n)
		}
	}
	return resp, err
}

// dpopNonces are the latest nonces servers gave, by origin: a nonce is the server's, and the
// authorization server's and the resource server's differ.
type dpopNonces struct {
	mu sync.Mutex
	m  map[string]string
}

func newDPoPNonces() *dpopNonces { return &dpopNonces{m: map[string]string{}} }

func (n *dpopNonces) get(u *url.URL) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.m[originOf(u)]
}

func (n *dpopNonces) set(u *url.URL, nonce string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[originOf(u)] = nonce
}

func originOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

// dpopNonceChallenge returns the nonce of a resource server's refusal that asks for one: a
// DPoP challenge with error use_dpop_nonce and the nonce in DPoP-Nonce (RFC 9449 §9).
func dpopNonceChallenge(resp *http.Response) (string, bool) {
	nonce := resp.Header.Get("DPoP-Nonce")
	if nonce == "" || resp.StatusCode != http.StatusUnauthorized {
		return "", false
	}
	for _, c := range challenges(resp.Header) {
		if c.scheme == "dpop" && c.params["error"] == "use_dpop_nonce" {
			return nonce, true
		}
	}
	return "", false
}

// dpopAlgSupported reports whether a server advertising supported accepts key's proofs; a
// server that advertises nothing is taken to accept the common algorithms.
func dpopAlgSupported(key *DPoPKey, supported []string) bool {
	return len(supported) == 0 || slices.Contains(supported, key.alg)
}
