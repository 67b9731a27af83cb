package dispatcher

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/hookline/hookline/platform/netguard"
)

// checkNoticeURL refuses a --notice-webhook-url that is not an absolute
// http(s) URL, or whose literal host guard refuses. A name is checked
// when dialled, like every receiver's.
func checkNoticeURL(raw string, guard *netguard.Guard) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return errors.New("must be an absolute http(s) URL")
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := guard.Check(ip); err != nil {
			return fmt.Errorf("%s is %w", u.Hostname(), err)
		}
	}
	return nil
}
