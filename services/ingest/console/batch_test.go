package console

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestEndpointsPageShowsBatchSettingsWithTheirDefaults: a batching
// endpoint's row says how it batches, with the defaults of what is
// unset spelled out; an endpoint that does not batch has no such row.
func TestEndpointsPageShowsBatchSettingsWithTheirDefaults(t *testing.T) {
	srv := httptest.NewServer(New(&fakeBackend{eps: []EndpointHealth{
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_1", Url: "https://a.example/h", Batch: &hooklinev1.BatchSettings{MaxEvents: 50}}, Health: HealthActive},
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_2", Url: "https://b.example/h", Batch: &hooklinev1.BatchSettings{MaxEvents: 1000, MaxBytes: 65536, MaxWait: durationpb.New(0)}}, Health: HealthActive},
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_3", Url: "https://c.example/h", Batch: &hooklinev1.BatchSettings{MaxEvents: 2, MaxWait: durationpb.New(2500 * time.Millisecond)}}, Health: HealthActive},
		{Endpoint: &hooklinev1.Endpoint{Id: "ep_4", Url: "https://d.example/h"}, Health: HealthActive},
	}}).Handler())
	defer srv.Close()
	_, page := signIn(t, srv, "reader-key")
	for _, want := range []string{
		"up to 50 events and 1 MiB a request; a partial batch waits up to 1s for more",
		"up to 1000 events and 65536 bytes a request; a partial batch is sent at once",
		"up to 2 events and 1 MiB a request; a partial batch waits up to 2.5s for more",
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("the endpoints page lacks %q:\n%s", want, page)
		}
	}
	if n := strings.Count(page, `<tr class="batch">`); n != 3 {
		t.Fatalf("%d batch rows, want 3 (ep_4 does not batch)", n)
	}
}

// TestDeliveryTimelineNamesTheBatchOfEachBatchedAttempt: an attempt sent
// in a batch says which batch and how many events it held; one sent
// alone says nothing of batches.
func TestDeliveryTimelineNamesTheBatchOfEachBatchedAttempt(t *testing.T) {
	const batchID = "bat_abcdefghijklmnopqrstuvwx"
	srv := httptest.NewServer(New(&fakeBackend{attempts: []*hooklinev1.AttemptResult{
		{Attempt: 1, StatusCode: 503, State: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, BatchId: batchID, BatchSize: 50},
		{Attempt: 2, StatusCode: 200, State: hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED},
	}}).Handler())
	defer srv.Close()
	c, _ := signIn(t, srv, "reader-key")
	resp, err := c.Get(srv.URL + "/deliveries/dlv_1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if !strings.Contains(page, `<span class="batch">batch `+batchID+` (50 events)</span>`) {
		t.Fatalf("the timeline does not name the attempt's batch:\n%s", page)
	}
	if n := strings.Count(page, `class="batch"`); n != 1 {
		t.Fatalf("%d batch notes, want 1 (attempt 2 was sent alone)", n)
	}
}
