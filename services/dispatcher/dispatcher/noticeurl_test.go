package dispatcher

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/platform/netguard"
	"github.com/hookline/hookline/sdk/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
)

// The operator's notice webhook has an allow-list of its own
// (--notice-webhook-allow-cidrs): the tenants' lists do not admit it, its
// list does not admit tenants' receivers, and no list admits a metadata
// address, checked at start for a literal and at every dial.
func TestNoticeWebhookHasItsOwnAllowList(t *testing.T) {
	rx := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rx.Close()
	base, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	base.NoticeWebhookURL, base.NoticeWebhookSecret = rx.URL, sign.GenerateSecret()
	base.Secrets.InsecurePlaintext = true // unit tests: no key file
	tests := []struct {
		name      string
		configure func(*Config)
		ok        bool
	}{
		{"strict", func(*Config) {}, false},
		{"the global list does not apply", func(c *Config) { c.AllowCIDRs = []string{"127.0.0.0/8"} }, false},
		{"a tenant list does not apply", func(c *Config) { c.TenantAllowCIDRs = []string{"acme=127.0.0.0/8"} }, false},
		{"its own list", func(c *Config) { c.NoticeWebhookCIDRs = []string{"127.0.0.0/8"} }, true},
		{"metadata even in dev mode", func(c *Config) {
			c.AllowPrivate, c.NoticeWebhookURL = true, "http://169.254.169.254/latest/meta-data/"
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.configure(&cfg)
			_, err := New(cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("New: %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "--notice-webhook-url") {
				t.Fatalf("error %q does not name the flag", err)
			}
		})
	}

	// At dial time: a name resolving to loopback reaches the webhook
	// through its list, and no tenant's receiver through it.
	cfg := base
	cfg.NoticeWebhookURL = strings.Replace(rx.URL, "127.0.0.1", "localhost", 1)
	cfg.NoticeWebhookCIDRs = []string{"127.0.0.0/8", "::1/128"}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := sign.NewSigner(cfg.NoticeWebhookSecret)
	req := attempt.Request{URL: cfg.NoticeWebhookURL, EventID: "ntc_1", Payload: []byte(`{}`), Signer: signer, Timeout: 5 * time.Second}
	if res, err := s.noticeClient.Do(t.Context(), req); err != nil || res.Class != hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		t.Fatalf("notice webhook: %+v, %v", res, err)
	}
	// Refused as a name that does not resolve to an allowed address
	// (netguard.Unresolvable: a private answer reads like a failed one).
	req.Tenant = "acme"
	if res, err := s.handler.attempter.client.Do(t.Context(), req); err != nil || !errors.Is(res.Err, netguard.ErrUnresolvable) || res.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		t.Fatalf("a tenant's receiver at the notice webhook's address: %+v, %v, want refused", res, err)
	}
}
