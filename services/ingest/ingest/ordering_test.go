package ingest

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/idempotency"
)

func TestTheOrderingKeyIsPartOfTheRequestHashOnlyWhenSet(t *testing.T) {
	base := &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)}
	keyed := &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`), OrderingKey: "k"}
	if string(idempotency.RequestHash(base)) == string(idempotency.RequestHash(keyed)) {
		t.Fatal("a different ordering key must be a different request")
	}
	if string(idempotency.RequestHash(base)) != string(idempotency.RequestHash(&hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte(`{}`)})) {
		t.Fatal("hash not stable")
	}
}
