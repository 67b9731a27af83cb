package ingest

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookline/hookline/services/ingest/apikey"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAdmissionBoundsBytesInFlight(t *testing.T) {
	a := &admission{limit: 100}
	steps := []struct {
		name    string
		admit   int64 // > 0: admit this many (no wait); < 0: release -n
		want    bool
		wantUse int64
	}{
		{"first call", 60, true, 60},
		{"one that would pass the limit", 41, false, 60},
		{"one that fits exactly", 40, true, 100},
		{"nothing more while full", 1, false, 100},
		{"release the first", -60, true, 40},
		{"release the second", -40, true, 0},
		{"a call larger than the limit, alone", 500, true, 500},
		{"then nothing else", 1, false, 500},
	}
	for _, s := range steps {
		got := true
		if s.admit > 0 {
			got = a.admit(t.Context(), s.admit, 0)
		} else {
			a.release(t.Context(), -s.admit)
		}
		if got != s.want || a.used != s.wantUse || a.waiting != 0 || len(a.queue) != 0 {
			t.Fatalf("%s: admitted %v with %d in use (%d waiting, queue %d), want %v with %d", s.name, got, a.used, a.waiting, len(a.queue), s.want, s.wantUse)
		}
	}
}

// admitAsync starts admit(n, wait) and returns where its answer comes.
func admitAsync(a *admission, n int64, wait time.Duration) <-chan bool {
	c := make(chan bool, 1)
	go func() { c <- a.admit(context.Background(), n, wait) }()
	return c
}

func answered(c <-chan bool) (bool, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return false, false
	}
}

// TestAdmissionIsFirstComeFirstServed: a large call that does not fit
// waits at the head of the queue, and a smaller one that would fit waits
// behind it instead of overtaking it, so the large one is not starved.
func TestAdmissionIsFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &admission{limit: 100}
		if !a.admit(t.Context(), 60, time.Minute) {
			t.Fatal("first call refused")
		}
		big := admitAsync(a, 80, time.Minute)
		synctest.Wait()
		small := admitAsync(a, 10, time.Minute) // would fit, but the big one came first
		synctest.Wait()
		if _, ok := answered(big); ok {
			t.Fatal("the big call was admitted over the limit")
		}
		if _, ok := answered(small); ok {
			t.Fatal("the small call overtook the big one waiting before it")
		}
		a.release(t.Context(), 60)
		synctest.Wait()
		b, okB := answered(big)
		s, okS := answered(small)
		if !okB || !b || !okS || !s || a.used != 90 || a.waiting != 0 {
			t.Fatalf("after the release: big %v/%v small %v/%v, %d used, %d waiting; want both admitted, 90 used", b, okB, s, okS, a.used, a.waiting)
		}
	})
}

// TestAdmissionPushesBackWhenTheWaitIsFullOrTooLong: calls wait only
// while the waiting ones hold no more than the limit, and only for their
// wait; one that gives up lets those behind it through.
func TestAdmissionPushesBackWhenTheWaitIsFullOrTooLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &admission{limit: 100}
		a.admit(t.Context(), 95, 0)
		first := admitAsync(a, 80, time.Second) // waits
		synctest.Wait()
		if a.admit(t.Context(), 30, time.Minute) {
			t.Fatal("admitted although the waiting calls hold the limit")
		}
		second := admitAsync(a, 5, time.Minute) // waits behind the first
		synctest.Wait()
		time.Sleep(time.Second) // the first one's wait ends
		synctest.Wait()
		if v, ok := answered(first); !ok || v {
			t.Fatalf("the first call after its wait: %v (answered %v), want pushed back", v, ok)
		}
		if v, ok := answered(second); !ok || !v {
			t.Fatalf("the call behind it: %v (answered %v), want admitted once the first gave up", v, ok)
		}
		if a.used != 100 || a.waiting != 0 || len(a.queue) != 0 {
			t.Fatalf("%d used, %d waiting, queue %d", a.used, a.waiting, len(a.queue))
		}
	})
}

func TestPushBackCarriesRetryInfo(t *testing.T) {
	err := (&admission{limit: 100}).pushBack(7)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("code %v", st.Code())
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() == pushBackDelay {
			return
		}
	}
	t.Fatalf("no RetryInfo of %v in %v", pushBackDelay, st.Details())
}

// admitAs starts admit(n, wait) for tenant and returns where its answer
// comes; it gives up when t ends.
func admitAs(t *testing.T, a *admission, tenant string, n int64, wait time.Duration) <-chan bool {
	c := make(chan bool, 1)
	ctx := as(t, tenant)
	go func() { c <- a.admit(ctx, n, wait) }()
	return c
}

// as is a context of tenant's, ended with t.
func as(t *testing.T, tenant string) context.Context {
	return apikey.WithPrincipal(t.Context(), apikey.Principal{Tenant: tenant, Scope: apikey.ScopePublish})
}

// TestAdmissionSharesTheBudgetAcrossTenants: one tenant's flood of
// publishes does not make another wait behind it. While two tenants
// want bytes, each may hold half the budget: bytes freed go to the tenant
// under its share first, though the flooding tenant's calls came before;
// and the flooding tenant's queue does not push back the other's call.
// On main admission was one FIFO for every tenant (one tenant's flood
// took another's publish p50 from 19 ms to 1.33 s).
func TestAdmissionSharesTheBudgetAcrossTenants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &admission{limit: 100}
		for range 2 {
			if v, _ := answered(admitAs(t, a, "flood", 50, 0)); !v {
				synctest.Wait()
			}
		}
		synctest.Wait()
		if a.used != 100 {
			t.Fatalf("the flooding tenant holds %d, want the whole budget (alone, it may)", a.used)
		}
		flood := admitAs(t, a, "flood", 95, time.Minute) // waits: its queue holds most of the budget
		synctest.Wait()
		quiet := admitAs(t, a, "quiet", 10, time.Minute)
		synctest.Wait()
		if v, ok := answered(quiet); ok {
			t.Fatalf("the quiet tenant's call was answered %v at once; want it to wait its turn, not be pushed back by another tenant's queue", v)
		}
		a.release(as(t, "flood"), 50)
		synctest.Wait()
		if v, ok := answered(quiet); !ok || !v {
			t.Fatalf("after 50 bytes were freed the quiet tenant's call is %v (answered %v); want it admitted ahead of the flooding tenant's", v, ok)
		}
		if _, ok := answered(flood); ok {
			t.Fatal("the flooding tenant's call was admitted beyond its half of the budget while another tenant holds bytes")
		}
		a.release(as(t, "quiet"), 10) // the quiet tenant is done: the flooding one may have it all again
		a.release(as(t, "flood"), 50)
		synctest.Wait()
		if v, ok := answered(flood); !ok || !v {
			t.Fatalf("the flooding tenant's call, alone again: %v (answered %v), want admitted", v, ok)
		}
	})
}
