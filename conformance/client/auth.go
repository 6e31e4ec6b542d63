package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/northstar-mcp/mcpclient/oauth"
)

// authContext is MCP_CONFORMANCE_CONTEXT for the authorization scenarios that hand the client
// credentials.
type authContext struct {
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret"`
	PrivateKeyPEM    string `json:"private_key_pem"`
	SigningAlgorithm string `json:"signing_algorithm"`
	IDPClientID      string `json:"idp_client_id"`
	IDPIDToken       string `json:"idp_id_token"`
	IDPTokenEndpoint string `json:"idp_token_endpoint"`
	ValidJWT         string `json:"valid_jwt"`
}

// clientMetadataURL is the client ID metadata document the suite expects a client to name.
const clientMetadataURL = "https://conformance-test.local/client-metadata.json"

// authorizer builds the Authorizer a scenario calls for; nil for a scenario without
// authorization.
func authorizer(scenario string, log *slog.Logger) (*oauth.Authorizer, error) {
	if !strings.HasPrefix(scenario, "auth/") {
		return nil, nil
	}
	var ac authContext
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &ac); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	// The suite's authorization server redirects at once, with no user to wait for.
	code := oauth.AuthorizationCode{
		Redirect:          &oauth.Headless{RedirectURL: "http://127.0.0.1:3000/callback"},
		ClientMetadataURL: clientMetadataURL,
		ClientName:        "mcpclient-conformance",
	}
	cfg := oauth.Config{Grant: code, Logger: log}
	switch scenario {
	case "auth/pre-registration":
		code.ClientID, code.ClientSecret = ac.ClientID, ac.ClientSecret
		cfg.Grant = code
	case "auth/client-credentials-basic":
		cfg.Grant = oauth.ClientCredentials{ClientID: ac.ClientID, ClientSecret: ac.ClientSecret}
	case "auth/client-credentials-jwt":
		key, err := oauth.ParsePrivateKey([]byte(ac.PrivateKeyPEM))
		if err != nil {
			return nil, err
		}
		cfg.Grant = oauth.ClientCredentials{ClientID: ac.ClientID, PrivateKey: key, SigningAlgorithm: ac.SigningAlgorithm}
	case "auth/wif-jwt-bearer":
		cfg.Grant = oauth.JWTBearer{ClientID: ac.ClientID, Assertion: func(context.Context) (string, error) { return ac.ValidJWT, nil }}
	case "auth/enterprise-managed-authorization":
		cfg.Grant = oauth.EnterpriseManaged{
			IDPTokenEndpoint: ac.IDPTokenEndpoint,
			IDPClientID:      ac.IDPClientID,
			IDToken:          func(context.Context) (string, error) { return ac.IDPIDToken, nil },
			ClientID:         ac.ClientID,
			ClientSecret:     ac.ClientSecret,
		}
	case "auth/dpop", "auth/dpop-nonce":
		key, err := oauth.GenerateDPoPKey()
		if err != nil {
			return nil, err
		}
		cfg.DPoP = key
	}
	return oauth.New(cfg)
}
