package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// client calls ingest's DeliveryService as the tenant "bench".
type client struct {
	conn *grpc.ClientConn
	api  hooklinev1.DeliveryServiceClient
	key  string
}

func dial(addr, key string) (*client, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &client{conn: conn, api: hooklinev1.NewDeliveryServiceClient(conn), key: key}, nil
}

func (c *client) close() { _ = c.conn.Close() }

func (c *client) ctx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.key)
}

// waitIndexed waits until GetDelivery finds id (every call waits for the
// index to reach the topics' ends, up to 30 s, then says UNAVAILABLE).
func (c *client) waitIndexed(ctx context.Context, id string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := c.api.GetDelivery(c.ctx(ctx), &hooklinev1.GetDeliveryRequest{DeliveryId: id})
		if err == nil {
			return nil
		}
		if code := status.Code(err); code != codes.Unavailable && code != codes.NotFound && code != codes.DeadlineExceeded {
			return fmt.Errorf("GetDelivery %s: %w", id, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ingest did not index %s within %s: %w", id, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// measure times n GetDelivery calls of ids spread over the history and
// n ListDeliveries pages of varied filters (a fifth of them deep pages
// reached by page token).
func (c *client) measure(ctx context.Context, l loaded, n int) (get, list []time.Duration, err error) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range n {
		id := l.sample[rnd.IntN(len(l.sample))]
		t0 := time.Now()
		resp, err := c.api.GetDelivery(c.ctx(ctx), &hooklinev1.GetDeliveryRequest{DeliveryId: id})
		if err != nil {
			return nil, nil, fmt.Errorf("GetDelivery: %w", err)
		}
		get = append(get, time.Since(t0))
		if len(resp.GetAttempts()) != 1 {
			return nil, nil, fmt.Errorf("GetDelivery %s: %d attempts, want 1", id, len(resp.GetAttempts()))
		}
	}
	span := time.Since(l.first)
	for range n {
		i := rnd.IntN(1 << 20)
		from := l.first.Add(time.Duration(rnd.Int64N(int64(span))))
		reqs := []*hooklinev1.ListDeliveriesRequest{
			{EndpointId: endpointID(i)},
			{EndpointId: endpointID(i), State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED},
			{EventType: eventType(i), Since: timestamppb.New(from)},
			{Since: timestamppb.New(from), Until: timestamppb.New(from.Add(time.Hour))},
			{State: hooklinev1.DeliveryState_DELIVERY_STATE_FAILED, Since: timestamppb.New(from)},
		}
		req := reqs[i%len(reqs)]
		req.PageSize = 100
		t0 := time.Now()
		resp, err := c.api.ListDeliveries(c.ctx(ctx), req)
		if err != nil {
			return nil, nil, fmt.Errorf("ListDeliveries(%v): %w", req, err)
		}
		list = append(list, time.Since(t0))
		if tok := resp.GetNextPageToken(); tok != "" && i%5 == 0 {
			req.PageToken = tok // the next page, by token
			t0 := time.Now()
			if _, err := c.api.ListDeliveries(c.ctx(ctx), req); err != nil {
				return nil, nil, fmt.Errorf("ListDeliveries next page: %w", err)
			}
			list = append(list, time.Since(t0))
		}
	}
	return get, list, nil
}
