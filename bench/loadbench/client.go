package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// hookline is a gRPC client of ingest, as any producer would write it,
// spread over a few connections. Safe for concurrent use.
type hookline struct {
	conns  []*grpc.ClientConn
	next   atomic.Uint64
	apiKey string
}

// dialHookline opens n connections to addr.
func dialHookline(addr, apiKey string, n int) (*hookline, error) {
	h := &hookline{apiKey: apiKey}
	for range n {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			h.close()
			return nil, err
		}
		h.conns = append(h.conns, c)
	}
	return h, nil
}

func (h *hookline) close() {
	for _, c := range h.conns {
		_ = c.Close()
	}
}

func (h *hookline) conn() *grpc.ClientConn {
	return h.conns[h.next.Add(1)%uint64(len(h.conns))]
}

func (h *hookline) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+h.apiKey)
}

// endpointSpec is what the harness asks of one endpoint. Zero values
// leave Hookline's defaults.
type endpointSpec struct {
	url           string
	eventTypes    []string
	maxInFlight   uint32
	rate          float64
	timeout       time.Duration
	retry         *hooklinev1.RetryPolicy
	noOutageMode  bool
	ordering      hooklinev1.Ordering
	onHeadFailure hooklinev1.HeadFailure
	filter        string // a CEL content filter (issue 28)
	transform     string // a JavaScript transformation (issue 28)
	batch         *hooklinev1.BatchSettings
}

// createEndpoint creates one endpoint and returns its id.
func (h *hookline) createEndpoint(ctx context.Context, s endpointSpec) (string, error) {
	req := &hooklinev1.CreateEndpointRequest{
		Url: s.url, EventTypes: s.eventTypes, MaxInFlight: s.maxInFlight,
		RateLimitPerSecond: s.rate, RetryPolicy: s.retry, OutageModeDisabled: s.noOutageMode,
		Ordering: s.ordering, OnHeadFailure: s.onHeadFailure,
		Filter: s.filter, Transformation: s.transform, Batch: s.batch,
	}
	if s.timeout > 0 {
		req.Timeout = durationpb.New(s.timeout)
	}
	ctx, cancel := context.WithTimeout(h.auth(ctx), 30*time.Second)
	defer cancel()
	resp, err := hooklinev1.NewEndpointServiceClient(h.conn()).CreateEndpoint(ctx, req)
	if err != nil {
		return "", fmt.Errorf("create endpoint %s: %w", s.url, err)
	}
	return resp.GetEndpoint().GetId(), nil
}

// createEndpoints creates every spec in order and returns their ids.
func (h *hookline) createEndpoints(ctx context.Context, specs []endpointSpec) ([]string, error) {
	ids := make([]string, 0, len(specs))
	for _, s := range specs {
		id, err := h.createEndpoint(ctx, s)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// pause pauses (or, with on false, resumes) the endpoint id.
func (h *hookline) pause(ctx context.Context, id string, on bool) error {
	ctx, cancel := context.WithTimeout(h.auth(ctx), 30*time.Second)
	defer cancel()
	c := hooklinev1.NewEndpointServiceClient(h.conn())
	var err error
	if on {
		_, err = c.PauseEndpoint(ctx, &hooklinev1.PauseEndpointRequest{Id: id, Reason: "bench: held"})
	} else {
		_, err = c.ResumeEndpoint(ctx, &hooklinev1.ResumeEndpointRequest{Id: id})
	}
	if err != nil {
		return fmt.Errorf("pause %s (%v): %w", id, on, err)
	}
	return nil
}

// publish publishes one event and returns its id (the webhook-id
// receivers see) and how many deliveries it made.
func (h *hookline) publish(ctx context.Context, eventType string, payload []byte) (string, int, error) {
	return h.publishKeyed(ctx, eventType, payload, "")
}

// publishKeyed is publish with an ordering key (empty: none).
func (h *hookline) publishKeyed(ctx context.Context, eventType string, payload []byte, key string) (string, int, error) {
	ctx, cancel := context.WithTimeout(h.auth(ctx), 30*time.Second)
	defer cancel()
	resp, err := hooklinev1.NewEventServiceClient(h.conn()).PublishEvent(ctx,
		&hooklinev1.PublishEventRequest{EventType: eventType, Payload: payload, OrderingKey: key})
	if err != nil {
		return "", 0, err
	}
	return resp.GetEventId(), len(resp.GetDeliveries()), nil
}

// benchPayload is the 512-byte JSON body every scenario and the ceiling
// send, byte for byte.
func benchPayload() []byte {
	const size = 512
	head := `{"type":"invoice.paid","invoice":"in_1NtB2kLkdIwHu7ix","amount":4200,"currency":"eur","pad":"`
	tail := `"}`
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}
