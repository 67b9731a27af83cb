package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fanOutWindow is the most bytes of encoded Delivery records one publish
// holds that Kafka has not acknowledged yet (at least one record): a
// publish to N endpoints never holds N copies of its payload, only as
// many as fit this window. Below it (most publishes) every record is
// handed to the producer at once, as before.
const fanOutWindow = 4 << 20

// producer hands a record to Kafka and calls promise once it is
// acknowledged or failed: kgo.Client.Produce.
type producer func(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))

// errEncode marks a record that could not be built.
type errEncode struct{ error }

// produceWindowed builds the n records of a fan-out one at a time and
// produces each, waiting before building the next while the records not
// yet acknowledged hold window bytes or more. It returns once every
// record produced is acknowledged or failed (or ctx ends): nil, the
// first build error (an errEncode), the first produce error, or ctx's
// error. After an error it produces nothing more.
func produceWindowed(ctx context.Context, produce producer, window, n int, build func(i int) (*kgo.Record, error)) error {
	var (
		mu      sync.Mutex
		held    int // bytes produced, not yet acknowledged
		pending int // records produced, not yet acknowledged
		first   error
		freed   = make(chan struct{}, 1)
	)
	wait := func(ready func() bool) error {
		for {
			mu.Lock()
			ok := ready()
			mu.Unlock()
			if ok {
				return nil
			}
			select {
			case <-freed:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	var err error
	for i := range n {
		var r *kgo.Record
		if r, err = build(i); err != nil {
			err = errEncode{err}
			break
		}
		size := len(r.Key) + len(r.Value)
		if err = wait(func() bool { return first != nil || held == 0 || held+size <= window }); err != nil {
			break
		}
		mu.Lock()
		failed := first != nil
		if !failed {
			held += size
			pending++
		}
		mu.Unlock()
		if failed {
			break
		}
		produce(ctx, r, func(_ *kgo.Record, perr error) {
			mu.Lock()
			held -= size
			pending--
			if perr != nil && first == nil {
				first = perr
			}
			mu.Unlock()
			select {
			case freed <- struct{}{}:
			default:
			}
		})
	}
	if werr := wait(func() bool { return pending == 0 }); err == nil {
		err = werr
	}
	mu.Lock()
	defer mu.Unlock()
	if err == nil {
		err = first
	}
	return err
}

// fanOut writes an event's deliveries: it decides the endpoints a
// publish goes to (the named ones, or those whose event types and
// content filter match), checks them against --max-fanout-bytes and the
// tenant's held budget, and writes one authenticated Delivery record per
// target, transformed, within fanOutWindow. It holds the endpoints view
// and write path, the content rules, the held budget, the producer, the
// keyring the records are authenticated with, the deliveries topic,
// --publish-timeout and --max-fanout-bytes; nothing else.
type fanOut struct {
	store     *endpoints.Store
	endpoints *endpointWriter
	content   *contentRules
	held      *heldBudget
	kafka     *kafkaProducer
	keyring   *keyring.Keyring
	// topic is the deliveries topic.
	topic string
	// publishTimeout is --publish-timeout; maxFanoutBytes is
	// --max-fanout-bytes.
	publishTimeout time.Duration
	maxFanoutBytes int64
}

// writeDeliveries writes one Delivery per ref, each built by delivery,
// within fanOutWindow and --publish-timeout, and maps a failure to the
// caller's status. The publish's held reservation (heldIn), if any,
// learns of each record Kafka acknowledged.
func (f *fanOut) writeDeliveries(ctx context.Context, n int, delivery func(i int) *hooklinev1.Delivery) error {
	if n == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, f.publishTimeout)
	defer cancel()
	produce := f.kafka.client.Produce
	if held := heldIn(ctx); held != nil {
		produce = func(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
			f.kafka.client.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err == nil {
					held.acked(r)
				}
				promise(r, err)
			})
		}
	}
	var mac recordAuthenticator
	err := produceWindowed(pctx, produce, fanOutWindow, n, func(i int) (*kgo.Record, error) {
		d := delivery(i)
		mac.authenticate(f.keyring, d)
		return hkafka.Record(f.topic, d.GetEndpointId(), d)
	})
	var enc errEncode
	switch {
	case err == nil:
		return nil
	case errors.As(err, &enc):
		return status.Errorf(codes.Internal, "encode delivery: %v", enc.error)
	}
	return kafkaStatus(ctx, "event not accepted", err)
}

// checkFanOut refuses a publish whose deliveries would hold more than
// --max-fanout-bytes of payload: payload × endpoints.
func (f *fanOut) checkFanOut(payload, endpoints int) error {
	if total := int64(payload) * int64(endpoints); total > f.maxFanoutBytes {
		return status.Error(codes.ResourceExhausted, fmt.Sprintf(
			"fan-out too large: a %d-byte payload to %d matching endpoints is %d bytes, the limit per publish is %d (--max-fanout-bytes); send a smaller payload, or name fewer endpoints with endpoint_ids",
			payload, endpoints, total, f.maxFanoutBytes))
	}
	return nil
}
