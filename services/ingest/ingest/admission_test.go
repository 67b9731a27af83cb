package ingest

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAdmissionBoundsBytesInFlight(t *testing.T) {
	a := &admission{limit: 100}
	steps := []struct {
		name    string
		admit   int64 // > 0: admit this many; < 0: release -n
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
			got = a.admit(s.admit)
		} else {
			a.release(-s.admit)
		}
		if got != s.want || a.used != s.wantUse {
			t.Fatalf("%s: admitted %v with %d in use, want %v with %d", s.name, got, a.used, s.want, s.wantUse)
		}
	}
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
