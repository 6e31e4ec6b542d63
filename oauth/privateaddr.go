package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrPrivateAddress is wrapped by the error of a request refused under
// [Config.RefusePrivateAddresses]; errors.As finds the [*PrivateAddressError] with the address.
var ErrPrivateAddress = errors.New("oauth: refusing to connect to a private, loopback or link-local address")

// PrivateAddressError reports a connection refused under [Config.RefusePrivateAddresses]: the
// MCP server, on a public address, named a URL that leads into the client's own network.
type PrivateAddressError struct {
	// Address is the host and port the request was for, as the URL named them.
	Address string
	// IP is the address it resolved to.
	IP netip.Addr
}

func (e *PrivateAddressError) Error() string {
	return fmt.Sprintf("%v: %s is %s", ErrPrivateAddress, e.Address, e.IP)
}

func (e *PrivateAddressError) Unwrap() error { return ErrPrivateAddress }

var (
	thisNetwork   = netip.MustParsePrefix("0.0.0.0/8")     // reaches the local host on many systems
	sharedAddress = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT, cloud and VPN internals
	siteLocal     = netip.MustParsePrefix("fec0::/10")
	nat64         = netip.MustParsePrefix("64:ff9b::/96") // an IPv4 address behind a NAT64 gateway
)

// isPrivateAddress reports an address inside the client's own host or network: loopback,
// private (RFC 1918, unique local), link-local (which holds the cloud metadata services),
// unspecified and shared address space, also when written as IPv4-mapped or NAT64 IPv6.
func isPrivateAddress(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsUnspecified() ||
		thisNetwork.Contains(ip) || sharedAddress.Contains(ip) || siteLocal.Contains(ip)
}

// namesPrivateAddress reports whether a URL's host is written as a private address, or is
// localhost. A DNS name is not resolved: its owner could answer this question one way and the
// connection another.
func namesPrivateAddress(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && isPrivateAddress(ip)
}

// serverOnPrivateAddress reports whether the MCP server's URL names a private address: then
// the deployment is inside a network, and its authorization server may well be too.
func (a *Authorizer) serverOnPrivateAddress() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.endpoint != nil && namesPrivateAddress(a.endpoint.Hostname())
}

// addressGuard checks, at each connection, the address a server-named URL resolved to.
type addressGuard struct {
	// off reports that private addresses are allowed: the MCP server is on one.
	off func() bool
	// exempt holds the host:port of endpoints the program configured itself (an identity
	// provider), which the server did not choose.
	exempt map[string]bool
	// proxies holds the host:port of the proxies the transport chose for a request: the
	// program's own, connected to wherever they are.
	proxies sync.Map
}

// refusePrivateAddresses returns a copy of c whose connections to a private address are
// refused while the MCP server is not on one. The check is made on the address connected to,
// after name resolution, so a name that resolves one way when looked at and another when
// connected to (DNS rebinding) gains nothing.
func refusePrivateAddresses(c *http.Client, serverOnPrivate func() bool, g Grant) (*http.Client, error) {
	var t *http.Transport
	switch rt := c.Transport.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		return nil, fmt.Errorf("oauth: Config.RefusePrivateAddresses checks the addresses an *http.Transport connects to; HTTPClient.Transport is a %T", rt)
	}
	guard := &addressGuard{off: serverOnPrivate, exempt: map[string]bool{}}
	if idp := configuredEndpoint(g); idp != "" {
		if u, err := url.Parse(idp); err == nil && u.Host != "" {
			guard.exempt[dialAddress(u)] = true
		}
	}

	if proxy := t.Proxy; proxy != nil {
		t.Proxy = func(req *http.Request) (*url.URL, error) {
			p, err := proxy(req)
			if err != nil || p == nil {
				return p, err
			}
			// The proxy resolves the name; an address written in the URL is checked here.
			if !guard.off() && !guard.exempt[dialAddress(req.URL)] {
				if ip, err := netip.ParseAddr(req.URL.Hostname()); err == nil && isPrivateAddress(ip) {
					return nil, &PrivateAddressError{Address: req.URL.Host, IP: ip}
				}
				if namesPrivateAddress(req.URL.Hostname()) {
					return nil, &PrivateAddressError{Address: req.URL.Host, IP: netip.IPv6Loopback()}
				}
			}
			guard.proxies.Store(dialAddress(p), true)
			return p, nil
		}
	}

	plain := t.DialContext
	if plain == nil && t.Dial != nil {
		dial := t.Dial
		plain = func(_ context.Context, network, addr string) (net.Conn, error) { return dial(network, addr) }
	}
	var checked func(ctx context.Context, network, addr string) (net.Conn, error)
	if plain == nil {
		// The address is checked after resolution and before connecting.
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		plain = d.DialContext
		cd := *d
		checked = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c := cd
			c.ControlContext = func(_ context.Context, _, resolved string, _ syscall.RawConn) error {
				return guard.check(addr, resolved)
			}
			return c.DialContext(ctx, network, addr)
		}
	} else {
		// The program's own dialer resolves; its connection is checked before any byte is sent.
		checked = guard.afterDial(plain)
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if guard.allows(addr) {
			return plain(ctx, network, addr)
		}
		return checked(ctx, network, addr)
	}
	t.Dial = nil
	if tls := t.DialTLSContext; tls != nil {
		checkedTLS := guard.afterDial(tls)
		t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if guard.allows(addr) {
				return tls(ctx, network, addr)
			}
			return checkedTLS(ctx, network, addr)
		}
	}
	t.DialTLS = nil

	cp := *c
	cp.Transport = t
	return &cp, nil
}

// dialAddress is the host:port the transport dials for u, lowercased.
func dialAddress(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// configuredEndpoint is the endpoint g talks to that the program configured, if any.
func configuredEndpoint(g Grant) string {
	switch g := g.(type) {
	case EnterpriseManaged:
		return g.IDPTokenEndpoint
	case *EnterpriseManaged:
		if g != nil {
			return g.IDPTokenEndpoint
		}
	}
	return ""
}

// allows reports a connection to addr made without a check: the MCP server is on a private
// address, or addr is the program's own proxy or configured endpoint.
func (g *addressGuard) allows(addr string) bool {
	if g.exempt[strings.ToLower(addr)] {
		return true
	}
	if _, ok := g.proxies.Load(strings.ToLower(addr)); ok {
		return true
	}
	return g.off()
}

// check refuses a resolved address that is private.
func (g *addressGuard) check(addr, resolved string) error {
	ap, err := netip.ParseAddrPort(resolved)
	if err != nil {
		return fmt.Errorf("oauth: connecting to %s: unexpected address %q", addr, resolved)
	}
	if isPrivateAddress(ap.Addr()) {
		return &PrivateAddressError{Address: addr, IP: ap.Addr().Unmap()}
	}
	return nil
}

// afterDial wraps a dialer that resolves names itself: the connection's remote address is
// checked as soon as it is made, and a private one is closed before anything is sent on it.
func (g *addressGuard) afterDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ra, ok := conn.RemoteAddr().(*net.TCPAddr)
		if !ok {
			conn.Close()
			return nil, fmt.Errorf("oauth: connecting to %s: no TCP address to check", addr)
		}
		if err := g.check(addr, ra.AddrPort().String()); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
}
