package dispatcher

import (
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// An endpoint's client certificate brings one
// endpoint.client_certificate_expiring notice, with the first attempt
// within 14 days of its expiry (or after it), and a new certificate one
// more; none before the window, none for an endpoint without one.
func TestAClientCertificateNearItsExpiryIsNoticedOncePerCertificate(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	c := newCredentials(nil, nil)
	ep := func(notAfter time.Time) *hooklinev1.EndpointRecord {
		return &hooklinev1.EndpointRecord{Endpoint: &hooklinev1.Endpoint{Id: "ep_1", TenantId: "t",
			ClientTls: &hooklinev1.ClientTLS{NotAfter: timestamppb.New(notAfter)}}}
	}
	if _, ok := c.expiring(&hooklinev1.EndpointRecord{Endpoint: &hooklinev1.Endpoint{Id: "ep_2"}}, now); ok {
		t.Fatal("an endpoint without a client certificate is noticed")
	}
	far := ep(now.Add(15 * 24 * time.Hour))
	if _, ok := c.expiring(far, now); ok {
		t.Fatal("a certificate 15 days from its expiry is noticed")
	}
	soon := now.Add(10 * 24 * time.Hour)
	at, ok := c.expiring(ep(soon), now)
	if !ok || !at.Equal(soon) {
		t.Fatalf("a certificate 10 days from its expiry: noticed %v at %v; want noticed, at %v", ok, at, soon)
	}
	if _, ok := c.expiring(ep(soon), now.Add(time.Hour)); ok {
		t.Fatal("the same certificate is noticed twice")
	}
	renewed := now.Add(12 * 24 * time.Hour)
	if at, ok := c.expiring(ep(renewed), now.Add(2*time.Hour)); !ok || !at.Equal(renewed) {
		t.Fatal("a new certificate, also near its expiry, is not noticed")
	}
	n := certificateExpiring(ep(renewed), renewed, now)
	if n.GetType() != hooklinev1.NoticeType_NOTICE_TYPE_CLIENT_CERTIFICATE_EXPIRING || n.GetEndpointId() != "ep_1" || n.GetTenantId() != "t" ||
		!n.GetExpiresAt().AsTime().Equal(renewed) || !strings.Contains(n.GetDetail(), "expires at 2026-12-19T12:00:00Z") {
		t.Fatalf("notice %v", n)
	}
	if d := certificateExpiring(ep(now.Add(-time.Hour)), now.Add(-time.Hour), now).GetDetail(); !strings.Contains(d, "expired at") {
		t.Fatalf("an expired certificate's notice says %q", d)
	}
}
