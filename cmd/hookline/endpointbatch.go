package main

// An endpoint's batch settings as flags (issue 30): endpoint create and
// update --batch-max-events N [--batch-max-bytes B] [--batch-max-wait D].

import (
	"errors"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// BatchFlags are an endpoint's batch settings. Ingest checks their
// bounds; the CLI only says which were given.
type BatchFlags struct {
	MaxEvents uint32        `flag:"batch-max-events" usage:"batch up to this many events (2 to 1000) into one request; update with 0 to turn batching off (default: no batching)"`
	MaxBytes  uint32        `flag:"batch-max-bytes" usage:"most bytes of a batch's body, at most 4194304 (default: 1 MiB)"`
	MaxWait   time.Duration `flag:"batch-max-wait" usage:"how long a partial batch waits for more events, at most 5s; 0 sends what is waiting at once (default: 1s)"`
}

// batchFlagPaths maps each batch flag to the update mask path it sets.
var batchFlagPaths = map[string]string{
	"batch-max-events": "batch.max_events",
	"batch-max-bytes":  "batch.max_bytes",
	"batch-max-wait":   "batch.max_wait",
}

// givenBatchFlags returns the batch flags args names, as mask paths.
func givenBatchFlags(args []string) []string {
	var paths []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if p, ok := batchFlagPaths[strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")]; ok {
			paths = append(paths, p)
		}
	}
	return paths
}

// batchCreate returns the batch settings the batch flags args gives
// for a new endpoint: nil when none is given, or --batch-max-events 0
// (no batching).
func (f BatchFlags) batchCreate(args []string) (*hooklinev1.BatchSettings, error) {
	b, _, err := f.batchUpdate(args)
	return b, err
}

// batchUpdate returns the batch settings and mask paths of the batch
// flags args gives: --batch-max-events 0 clears batch (path "batch");
// otherwise each flag given sets its own setting and ingest keeps the
// others.
func (f BatchFlags) batchUpdate(args []string) (*hooklinev1.BatchSettings, []string, error) {
	paths := givenBatchFlags(args)
	if len(paths) == 0 {
		return nil, nil, nil
	}
	for _, p := range paths {
		if p == "batch.max_events" && f.MaxEvents == 0 {
			if len(paths) > 1 {
				return nil, nil, errors.New("--batch-max-events 0 turns batching off; give no other --batch-* flag with it")
			}
			return nil, []string{"batch"}, nil
		}
	}
	b := &hooklinev1.BatchSettings{MaxEvents: f.MaxEvents, MaxBytes: f.MaxBytes}
	for _, p := range paths {
		if p == "batch.max_wait" {
			b.MaxWait = durationpb.New(f.MaxWait)
		}
	}
	return b, paths, nil
}
