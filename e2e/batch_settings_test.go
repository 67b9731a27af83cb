package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// TestBatchSettingsAreUpdatedReadAndClearedThroughBothDoors: an
// endpoint's batch settings are set by CreateEndpoint and by
// UpdateEndpoint's mask (whole, or one setting as the HTTP gateway's
// PATCH names it), shown by Get and List, cleared by an unset batch; bad values, and batch on an ordered
// endpoint, are INVALID_ARGUMENT saying what to fix and write nothing.
func TestBatchSettingsAreUpdatedReadAndClearedThroughBothDoors(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	ep := st.createEndpoint(rx.URL).GetEndpoint()
	id := ep.GetId()
	update := func(e *hooklinev1.Endpoint, paths ...string) (*hooklinev1.Endpoint, error) {
		resp, err := st.endpoints().UpdateEndpoint(st.ctx(), &hooklinev1.UpdateEndpointRequest{Endpoint: e, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
		return resp.GetEndpoint(), err
	}

	want := &hooklinev1.BatchSettings{MaxEvents: 50, MaxBytes: 256 << 10, MaxWait: durationpb.New(250 * time.Millisecond)}
	upd, err := update(&hooklinev1.Endpoint{Id: id, Etag: ep.GetEtag(), Batch: want}, "batch")
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(upd.GetBatch(), want) || upd.GetEtag() == ep.GetEtag() {
		t.Fatalf("update answered batch %v etag %q (was %q), want %v and a new etag", upd.GetBatch(), upd.GetEtag(), ep.GetEtag(), want)
	}
	got, err := st.endpoints().GetEndpoint(st.ctx(), &hooklinev1.GetEndpointRequest{Id: id})
	if err != nil || !proto.Equal(got.GetEndpoint().GetBatch(), want) {
		t.Fatalf("GetEndpoint: %v, batch %v; want %v", err, got.GetEndpoint().GetBatch(), want)
	}
	list, err := st.endpoints().ListEndpoints(st.ctx(), &hooklinev1.ListEndpointsRequest{})
	if err != nil || len(list.GetEndpoints()) != 1 || !proto.Equal(list.GetEndpoints()[0].GetBatch(), want) {
		t.Fatalf("ListEndpoints: %v, %v; want one endpoint with batch %v", err, list.GetEndpoints(), want)
	}

	endpointsBefore := st.endOffsets(st.topics.Endpoints)
	refusals := []struct {
		name  string
		give  *hooklinev1.Endpoint
		paths []string
		says  string
	}{
		{"one event", &hooklinev1.Endpoint{Id: id, Batch: &hooklinev1.BatchSettings{MaxEvents: 1}}, []string{"batch"}, "batch.max_events: must be 2 to 1000, got 1"},
		{"empty settings", &hooklinev1.Endpoint{Id: id, Batch: &hooklinev1.BatchSettings{}}, []string{"batch"}, "batch.max_events: must be 2 to 1000, got 0"},
		{"too many bytes", &hooklinev1.Endpoint{Id: id, Batch: &hooklinev1.BatchSettings{MaxEvents: 10, MaxBytes: 5 << 20}}, []string{"batch"}, "batch.max_bytes: must be at most 4194304"},
		{"wait too long", &hooklinev1.Endpoint{Id: id, Batch: &hooklinev1.BatchSettings{MaxWait: durationpb.New(time.Minute)}}, []string{"batch.max_wait"}, "batch.max_wait: must be 0 to 5s, got 1m0s"},
		{"ordering a batched endpoint", &hooklinev1.Endpoint{Id: id, Ordering: hooklinev1.Ordering_ORDERING_PER_KEY}, []string{"ordering"}, "batching ordered endpoints is not built yet; unset ordering or batch"},
		{"stale etag", &hooklinev1.Endpoint{Id: id, Etag: ep.GetEtag(), Batch: want}, []string{"batch"}, "changed since etag"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, err := update(tt.give, tt.paths...)
			wantCode := codes.InvalidArgument
			if tt.name == "stale etag" {
				wantCode = codes.Aborted
			}
			if status.Code(err) != wantCode || !strings.Contains(status.Convert(err).Message(), tt.says) {
				t.Fatalf("got %v, want %v saying %q", err, wantCode, tt.says)
			}
		})
	}
	// CreateEndpoint takes batch too, checked the same way.
	made, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Batch: want})
	if err != nil || !proto.Equal(made.GetEndpoint().GetBatch(), want) {
		t.Fatalf("CreateEndpoint with batch: %v, batch %v; want %v", err, made.GetEndpoint().GetBatch(), want)
	}
	endpointsBefore++
	if _, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Batch: &hooklinev1.BatchSettings{MaxEvents: 5, MaxBytes: 8 << 20}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "batch.max_bytes: must be at most 4194304") {
		t.Fatalf("CreateEndpoint with max_bytes 8 MiB: %v", err)
	}
	// An ordered endpoint cannot be given batch either.
	ordered, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: rx.URL, Ordering: hooklinev1.Ordering_ORDERING_PER_ENDPOINT})
	if err != nil {
		t.Fatal(err)
	}
	endpointsBefore++
	if _, err := update(&hooklinev1.Endpoint{Id: ordered.GetEndpoint().GetId(), Batch: want}, "batch"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "batching ordered endpoints is not built yet") {
		t.Fatalf("batch on an ordered endpoint: %v", err)
	}
	if e := st.endOffsets(st.topics.Endpoints); e != endpointsBefore {
		t.Fatalf("refused updates wrote endpoint records: %d→%d", endpointsBefore, e)
	}

	// Over HTTP/JSON: the gateway names the fields the PATCH body sets
	// (batch.max_events); the others are kept. Get shows snake_case.
	code, body := st.httpCall("PATCH", "/v1/endpoints/"+id, st.apiKey, `{"batch":{"max_events":100}}`)
	if code != http.StatusOK {
		t.Fatalf("PATCH = %d %v", code, body)
	}
	code, body = st.httpCall("GET", "/v1/endpoints/"+id, st.apiKey, "")
	b, _ := body["endpoint"].(map[string]any)["batch"].(map[string]any)
	if code != http.StatusOK || b["max_events"] != float64(100) || b["max_bytes"] != float64(256<<10) || b["max_wait"] != "0.250s" {
		t.Fatalf("GET after PATCH = %d, batch %v; want max_events 100, max_bytes and max_wait kept", code, b)
	}
	code, body = st.httpCall("PATCH", "/v1/endpoints/"+id, st.apiKey, `{"batch":{"max_events":1}}`)
	if msg, _ := body["message"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "batch.max_events: must be 2 to 1000, got 1") {
		t.Fatalf("PATCH max_events 1 = %d %v, want 400 saying what to fix", code, body)
	}

	// An unset batch in the mask turns batching off.
	cleared, err := update(&hooklinev1.Endpoint{Id: id}, "batch")
	if err != nil || cleared.GetBatch() != nil {
		t.Fatalf("clearing batch: %v, batch %v", err, cleared.GetBatch())
	}
}
