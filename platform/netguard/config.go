package netguard

// Config is the destination section of a service's configuration, the
// same flags on ingest (which checks endpoint URLs when they are set) and
// the dispatcher (which checks every dial), so an operator gives both the
// same values. The services embed it; platform/config reads its tags.
type Config struct {
	AllowPrivate     bool     `flag:"allow-private-destinations" env:"HOOKLINE_ALLOW_PRIVATE_DESTINATIONS" usage:"accept endpoints on, and deliver to, loopback and private addresses (development only)"`
	AllowCIDRs       []string `flag:"allow-cidrs" env:"HOOKLINE_ALLOW_CIDRS" usage:"CIDRs every tenant's endpoints may resolve to despite being private, comma-separated; never the cloud metadata addresses"`
	TenantAllowCIDRs []string `flag:"tenant-allow-cidrs" env:"HOOKLINE_TENANT_ALLOW_CIDRS" usage:"per-tenant CIDRs that tenant's endpoints may resolve to despite being private, comma-separated tenant=CIDR (e.g. acme=10.20.0.0/16); never the cloud metadata addresses"`
}

// Policy returns the Policy the configuration names.
func (c Config) Policy() (*Policy, error) {
	return NewPolicy(c.AllowPrivate, c.AllowCIDRs, c.TenantAllowCIDRs)
}
