package netguard

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Policy is the guard of every tenant: one Guard permitting the global
// allow-list (--allow-cidrs), and for each tenant the operator gave its
// own CIDRs (--tenant-allow-cidrs), a Guard permitting the global ones
// and the tenant's. Only the operator sets either list; a tenant cannot
// widen its own. A Policy is immutable and safe for concurrent use.
type Policy struct {
	base    *Guard
	tenants map[string]*Guard
}

// NewPolicy returns the Policy of allowAll (dev mode,
// --allow-private-destinations), the global allowCIDRs, and tenantCIDRs,
// each "tenant=CIDR" (a tenant may be named in several entries).
func NewPolicy(allowAll bool, allowCIDRs, tenantCIDRs []string) (*Policy, error) {
	base, err := New(allowAll, allowCIDRs)
	if err != nil {
		return nil, err
	}
	extra := map[string][]netip.Prefix{}
	for _, e := range tenantCIDRs {
		tenant, cidr, ok := strings.Cut(strings.TrimSpace(e), "=")
		if !ok || tenant == "" {
			return nil, fmt.Errorf("netguard: tenant CIDR %q: want tenant=CIDR, e.g. acme=10.20.0.0/16", e)
		}
		p, err := parseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("netguard: tenant %s: %w", tenant, err)
		}
		extra[tenant] = append(extra[tenant], p)
	}
	pol := &Policy{base: base, tenants: make(map[string]*Guard, len(extra))}
	for tenant, ps := range extra {
		pol.tenants[tenant] = base.with(ps)
	}
	return pol, nil
}

// For returns tenant's Guard: its own if the operator gave it CIDRs, the
// global one otherwise.
func (p *Policy) For(tenant string) *Guard {
	if g, ok := p.tenants[tenant]; ok {
		return g
	}
	return p.base
}

// Base returns the Guard of tenants without CIDRs of their own.
func (p *Policy) Base() *Guard { return p.base }

// Tenants returns, sorted, the tenants with CIDRs of their own.
func (p *Policy) Tenants() []string {
	out := make([]string, 0, len(p.tenants))
	for t := range p.tenants {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
