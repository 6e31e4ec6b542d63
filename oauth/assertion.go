package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// ParsePrivateKey reads a private key from PEM: PKCS #8, or the older SEC 1 (EC) and PKCS #1
// (RSA) forms.
func ParsePrivateKey(pemBytes []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("oauth: no PEM block in the private key")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("oauth: private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("oauth: a %T cannot sign", key)
	}
	return signer, nil
}

// signingAlgorithm is the JWS algorithm for key: want if given and fitting the key, else the
// key's natural one.
func signingAlgorithm(key crypto.Signer, want string) (string, error) {
	var natural string
	var fits []string
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			natural = "ES256"
		case elliptic.P384():
			natural = "ES384"
		case elliptic.P521():
			natural = "ES512"
		default:
			return "", errors.New("oauth: unsupported elliptic curve")
		}
		fits = []string{natural}
	case *rsa.PrivateKey:
		natural = "RS256"
		fits = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case ed25519.PrivateKey:
		natural = "EdDSA"
		fits = []string{"EdDSA"}
	default:
		return "", fmt.Errorf("oauth: unsupported key type %T", key)
	}
	if want == "" {
		return natural, nil
	}
	for _, f := range fits {
		if f == want {
			return want, nil
		}
	}
	return "", fmt.Errorf("oauth: a %s key cannot sign %s", natural, want)
}

// signJWT signs claims with key under alg, with the given extra protected headers.
func signJWT(key crypto.Signer, alg string, claims any, headers map[jose.HeaderKey]any) (string, error) {
	opts := (&jose.SignerOptions{}).WithType("JWT")
	for k, v := range headers {
		opts = opts.WithHeader(k, v)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: key}, opts)
	if err != nil {
		return "", fmt.Errorf("oauth: signer: %w", err)
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

// clientAssertion is a private_key_jwt client assertion (RFC 7523 §2.2, 3): issued by the
// client about itself, for the authorization server's issuer identifier, valid briefly and
// once (its jti).
func clientAssertion(key crypto.Signer, alg, clientID, audience string) (string, error) {
	now := time.Now()
	return signJWT(key, alg, jwt.Claims{
		Issuer:   clientID,
		Subject:  clientID,
		Audience: jwt.Audience{audience},
		ID:       randomString(16),
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(5 * time.Minute)),
	}, nil)
}
