package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// TestContentFiltersDeliverOnlyMatchingEvents is [filters]' acceptance
// for content filters: endpoints filtering on the payload, the type and
// the metadata get the events that match and no delivery is written for
// the others; an evaluation error (a metadata key the event lacks) is no
// match, counted per endpoint; a changed filter applies to the events
// published after it.
func TestContentFiltersDeliverOnlyMatchingEvents(t *testing.T) {
	metricsURL, withMetrics := prometheusTelemetry(t)
	st := startStack(t, withMetrics)
	receivers := map[string]*receiver{}
	create := func(filter string, types ...string) string {
		rx := newReceiver(t, http.StatusOK)
		id := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, EventTypes: types, Filter: filter}).GetEndpoint().GetId()
		receivers[id] = rx
		return id
	}
	big := create(`payload.amount > 1000 && payload.currency == "EUR"`)
	vip := create(`type.startsWith("invoice.") && has(payload.customer.vip)`)
	region := create(`metadata.region in ["eu", "uk"]`, "invoice.*")
	all := create("")

	events := []struct {
		typ, payload string
		metadata     map[string]string
		want         []string // the endpoints it is delivered to
	}{
		{"invoice.paid", `{"amount": 1500, "currency": "EUR", "customer": {"id": "cus_1"}}`, map[string]string{"region": "us"}, []string{big, all}},
		{"invoice.paid", `{"amount": 10, "currency": "EUR", "customer": {"id": "cus_2", "vip": true}}`, map[string]string{"region": "eu"}, []string{vip, region, all}},
		// region: invoice.* only; vip: not an invoice type.
		{"order.created", `{"amount": 5000, "currency": "EUR", "customer": {"vip": false}}`, map[string]string{"region": "uk"}, []string{big, all}},
		// Evaluation errors, no match: region: the event has no "region"
		// metadata; big: amount is a string, a type mismatch; vip: has()
		// guards only its last field, and there is no customer.
		{"invoice.sent", `{"amount": "2000", "currency": "EUR"}`, nil, []string{all}},
	}
	wantBodies := map[string][]string{}
	total := 0
	for i, ev := range events {
		pub, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: ev.typ, Payload: []byte(ev.payload), Metadata: ev.metadata})
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		var got []string
		for _, d := range pub.GetDeliveries() {
			got = append(got, d.GetEndpointId())
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(ev.want))
		if !slices.Equal(got, want) {
			t.Fatalf("event %d (%s %s) went to %v, want %v", i, ev.typ, ev.payload, got, want)
		}
		for _, id := range want {
			wantBodies[id] = append(wantBodies[id], ev.payload)
		}
		total += len(want)
	}
	st.deliveredAll(total)
	if n := st.endOffsets(st.topics.Deliveries); n != int64(total) {
		t.Fatalf("%d deliveries written, want %d (none for events that did not match)", n, total)
	}
	for id, rx := range receivers {
		var got []string
		for _, p := range rx.got() {
			got = append(got, string(p.body))
		}
		if want := wantBodies[id]; !sameMembers(got, want) {
			t.Errorf("endpoint %s received %q, want %q", id, got, want)
		}
	}

	m := scrape(t, metricsURL)
	for id, want := range map[string]float64{region: 1, big: 1, vip: 1, all: 0} {
		if got := m.sum("hookline_ingest_filter_errors_total", `hookline_endpoint_id="`+id+`"`); got != want {
			t.Errorf("filter errors of %s = %v, want %v", id, got, want)
		}
	}

	// A changed filter applies to the events published after it.
	if _, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{
		Endpoint:   &hooklinev1.Endpoint{Id: big, Filter: `payload.amount > 1`},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"filter"}},
	}); err != nil {
		t.Fatal(err)
	}
	pub, err := st.events().PublishEvent(st.ctx(), &hooklinev1.PublishEventRequest{EventType: "invoice.paid", Payload: []byte(`{"amount": 2, "currency": "USD"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := pub.GetDeliveries(); len(got) != 2 || !slices.ContainsFunc(got, func(d *hooklinev1.DeliveryRef) bool { return d.GetEndpointId() == big }) {
		t.Fatalf("after the update the event went to %v, want %s and %s", got, big, all)
	}
}

func sameMembers(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// TestBadFilterIsRefusedWithItsPosition: a filter that does not parse,
// names an unknown variable or does not evaluate to a bool is refused
// at create and at update with INVALID_ARGUMENT naming the field and
// CEL's message with its position; nothing is changed.
func TestBadFilterIsRefusedWithItsPosition(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	tests := []struct{ give, want string }{
		{`payload.amount >`, "filter: ERROR: filter:1:17: Syntax error"},
		{`amount > 1000`, "filter: ERROR: filter:1:1: undeclared reference to 'amount'"},
		{`payload.amount + 1`, "filter: evaluates to int; a filter must evaluate to a bool"},
		{`payload.items.exists(i, payload.items.exists(j, i == j))`, "filter: its estimated worst-case cost"},
	}
	for _, tt := range tests {
		_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Filter: tt.give})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.want) {
			t.Errorf("create with filter %q: %v; want INVALID_ARGUMENT containing %q", tt.give, err, tt.want)
		}
	}
	if list, err := st.endpoints().ListEndpoints(st.ctx(), &hooklinev1.ListEndpointsRequest{}); err != nil || len(list.GetEndpoints()) != 0 {
		t.Fatalf("after refused creates: %v, %v; want no endpoints", list, err)
	}
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Filter: `type == "invoice.paid"`}).GetEndpoint()
	_, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{
		Endpoint:   &hooklinev1.Endpoint{Id: ep.GetId(), Filter: `payload.amount >`},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"filter"}},
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "filter:1:17") {
		t.Fatalf("update with a bad filter: %v; want INVALID_ARGUMENT with its position", err)
	}
	cur, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: ep.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if got := cur.GetEndpoint(); got.GetFilter() != `type == "invoice.paid"` || got.GetEtag() != ep.GetEtag() {
		t.Fatalf("a refused update changed the endpoint: %v", cur)
	}
}

// TestFilterTryRunsAFilterAgainstASampleEvent: TestFilterAndTransformation
// answers match, no match, or no match with the evaluation error, for a
// filter given or an endpoint's own, over gRPC and HTTP/JSON, and writes
// nothing.
func TestFilterTryRunsAFilterAgainstASampleEvent(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpointWith(&hooklinev1.CreateEndpointRequest{Url: rx.URL, Filter: `payload.amount > 1000 && payload.currency == "EUR"`}).GetEndpoint()
	sample := func(filter, endpoint, payload string) *hooklinev1.TestFilterAndTransformationRequest {
		return &hooklinev1.TestFilterAndTransformationRequest{Filter: filter, EndpointId: endpoint, EventType: "invoice.paid", Payload: []byte(payload), Metadata: map[string]string{"region": "eu"}}
	}
	tests := []struct {
		name      string
		give      *hooklinev1.TestFilterAndTransformationRequest
		wantMatch bool
		wantErr   string
	}{
		{"the endpoint's filter matches", sample("", ep.GetId(), `{"amount": 1500, "currency": "EUR"}`), true, ""},
		{"the endpoint's filter does not match", sample("", ep.GetId(), `{"amount": 15, "currency": "EUR"}`), false, ""},
		{"a missing field is an error", sample("", ep.GetId(), `{"currency": "EUR"}`), false, "no such key: amount"},
		{"a given filter on metadata", sample(`metadata.region in ["eu", "uk"]`, "", `{}`), true, ""},
		{"a non-JSON payload is null", sample(`payload == null`, "", `not json`), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := st.endpoints().TestFilterAndTransformation(st.ctx(), tt.give)
			if err != nil {
				t.Fatal(err)
			}
			res := resp.GetFilter()
			if res.GetMatched() != tt.wantMatch || !strings.Contains(res.GetError(), tt.wantErr) || (tt.wantErr == "") != (res.GetError() == "") || res.GetDuration() == nil {
				t.Fatalf("got %v; want matched %v, error %q, a duration", res, tt.wantMatch, tt.wantErr)
			}
		})
	}
	_, err := st.endpoints().TestFilterAndTransformation(st.ctx(), sample(`nope`, "", `{}`))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "undeclared reference to 'nope'") {
		t.Fatalf("a bad filter: %v; want INVALID_ARGUMENT with CEL's message", err)
	}

	code, out := st.httpCall("POST", "/v1/endpoints:testFilterAndTransformation", st.apiKey,
		`{"filter": "payload.amount > 1000", "event_type": "invoice.paid", "payload": {"amount": 2000}}`)
	if f, _ := out["filter"].(map[string]any); code != http.StatusOK || f["matched"] != true {
		t.Fatalf("POST /v1/endpoints:testFilterAndTransformation = %d %v; want matched", code, out)
	}
	if n := st.endOffsets(st.topics.Deliveries); n != 0 {
		t.Fatalf("trying filters wrote %d deliveries", n)
	}
}
