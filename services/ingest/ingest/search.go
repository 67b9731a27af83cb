package ingest

import (
	"context"
	"fmt"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/apikey"
	"github.com/hookline/hookline/services/ingest/history"
	"github.com/hookline/hookline/services/ingest/pagetoken"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ListDeliveries lists the caller's deliveries matching the request's
// filters, ordered by id (creation time), paginated by signed tokens.
func (h *deliveryService) ListDeliveries(ctx context.Context, req *hooklinev1.ListDeliveriesRequest) (*hooklinev1.ListDeliveriesResponse, error) {
	s := h.s
	return s.deliveries.listDeliveries(ctx, req, false)
}

// listDeliveries is ListDeliveries, newest first when newest (the
// console's log); a page token works only in the order it was made for.
func (dh *deliveryHistory) listDeliveries(ctx context.Context, req *hooklinev1.ListDeliveriesRequest, newest bool) (*hooklinev1.ListDeliveriesResponse, error) {
	size := pageSize(req.GetPageSize())
	f := history.Filter{EventID: req.GetEventId(), EndpointID: req.GetEndpointId(), EventType: req.GetEventType(), State: req.GetState(), Newest: newest}
	var err error
	if f.Since, f.Until, err = timeRange(req.GetSince(), req.GetUntil()); err != nil {
		return nil, err
	}
	tenant := apikey.TenantFrom(ctx)
	query := deliveryQuery(f)
	after, err := decodeToken(dh.tokens, tenant, query, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	if err := dh.syncIndex(ctx); err != nil {
		return nil, err
	}
	if err := dh.checkOwned(tenant, f); err != nil {
		return nil, err
	}
	page, err := dh.history.Deliveries(tenant, f, after, size)
	if err != nil {
		return nil, historyStatus(err)
	}
	resp := &hooklinev1.ListDeliveriesResponse{Deliveries: page.Items}
	if page.More {
		resp.NextPageToken = dh.tokens.Encode(tenant, query, page.After)
	}
	return resp, nil
}

// checkOwned answers NOT_FOUND for another tenant's event or endpoint,
// like a missing one. An endpoint is known from the endpoints view or,
// once deleted, from its deliveries.
func (dh *deliveryHistory) checkOwned(tenant string, f history.Filter) error {
	if f.EventID != "" {
		ok, err := dh.history.OwnsEvent(tenant, f.EventID)
		if err != nil {
			return historyStatus(err)
		}
		if !ok {
			return status.Errorf(codes.NotFound, "event %q not found", f.EventID)
		}
		return nil
	}
	if f.EndpointID != "" {
		if ep := dh.store.Get(f.EndpointID); ep != nil && ep.GetEndpoint().GetTenantId() == tenant {
			return nil
		}
		ok, err := dh.history.OwnsEndpoint(tenant, f.EndpointID)
		if err != nil {
			return historyStatus(err)
		}
		if !ok {
			return status.Errorf(codes.NotFound, "endpoint %q not found", f.EndpointID)
		}
	}
	return nil
}

// ListEvents lists the caller's events by type and creation time,
// ordered by id, paginated by signed tokens.
func (h *deliveryService) ListEvents(ctx context.Context, req *hooklinev1.ListEventsRequest) (*hooklinev1.ListEventsResponse, error) {
	s := h.s
	size := pageSize(req.GetPageSize())
	f := history.EventFilter{EventType: req.GetEventType()}
	var err error
	if f.Since, f.Until, err = timeRange(req.GetSince(), req.GetUntil()); err != nil {
		return nil, err
	}
	tenant := apikey.TenantFrom(ctx)
	query := fmt.Sprintf("events\x00%s\x00%d\x00%d", f.EventType, unixNano(f.Since), unixNano(f.Until))
	after, err := decodeToken(s.tokens, tenant, query, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	if err := s.deliveries.syncIndex(ctx); err != nil {
		return nil, err
	}
	page, err := s.deliveries.history.Events(tenant, f, after, size)
	if err != nil {
		return nil, historyStatus(err)
	}
	resp := &hooklinev1.ListEventsResponse{}
	for _, ev := range page.Items {
		resp.Events = append(resp.Events, &hooklinev1.EventSummary{EventId: ev.GetEventId(), EventType: ev.GetEventType(), CreatedAt: ev.GetCreatedAt()})
	}
	if page.More {
		resp.NextPageToken = s.tokens.Encode(tenant, query, page.After)
	}
	return resp, nil
}

// deliveryQuery is the canonical form of f that a page token is bound to.
func deliveryQuery(f history.Filter) string {
	q := []string{"deliveries", f.EventID, f.EndpointID, f.EventType, f.State.String(),
		fmt.Sprint(unixNano(f.Since)), fmt.Sprint(unixNano(f.Until))}
	if f.Newest {
		q = append(q, "newest") // only when set: tokens made before it still work
	}
	return strings.Join(q, "\x00")
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// decodeToken returns where the page of token resumes ("": the first
// page), checked by tokens against tenant and query.
func decodeToken(tokens *pagetoken.Codec, tenant, query, token string) (string, error) {
	if token == "" {
		return "", nil
	}
	after, err := tokens.Decode(tenant, query, token)
	if err != nil {
		return "", invalid("page_token", "%v", err)
	}
	return after, nil
}

// pageSize is a request's page size, 0 meaning the default (at most
// maxPageSize: the requests' rule).
func pageSize(n uint32) int {
	if n == 0 {
		return defaultPageSize
	}
	return int(n)
}

// timeRange checks an optional [since, until) range.
func timeRange(since, until *timestamppb.Timestamp) (time.Time, time.Time, error) {
	var lo, hi time.Time
	if since != nil {
		if err := since.CheckValid(); err != nil {
			return lo, hi, invalid("since", "%v", err)
		}
		lo = since.AsTime()
	}
	if until != nil {
		if err := until.CheckValid(); err != nil {
			return lo, hi, invalid("until", "%v", err)
		}
		hi = until.AsTime()
	}
	if since != nil && until != nil && !lo.Before(hi) {
		return lo, hi, invalid("until", "must be after since")
	}
	return lo, hi, nil
}
