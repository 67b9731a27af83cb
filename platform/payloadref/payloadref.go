// Package payloadref reads a record back by reference: the one home of
// "keep where a payload lives, not the payload". A record that must stay
// small (a lanes record naming a blocked head, a hold) keeps a
// hooklinev1.RecordRef — topic, partition, offset of the record that
// carried the payload — and Read fetches that record when the payload is
// needed again.
//
// Retention limit: a reference is valid while its topic retains the
// record: the deliveries and retry topics keep records for
// --topic-retention (retention.ms, 7 days by default). Past that, Read
// returns ErrGone and the payload is only in ingest's history (the
// delivery can then be resent from there, by event). A caller that holds
// a reference longer than the retention must say what it does then.
package payloadref

import (
	"context"
	"errors"
	"fmt"
	"slices"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrGone says the referenced record is no longer retained (or never
// was: the offset is past the log's end, or names a transaction marker).
var ErrGone = errors.New("payloadref: the referenced record is no longer retained")

// Of returns the reference of r.
func Of(r *kgo.Record) *hooklinev1.RecordRef {
	return &hooklinev1.RecordRef{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

// Read returns the committed record ref names, fetched with a client of
// its own made from opts (the connection options: brokers, TLS, SASL).
// It is meant for rare reads (an operator's command); it waits for the
// record until ctx ends. A record no longer retained is ErrGone.
func Read(ctx context.Context, opts []kgo.Opt, ref *hooklinev1.RecordRef) (*kgo.Record, error) {
	if ref.GetTopic() == "" || ref.GetOffset() < 0 {
		return nil, fmt.Errorf("payloadref: invalid reference %v", ref)
	}
	cl, err := kgo.NewClient(append(slices.Clip(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{ref.GetTopic(): {ref.GetPartition(): kgo.NewOffset().At(ref.GetOffset())}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("payloadref: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("payloadref: read %s/%d@%d: %w", ref.GetTopic(), ref.GetPartition(), ref.GetOffset(), err)
		}
		var gone bool
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			switch {
			case errors.Is(err, kerr.OffsetOutOfRange), errors.Is(err, kgo.ErrClientClosed):
				gone = gone || errors.Is(err, kerr.OffsetOutOfRange)
			default:
				ferr = err
			}
		})
		if gone {
			return nil, fmt.Errorf("%w: %s/%d@%d", ErrGone, ref.GetTopic(), ref.GetPartition(), ref.GetOffset())
		}
		var got *kgo.Record
		past := false
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case got != nil:
			case r.Offset == ref.GetOffset():
				got = r
			case r.Offset > ref.GetOffset():
				past = true
			}
		})
		if got != nil {
			return got, nil
		}
		if past {
			return nil, fmt.Errorf("%w: %s/%d@%d (not a committed record)", ErrGone, ref.GetTopic(), ref.GetPartition(), ref.GetOffset())
		}
		if ferr != nil && !kerr.IsRetriable(ferr) {
			return nil, fmt.Errorf("payloadref: read %s/%d@%d: %w", ref.GetTopic(), ref.GetPartition(), ref.GetOffset(), ferr)
		}
	}
}
