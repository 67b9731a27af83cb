package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	benchEndpoints = 20
	benchTypes     = 10
	// spacing between deliveries' creation times: 1M span ~14 hours.
	spacing = 50 * time.Millisecond
)

// loaded is what load wrote.
type loaded struct {
	records int64
	took    time.Duration
	last    string   // the last delivery id written
	sample  []string // delivery ids spread over the whole history
	first   time.Time
}

func endpointID(i int) string { return fmt.Sprintf("ep_bench%02d", i%benchEndpoints) }
func eventType(i int) string  { return fmt.Sprintf("order.step%d", i%benchTypes) }

// load writes n deliveries (each its own event, payload bytes long) and
// one result each (every seventh FAILED, the rest DELIVERED) to the topics,
// in bulk, as the tenant "bench".
func load(ctx context.Context, brokers string, n, payload int) (loaded, error) {
	kc, err := config.Defaults[hkafka.Config]()
	if err != nil {
		return loaded{}, err
	}
	topics := kc.Topics()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ProducerLinger(20*time.Millisecond),
		kgo.MaxBufferedRecords(50000), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		return loaded{}, err
	}
	defer cl.Close()
	var failed atomic.Pointer[error]
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	filler := strings.Repeat(`"status":"paid","currency":"EUR","lines":[{"sku":"A-100","qty":1}],`, payload/64+1)
	first := time.Now().Add(-time.Duration(n) * spacing)
	out := loaded{first: first}
	t0 := time.Now()
	rnd := make([]byte, 128)
	for i := range n {
		at := first.Add(time.Duration(i) * spacing)
		_, _ = rand.Read(rnd)
		body := fmt.Sprintf(`{"i":%d,"id":"%s",%s`, i, hex.EncodeToString(rnd), filler)
		body = body[:payload-1] + "}"
		d := &hooklinev1.Delivery{
			DeliveryId: ids.New(ids.Delivery, at), EventId: ids.New(ids.Event, at), TenantId: "bench",
			EndpointId: endpointID(i), EventType: eventType(i), Payload: []byte(body), Attempt: 1,
			CreatedAt: timestamppb.New(at), Kind: hooklinev1.DeliveryKind_DELIVERY_KIND_FIRST,
		}
		state, code := hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED, int32(200)
		if i%7 == 0 {
			state, code = hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, 410
		}
		res := &hooklinev1.AttemptResult{
			DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "bench", EndpointId: d.GetEndpointId(),
			EventType: d.GetEventType(), Attempt: 1, State: state, StatusCode: code, Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS,
			StartedAt: timestamppb.New(at.Add(time.Second)), Latency: durationpb.New(35 * time.Millisecond), ResponseExcerpt: []byte(`{"ok":true}`),
		}
		dr, err := hkafka.Record(topics.Deliveries, d.GetEndpointId(), d)
		if err != nil {
			return out, err
		}
		rr, err := hkafka.Record(topics.Results, d.GetEndpointId(), res)
		if err != nil {
			return out, err
		}
		cl.Produce(ctx, dr, done)
		cl.Produce(ctx, rr, done)
		out.records += 2
		out.last = d.GetDeliveryId()
		if i%(max(n/10000, 1)) == 0 {
			out.sample = append(out.sample, d.GetDeliveryId())
		}
		if p := failed.Load(); p != nil {
			return out, fmt.Errorf("produce: %w", *p)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return out, err
	}
	if p := failed.Load(); p != nil {
		return out, fmt.Errorf("produce: %w", *p)
	}
	out.took = time.Since(t0)
	return out, nil
}
