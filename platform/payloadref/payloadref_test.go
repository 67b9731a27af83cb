package payloadref

import (
	"context"
	"errors"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReadReturnsTheRecordAtItsReferenceOrErrGone: a reference reads its
// record back, payload included; once retention deleted it, ErrGone.
func TestReadReturnsTheRecordAtItsReferenceOrErrGone(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var refs []*hooklinev1.RecordRef
	for _, v := range []string{"a", "b", "c"} {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(v)}).First()
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, Of(r))
	}
	got, err := Read(ctx, opts, refs[1])
	if err != nil || string(got.Value) != "b" {
		t.Fatalf("Read = %v, %v; want b", got, err)
	}
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, kadm.Offsets{"t": {0: {At: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(ctx, opts, refs[0]); !errors.Is(err, ErrGone) {
		t.Fatalf("Read of a deleted record: %v; want ErrGone", err)
	}
	if got, err := Read(ctx, opts, refs[2]); err != nil || string(got.Value) != "c" {
		t.Fatalf("Read = %v, %v; want c", got, err)
	}
}
