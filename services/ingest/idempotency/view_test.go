package idempotency

import (
	"bytes"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestIdemViewFirstLiveClaimWinsAndCommitsOnlyIt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl = 24 * time.Hour
	claimAt := func(id string, at time.Time) *hooklinev1.IdempotencyRecord {
		return &hooklinev1.IdempotencyRecord{ClaimId: id, State: hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_CLAIMED,
			CreatedAt: timestamppb.New(at), ExpiresAt: timestamppb.New(at.Add(ttl))}
	}
	commit := func(id string) *hooklinev1.IdempotencyRecord {
		return &hooklinev1.IdempotencyRecord{ClaimId: id, State: hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_COMMITTED}
	}
	tests := []struct {
		name          string
		give          []*hooklinev1.IdempotencyRecord
		wantWinner    string
		wantCommitted bool
	}{
		{"first claim wins", []*hooklinev1.IdempotencyRecord{claimAt("a", t0), claimAt("b", t0)}, "a", false},
		{"a later claim loses while the first is live", []*hooklinev1.IdempotencyRecord{claimAt("a", t0), claimAt("b", t0.Add(ttl-time.Second))}, "a", false},
		{"a claim made at expiry wins", []*hooklinev1.IdempotencyRecord{claimAt("a", t0), commit("a"), claimAt("b", t0.Add(ttl))}, "b", false},
		{"commit of the winner", []*hooklinev1.IdempotencyRecord{claimAt("a", t0), claimAt("b", t0), commit("a")}, "a", true},
		{"commit of a loser is ignored", []*hooklinev1.IdempotencyRecord{claimAt("a", t0), claimAt("b", t0), commit("b")}, "a", false},
		{"commit without a claim is ignored", []*hooklinev1.IdempotencyRecord{commit("a")}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewView(func() time.Time { return t0 }, ttl)
			for i, rec := range tt.give {
				b, err := proto.Marshal(rec)
				if err != nil {
					t.Fatal(err)
				}
				v.Apply(&kgo.Record{Key: []byte("k"), Value: b, Offset: int64(i)})
			}
			w, ok := v.Winner("k")
			if got := w.Rec.GetClaimId(); got != tt.wantWinner || ok != (tt.wantWinner != "") {
				t.Fatalf("winner %q (%v), want %q", got, ok, tt.wantWinner)
			}
			if w.Committed != tt.wantCommitted {
				t.Fatalf("committed %v, want %v", w.Committed, tt.wantCommitted)
			}
		})
	}
}

func TestRequestHashCoversTypePayloadEndpointSetAndMetadata(t *testing.T) {
	base := &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`), EndpointIds: []string{"ep_2", "ep_1"}, IdempotencyKey: "k"}
	tests := []struct {
		name     string
		give     func(*hooklinev1.PublishEventRequest)
		wantSame bool
	}{
		{"endpoint order and duplicates do not matter", func(r *hooklinev1.PublishEventRequest) { r.EndpointIds = []string{"ep_1", "ep_2", "ep_1"} }, true},
		{"the key itself is not hashed", func(r *hooklinev1.PublishEventRequest) { r.IdempotencyKey = "other" }, true},
		{"payload", func(r *hooklinev1.PublishEventRequest) { r.Payload = []byte(`{ }`) }, false},
		{"event type", func(r *hooklinev1.PublishEventRequest) { r.EventType = "a.c" }, false},
		{"endpoint set", func(r *hooklinev1.PublishEventRequest) { r.EndpointIds = []string{"ep_1"} }, false},
		{"no field bleeds into the next", func(r *hooklinev1.PublishEventRequest) { r.EventType, r.Payload = "a.b{", []byte(`}`) }, false},
		{"metadata", func(r *hooklinev1.PublishEventRequest) { r.Metadata = map[string]string{"region": "eu"} }, false},
		{"metadata value", func(r *hooklinev1.PublishEventRequest) {
			r.Metadata = map[string]string{"region": "eu"}
			base.Metadata = map[string]string{"region": "uk"}
		}, false},
		{"metadata is not an ordering key", func(r *hooklinev1.PublishEventRequest) {
			r.Metadata = map[string]string{"region": "eu"}
			base.OrderingKey = "metadata"
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := proto.Clone(base).(*hooklinev1.PublishEventRequest)
			r := proto.Clone(base).(*hooklinev1.PublishEventRequest)
			tt.give(r)
			if same := bytes.Equal(RequestHash(r), RequestHash(base)); same != tt.wantSame {
				t.Fatalf("same hash: %v, want %v", same, tt.wantSame)
			}
		})
	}
}

func TestIdempotencyRecordKeysDoNotCollideAcrossTenants(t *testing.T) {
	if RecordKey("a:b", "c") == RecordKey("a", "b:c") {
		t.Fatal("tenant and key boundaries collide")
	}
}
