package oauth

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestIsPrivateAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "127.8.9.10": true, "::1": true,
		"10.1.2.3": true, "172.16.0.1": true, "172.31.255.255": true, "192.168.1.1": true,
		"169.254.169.254": true, "fe80::1": true, "fe80::1%eth0": true, "fc00::1": true, "fd12::1": true,
		"0.0.0.0": true, "0.1.2.3": true, "::": true, "100.64.0.1": true, "fec0::1": true,
		"::ffff:127.0.0.1": true, "::ffff:169.254.169.254": true, "64:ff9b::a9fe:a9fe": true,
		"8.8.8.8": false, "1.1.1.1": false, "172.32.0.1": false, "100.128.0.1": false,
		"2001:4860:4860::8888": false, "64:ff9b::808:808": false, "::ffff:8.8.8.8": false,
	} {
		if got := isPrivateAddress(netip.MustParseAddr(addr)); got != want {
			t.Errorf("isPrivateAddress(%s) = %v; want %v", addr, got, want)
		}
	}
}

func TestNamesPrivateAddress(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.0.0.7": true, "localhost": true, "LocalHost.": true,
		"app.localhost":   true,
		"mcp.example.com": false, "8.8.8.8": false, "localhost.example.com": false, "10.0.0.7.nip.io": false,
	} {
		if got := namesPrivateAddress(host); got != want {
			t.Errorf("namesPrivateAddress(%q) = %v; want %v", host, got, want)
		}
	}
}

// countingServer counts the connections made to it and the requests it receives.
func countingServer(t *testing.T) (srv *httptest.Server, conns, requests *atomic.Int32) {
	conns, requests = new(atomic.Int32), new(atomic.Int32)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, conns, requests
}

// An MCP server on a public name whose challenge points discovery at the client's own network
// is refused before any connection is made, whether the URL gives the address or a name that
// resolves to it; an MCP server on a private address, or the option unset, is not.
func TestRefusePrivateAddressesInDiscovery(t *testing.T) {
	srv, conns, _ := countingServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	at := func(host string) string { return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/prm" }

	reauthorize := func(refuse bool, endpoint, prm string) error {
		a, err := New(Config{
			Grant:                  ClientCredentials{ClientID: "c", ClientSecret: "s"},
			HTTPClient:             testClient(),
			Resource:               endpoint,
			RefusePrivateAddresses: refuse,
		})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, endpoint, nil)
		resp := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{
			"Www-Authenticate": {`Bearer resource_metadata="` + prm + `"`},
		}}
		return a.Reauthorize(t.Context(), req, resp)
	}

	for _, host := range []string{"127.0.0.1", "localhost"} {
		err := reauthorize(true, "http://mcp.example.com/mcp", at(host))
		var pe *PrivateAddressError
		if !errors.Is(err, ErrPrivateAddress) || !errors.As(err, &pe) || !pe.IP.IsLoopback() {
			t.Fatalf("discovery at %s = %v; want a *PrivateAddressError", at(host), err)
		}
		if !strings.Contains(err.Error(), net.JoinHostPort(host, strconv.Itoa(port))) {
			t.Errorf("error %q does not name the address", err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections reached the refused address", n)
	}

	for _, c := range []struct {
		name     string
		refuse   bool
		endpoint string
	}{
		{"option unset", false, "http://mcp.example.com/mcp"},
		{"MCP server on loopback", true, "http://127.0.0.1:9/mcp"},
		{"MCP server on a private address", true, "http://10.9.9.9/mcp"},
		{"MCP server on localhost", true, "http://localhost:9/mcp"},
	} {
		before := conns.Load()
		if err := reauthorize(c.refuse, c.endpoint, at("127.0.0.1")); errors.Is(err, ErrPrivateAddress) {
			t.Errorf("%s: %v", c.name, err)
		}
		if conns.Load() == before {
			t.Errorf("%s: discovery did not connect", c.name)
		}
	}
}

// getWith sends a GET for u with c and returns the error.
func getWith(c *http.Client, u string) error {
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func guarded(t *testing.T, tr http.RoundTripper, g Grant) *http.Client {
	t.Helper()
	c, err := refusePrivateAddresses(&http.Client{Transport: tr}, func() bool { return false }, g)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A program's own dialer resolves names itself: its connection is checked before any request
// is sent on it.
func TestRefusePrivateAddressesWithOwnDialer(t *testing.T) {
	srv, _, requests := countingServer(t)
	var d net.Dialer
	c := guarded(t, &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}, nil)
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if err := getWith(c, u); !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("GET %s = %v; want ErrPrivateAddress", u, err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the refused address", n)
	}
}

// Through a proxy, which resolves the names itself, an address written in the URL is refused;
// the proxy, the program's own, is connected to wherever it is.
func TestRefusePrivateAddressesThroughProxy(t *testing.T) {
	defer goleak.VerifyNone(t)
	var proxied atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.String()) // answered here; the proxy goes nowhere
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	c := guarded(t, &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}, nil)
	if err := getWith(c, "http://as.example.com/.well-known/oauth-authorization-server"); err != nil {
		t.Fatalf("GET through the proxy: %v", err)
	}
	if got, _ := proxied.Load().(string); got != "http://as.example.com/.well-known/oauth-authorization-server" {
		t.Fatalf("the proxy got %q", got)
	}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[::1]:8080/", "http://localhost/"} {
		if err := getWith(c, u); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("GET %s through the proxy = %v; want ErrPrivateAddress", u, err)
		}
	}
}

// The identity provider is the program's choice, not the server's: it may be inside the
// network.
func TestRefusePrivateAddressesExemptsConfiguredIdP(t *testing.T) {
	idp, _, requests := countingServer(t)
	other, _, _ := countingServer(t)
	c := guarded(t, &http.Transport{DisableKeepAlives: true}, &EnterpriseManaged{IDPTokenEndpoint: idp.URL + "/token"})
	if err := getWith(c, idp.URL+"/token"); err != nil || requests.Load() != 1 {
		t.Fatalf("GET the configured identity provider = %v, %d requests", err, requests.Load())
	}
	if err := getWith(c, other.URL+"/token"); !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("GET another local address = %v; want ErrPrivateAddress", err)
	}
}

func TestRefusePrivateAddressesNeedsHTTPTransport(t *testing.T) {
	_, err := New(Config{
		Grant:                  ClientCredentials{ClientID: "c"},
		HTTPClient:             &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })},
		RefusePrivateAddresses: true,
	})
	if err == nil || !strings.Contains(err.Error(), "RefusePrivateAddresses") {
		t.Fatalf("New = %v; want an error about the transport", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
