package client_test

import (
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestOversizeMessagesAreNotRetried: a payload over ingest's limit
// fails the same way on every try, whether ingest answers
// INVALID_ARGUMENT or gRPC's transport refuses the message as larger
// than its maximum (RESOURCE_EXHAUSTED without a RetryInfo): one
// attempt, no retry.
func TestOversizeMessagesAreNotRetried(t *testing.T) {
	tests := []struct {
		name string
		give error
	}{
		{"ingest's check", status.Error(codes.InvalidArgument, "payload: is 5000000 bytes, over the limit of 1048576 bytes (ingest's --max-payload-bytes)")},
		{"server transport", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (20971530 vs. 5242880)")},
		{"client transport", status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (20971530 vs. 5242880)")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeIngest{script: []error{tt.give, nil}}
			c, _, _ := start(t, f)
			_, err := c.Events.PublishEvent(t.Context(), &hooklinev1.PublishEventRequest{EventType: "a.b", Payload: []byte("{}")})
			if status.Code(err) != status.Code(tt.give) || f.calls != 1 {
				t.Fatalf("got %v after %d attempts, want %v after 1", err, f.calls, tt.give)
			}
			if client.Retryable(tt.give) {
				t.Fatalf("Retryable(%v) = true", tt.give)
			}
		})
	}
	if !client.Retryable(withRetryInfo(codes.ResourceExhausted, 0)) || !client.Retryable(status.Error(codes.ResourceExhausted, "in-flight bytes")) {
		t.Fatal("ingest's push-back (RESOURCE_EXHAUSTED) must stay retryable")
	}
}
