package attempt

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/hookline/hookline/platform/netguard"
)

// WithEgressProxy sends every connection — to receivers, OAuth2 token
// endpoints and, for a Client made with it, the notice webhook — through
// the HTTP proxy at proxy (http://[user:password@]host:port) with
// CONNECT, so that they leave from the proxy's address (static egress
// IPs). The destination guard still decides: the name is resolved here,
// each address checked, and the proxy is asked to CONNECT to the checked
// IP literal (TLS keeps the original name for SNI and the certificate;
// the Host header is the URL's), so the proxy cannot be used to reach
// an address the guard refuses. Default: no proxy.
func WithEgressProxy(proxy *url.URL) Option {
	return func(c *Client) { c.egress = &egress{proxy: proxy, lookup: net.DefaultResolver.LookupNetIP} }
}

// WithTenantEgressProxies overrides WithEgressProxy for the tenants
// named: each tenant's connections go through its proxy, or directly
// when its proxy is nil. Default: every tenant as WithEgressProxy says.
func WithTenantEgressProxies(proxies map[string]*url.URL) Option {
	return func(c *Client) {
		c.tenantEgress = map[string]*egress{}
		for t, u := range proxies {
			c.tenantEgress[t] = nil
			if u != nil {
				c.tenantEgress[t] = &egress{proxy: u, lookup: net.DefaultResolver.LookupNetIP}
			}
		}
	}
}

// egressFor returns the proxy of tenant's connections (nil: direct).
func (c *Client) egressFor(tenant string) *egress {
	if eg, ok := c.tenantEgress[tenant]; ok {
		return eg
	}
	return c.egress
}

// egress dials through an HTTP CONNECT proxy. Safe for concurrent use.
type egress struct {
	proxy *url.URL
	// lookup resolves a destination's name (tests replace it).
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// dialer returns the DialContext of connections guard admits, through
// the proxy.
func (e *egress) dialer(guard *netguard.Guard) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("egress: port %q: %w", portStr, err)
		}
		ip, err := e.resolve(ctx, guard, host)
		if err != nil {
			return nil, err
		}
		target := netip.AddrPortFrom(ip, uint16(port)).String()
		conn, err := d.DialContext(ctx, "tcp", e.proxy.Host)
		if err != nil {
			return nil, fmt.Errorf("egress proxy %s: %w", e.proxy.Host, err)
		}
		if err := e.connect(ctx, conn, target); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// resolve returns the first address of host the guard admits; an error
// wraps the guard's refusal (classify.ErrRefusedDestination) or the
// resolver's *net.DNSError.
func (e *egress) resolve(ctx context.Context, guard *netguard.Guard, host string) (netip.Addr, error) {
	ips := []netip.Addr{}
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = append(ips, ip)
	} else if ips, err = e.lookup(ctx, "ip", host); err != nil {
		return netip.Addr{}, err
	}
	refused := errors.New("no address")
	for _, ip := range ips {
		if refused = guard.Check(ip); refused == nil {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("egress: %w", refused)
}

// connect asks the proxy on conn for a tunnel to target, within ctx.
func (e *egress) connect(ctx context.Context, conn net.Conn, target string) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
		defer func() { _ = conn.SetDeadline(time.Time{}) }()
	}
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if u := e.proxy.User; u != nil {
		pw, _ := u.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)) + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		return fmt.Errorf("egress proxy %s: %w", e.proxy.Host, err)
	}
	// The client speaks first in TLS and HTTP: nothing follows the
	// proxy's answer until we write, so the reader buffers nothing more.
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fmt.Errorf("egress proxy %s: %w", e.proxy.Host, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("egress proxy %s refused the tunnel: %s", e.proxy.Host, resp.Status)
	}
	return nil
}
