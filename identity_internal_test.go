package mcpclient

import (
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient/transport"
)

// The name a journal records for a server keeps none of the secrets its address may carry, and
// still tells apart addresses that differ only in them.
func TestTransportIdentityKeepsNoSecrets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tr, peer transport.Transport
		secrets  []string
		want     string // a prefix of the identity
	}{
		{
			name:    "http",
			tr:      &transport.HTTP{URL: "https://alice:pw-1f2e@mcp.example.com/mcp?api_key=k-9a8b&tenant=north#frag-77"},
			peer:    &transport.HTTP{URL: "https://alice:pw-1f2e@mcp.example.com/mcp?api_key=k-other&tenant=north#frag-77"},
			secrets: []string{"alice", "pw-1f2e", "k-9a8b", "north", "frag-77"},
			want:    "https://mcp.example.com/mcp?api_key=xxxxx&tenant=xxxxx#xxxxx sha256:",
		},
		{
			name:    "sse",
			tr:      &transport.SSE{URL: "https://mcp.example.com/sse?token=t-5c4d"},
			peer:    &transport.SSE{URL: "https://mcp.example.com/sse?token=t-other"},
			secrets: []string{"t-5c4d"},
			want:    "https://mcp.example.com/sse?token=xxxxx sha256:",
		},
		{
			name:    "unparsable",
			tr:      &transport.HTTP{URL: "htps:bob:pw-3e2f@mcp.example.com"},
			peer:    &transport.HTTP{URL: "htps:bob:pw-other@mcp.example.com"},
			secrets: []string{"bob", "pw-3e2f"},
		},
		{
			name:    "command",
			tr:      &transport.Command{Path: "/usr/bin/mcp-server", Args: []string{"--token", "c-7d6e"}},
			peer:    &transport.Command{Path: "/usr/bin/mcp-server", Args: []string{"--token", "c-other"}},
			secrets: []string{"c-7d6e"},
			want:    `command "/usr/bin/mcp-server" sha256:`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := transportIdentity(tc.tr)
			for _, s := range tc.secrets {
				if strings.Contains(id, s) {
					t.Errorf("identity %q holds %q", id, s)
				}
			}
			if !strings.HasPrefix(id, tc.want) {
				t.Errorf("identity %q, want it to begin %q", id, tc.want)
			}
			if peer := transportIdentity(tc.peer); peer == id {
				t.Errorf("%q names both addresses", id)
			}
			if again := transportIdentity(tc.tr); again != id {
				t.Errorf("identity %q, then %q", id, again)
			}
		})
	}
}

// An address without secrets is named as it is, as journals written before named it.
func TestTransportIdentityKeepsAnAddressWithoutSecrets(t *testing.T) {
	for _, tr := range []transport.Transport{
		&transport.HTTP{URL: "https://mcp.example.com/mcp"},
		&transport.Command{Path: "mcp-server"},
	} {
		if got, raw := transportIdentity(tr), rawTransportIdentity(tr); got != raw {
			t.Errorf("identity %q, want %q", got, raw)
		}
	}
}
