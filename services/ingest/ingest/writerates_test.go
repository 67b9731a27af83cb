package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestEveryWriteRPCHasAPerTenantRate: every RPC that writes to a topic —
// not PublishEvent only — has a per-tenant rate with its default
// configuration: a tenant calling one of them in a loop is
// RESOURCE_EXHAUSTED with a RetryInfo delay within a bounded number of
// calls (the clock stands still), and another tenant is not slowed. On
// main SendTestEvent, ResendDelivery, RecoverEndpoint, the lane commands
// and the endpoint writes had none.
func TestEveryWriteRPCHasAPerTenantRate(t *testing.T) {
	const most = 2000 // calls a tenant may make before it must be limited
	calls := map[string]func(ctx context.Context, conn *grpc.ClientConn) error{
		"SendTestEvent": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewDeliveryServiceClient(conn).SendTestEvent(ctx, &hooklinev1.SendTestEventRequest{})
			return err
		},
		"ResendDelivery": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewDeliveryServiceClient(conn).ResendDelivery(ctx, &hooklinev1.ResendDeliveryRequest{})
			return err
		},
		"RecoverEndpoint": func(ctx context.Context, conn *grpc.ClientConn) error {
			stream, err := hooklinev1.NewDeliveryServiceClient(conn).RecoverEndpoint(ctx, &hooklinev1.RecoverEndpointRequest{})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		},
		"ResendLaneHead": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewLaneServiceClient(conn).ResendLaneHead(ctx, &hooklinev1.ResendLaneHeadRequest{})
			return err
		},
		"SkipLaneHead": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewLaneServiceClient(conn).SkipLaneHead(ctx, &hooklinev1.SkipLaneHeadRequest{})
			return err
		},
		"CreateEndpoint": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewEndpointServiceClient(conn).CreateEndpoint(ctx, &hooklinev1.CreateEndpointRequest{})
			return err
		},
		"UpdateEndpoint": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewEndpointServiceClient(conn).UpdateEndpoint(ctx, &hooklinev1.UpdateEndpointRequest{})
			return err
		},
		"DeleteEndpoint": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewEndpointServiceClient(conn).DeleteEndpoint(ctx, &hooklinev1.DeleteEndpointRequest{})
			return err
		},
		"PauseEndpoint": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewEndpointServiceClient(conn).PauseEndpoint(ctx, &hooklinev1.PauseEndpointRequest{})
			return err
		},
		"ResumeEndpoint": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewEndpointServiceClient(conn).ResumeEndpoint(ctx, &hooklinev1.ResumeEndpointRequest{})
			return err
		},
		"RotateEndpointSecret": func(ctx context.Context, conn *grpc.ClientConn) error {
			_, err := hooklinev1.NewEndpointServiceClient(conn).RotateEndpointSecret(ctx, &hooklinev1.RotateEndpointSecretRequest{})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			now := time.Unix(1_800_000_000, 0)
			s := newURLTestService(t, func(*Config) {})
			s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			conn, err := grpc.NewClient(serve(t, s), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			as := func(key string) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				t.Cleanup(cancel)
				return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
			}
			var limited error
			n := 0
			for ; n < most && limited == nil; n++ {
				// Every request is invalid: answered before Kafka.
				if err := call(as(acmeKey), conn); status.Code(err) == codes.ResourceExhausted {
					limited = err
				}
			}
			if limited == nil {
				t.Fatalf("%d calls from one tenant, none limited", most)
			}
			var delay time.Duration
			for _, d := range status.Convert(limited).Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					delay = ri.GetRetryDelay().AsDuration()
				}
			}
			if delay <= 0 {
				t.Fatalf("limited after %d calls without a RetryInfo delay: %v", n, limited)
			}
			if err := call(as(otherKey), conn); status.Code(err) == codes.ResourceExhausted {
				t.Fatalf("another tenant is limited by acme's calls: %v", err)
			}
			mu.Lock()
			now = now.Add(delay)
			mu.Unlock()
			if err := call(as(acmeKey), conn); status.Code(err) == codes.ResourceExhausted {
				t.Fatalf("after the retry delay %v: %v", delay, err)
			}
		})
	}
}
