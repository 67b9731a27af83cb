package dispatcher

import (
	"fmt"
	"net/url"

	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// egressProxy returns the attempt option of --egress-proxy (none when
// it is empty).
func egressProxy(raw string) ([]attempt.Option, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%q: give http://[user:password@]host:port", u.Redacted())
	}
	return []attempt.Option{attempt.WithEgressProxy(u)}, nil
}
