package receipts

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
)

// BearerPrincipal is the default Options.Principal: who the request's bearer token says sent it.
//
//   - A JWT: its issuer and subject (the "iss" and "sub" claims), so that a refreshed token of
//     the same subject finds the same receipts.
//   - Any other bearer token: the token itself, which then must stay the same between a
//     request and its resend (supply a Principal of your own where tokens are opaque and
//     refreshed, from your token introspection).
//   - No bearer token: "", the one principal of an unauthenticated server, where a request's id
//     (a UUID) is the only secret that keeps one client from another's results.
//
// It reads the JWT without verifying it. The middleware answers replays and refusals itself,
// without the wrapped handler, so tokens must be verified in front of it: by an authentication
// middleware that wraps it, or by a gateway. Otherwise a forged token with someone else's
// subject reaches that subject's receipts (still only under an id it knows).
//
// The principal is a hash, never the token or the subject: receipts keep no credential.
func BearerPrincipal(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return ""
	}
	if iss, sub, ok := jwtSubject(token); ok {
		return "jwt:" + digest(iss, sub)
	}
	return "token:" + digest(token)
}

// jwtSubject reads the issuer and subject of a JWS in compact form, unverified.
func jwtSubject(token string) (iss, sub string, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", "", false
	}
	var claims struct {
		Iss string `json:"iss"`
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Sub == "" {
		return "", "", false
	}
	return claims.Iss, claims.Sub, true
}

// digest hashes parts, each prefixed by its length so that no two lists of parts collide.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
