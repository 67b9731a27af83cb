package ingest

import (
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/idempotency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestOrderingFieldsAreValidatedWithAStatusThatSaysWhatToFix(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want codes.Code
		says string
	}{
		{"no key", validateOrderingKey(""), codes.OK, ""},
		{"printable key", validateOrderingKey("customer-42/orders"), codes.OK, ""},
		{"128 bytes", validateOrderingKey(strings.Repeat("k", 128)), codes.OK, ""},
		{"129 bytes", validateOrderingKey(strings.Repeat("k", 129)), codes.InvalidArgument, "limit is 128"},
		{"control byte", validateOrderingKey("a\nb"), codes.InvalidArgument, "printable"},
		{"non-ASCII", validateOrderingKey("ä"), codes.InvalidArgument, "printable"},
		{"per key", validateOrdering(hooklinev1.Ordering_ORDERING_PER_KEY), codes.OK, ""},
		{"unknown mode", validateOrdering(9), codes.InvalidArgument, "ORDERING_PER_KEY"},
		{"skip", validateHeadFailure(hooklinev1.HeadFailure_HEAD_FAILURE_SKIP), codes.OK, ""},
		{"block", validateHeadFailure(hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK), codes.OK, ""},
		{"unknown choice", validateHeadFailure(7), codes.InvalidArgument, "HEAD_FAILURE_SKIP"},
	}
	for _, c := range cases {
		if got := status.Code(c.err); got != c.want {
			t.Errorf("%s: code %v, want %v (%v)", c.name, got, c.want, c.err)
		}
		if c.says != "" && !strings.Contains(c.err.Error(), c.says) {
			t.Errorf("%s: %q does not say %q", c.name, c.err, c.says)
		}
	}
}

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
