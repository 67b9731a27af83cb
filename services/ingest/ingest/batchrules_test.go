package ingest

import (
	"strings"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestBatchSettingsOutOfBoundsSayWhatToFix(t *testing.T) {
	unordered := hooklinev1.Ordering_ORDERING_UNORDERED
	tests := []struct {
		name     string
		give     *hooklinev1.BatchSettings
		ordering hooklinev1.Ordering
		want     string // "" accepted
	}{
		{"unset", nil, hooklinev1.Ordering_ORDERING_PER_KEY, ""},
		{"smallest", &hooklinev1.BatchSettings{MaxEvents: 2}, unordered, ""},
		{"largest", &hooklinev1.BatchSettings{MaxEvents: 1000, MaxBytes: 4 << 20, MaxWait: durationpb.New(5 * time.Second)}, unordered, ""},
		{"send at once", &hooklinev1.BatchSettings{MaxEvents: 50, MaxWait: durationpb.New(0)}, hooklinev1.Ordering_ORDERING_UNSPECIFIED, ""},
		{"one event", &hooklinev1.BatchSettings{MaxEvents: 1}, unordered, "batch.max_events: must be 2 to 1000, got 1"},
		{"no events", &hooklinev1.BatchSettings{}, unordered, "batch.max_events: must be 2 to 1000, got 0 (to turn batching off, unset batch)"},
		{"too many events", &hooklinev1.BatchSettings{MaxEvents: 1001}, unordered, "batch.max_events: must be 2 to 1000, got 1001"},
		{"too many bytes", &hooklinev1.BatchSettings{MaxEvents: 2, MaxBytes: 4<<20 + 1}, unordered, "batch.max_bytes: must be at most 4194304 (4 MiB), got 4194305"},
		{"wait too long", &hooklinev1.BatchSettings{MaxEvents: 2, MaxWait: durationpb.New(6 * time.Second)}, unordered, "batch.max_wait: must be 0 to 5s, got 6s"},
		{"negative wait", &hooklinev1.BatchSettings{MaxEvents: 2, MaxWait: durationpb.New(-time.Second)}, unordered, "batch.max_wait: must be 0 to 5s, got -1s"},
		{"ordered per endpoint", &hooklinev1.BatchSettings{MaxEvents: 2}, hooklinev1.Ordering_ORDERING_PER_ENDPOINT, "batching ordered endpoints is not built yet; unset ordering or batch"},
		{"ordered per key", &hooklinev1.BatchSettings{MaxEvents: 2}, hooklinev1.Ordering_ORDERING_PER_KEY, "batching ordered endpoints is not built yet; unset ordering or batch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkBatch(&hooklinev1.Endpoint{Batch: tt.give, Ordering: tt.ordering})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.want) {
				t.Fatalf("got %v, want InvalidArgument saying %q", err, tt.want)
			}
		})
	}
}
