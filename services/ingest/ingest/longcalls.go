package ingest

import (
	"context"
	"sync"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// longCalls caps, per tenant, the calls that can run for long
// (SendTestEvent waits up to a minute for its receiver; RecoverEndpoint
// reads and writes a window of deliveries): beyond --max-long-calls-per-
// tenant running at once in this ingest, another is RESOURCE_EXHAUSTED
// at once instead of holding a stream, so one tenant cannot fill the
// connections and streams every caller shares (the HTTP/JSON gateway's
// among them). Safe for concurrent use.
type longCalls struct {
	limit int
	mu    sync.Mutex
	// running counts each tenant's long calls in progress; a tenant with
	// none has no entry.
	running map[string]int
}

// isLongCall reports whether method is one longCalls caps.
func isLongCall(method string) bool {
	switch method {
	case hooklinev1.DeliveryService_SendTestEvent_FullMethodName, hooklinev1.DeliveryService_RecoverEndpoint_FullMethodName:
		return true
	}
	return false
}

func newLongCalls(limit int) *longCalls { return &longCalls{limit: limit, running: map[string]int{}} }

// unaryInterceptor runs after auth, so the tenant is known.
func (l *longCalls) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !isLongCall(info.FullMethod) {
		return handler(ctx, req)
	}
	tenant := apikey.TenantFrom(ctx)
	l.mu.Lock()
	if l.running[tenant] >= l.limit {
		l.mu.Unlock()
		return nil, status.Errorf(codes.ResourceExhausted, "this tenant already has %d SendTestEvent and RecoverEndpoint calls running (--max-long-calls-per-tenant); wait for one to finish", l.limit)
	}
	l.running[tenant]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.running[tenant]--; l.running[tenant] == 0 {
			delete(l.running, tenant)
		}
		l.mu.Unlock()
	}()
	return handler(ctx, req)
}
