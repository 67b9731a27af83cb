package dispatcher

import (
	"fmt"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/ids"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// certificateExpiring is the endpoint.client_certificate_expiring notice
// of ep, whose client certificate expires at (credentials.expiring).
func certificateExpiring(ep *hooklinev1.EndpointRecord, at, now time.Time) *hooklinev1.Notice {
	e := ep.GetEndpoint()
	detail := fmt.Sprintf("the client certificate this endpoint presents to its receiver expires at %s (in %s); give it a new one (UpdateEndpoint client_tls)",
		at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Hour))
	if !at.After(now) {
		detail = fmt.Sprintf("the client certificate this endpoint presents to its receiver expired at %s; its attempts fail until it gets a new one (UpdateEndpoint client_tls)",
			at.UTC().Format(time.RFC3339))
	}
	return &hooklinev1.Notice{
		NoticeId: ids.New(ids.Notice, now), Type: hooklinev1.NoticeType_NOTICE_TYPE_CLIENT_CERTIFICATE_EXPIRING,
		TenantId: e.GetTenantId(), EndpointId: e.GetId(), At: timestamppb.New(now),
		ExpiresAt: timestamppb.New(at), Detail: detail,
	}
}
