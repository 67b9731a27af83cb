package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProduceAckedAnswersAtTheDeadlineWhileTheBrokerIsFrozen: a produce
// already on the wire when the broker stops answering is not cancelled by
// its context (kgo's ProduceSync waits it out); ProduceAcked answers at
// the deadline, and the record may still be written after.
func TestProduceAckedAnswersAtTheDeadlineWhileTheBrokerIsFrozen(t *testing.T) {
	cfg, _ := testBroker(t)
	adm := kadm.NewClient(testClient(t, cfg))
	topic := newTopic(t, adm, nil)
	fr := kafkatest.NewFreezer(false)
	defer fr.Thaw()
	cl := testClient(t, cfg, kgo.Dialer(fr.Dial), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := ProduceAcked(t.Context(), cl, &kgo.Record{Topic: topic, Value: []byte("warm")}); err != nil {
		t.Fatal(err) // connections and producer id are set up
	}

	fr.Freeze()
	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	answered := make(chan error, 1)
	go func() { answered <- ProduceAcked(ctx, cl, &kgo.Record{Topic: topic, Value: []byte("frozen")}) }()
	bound := time.NewTimer(timeout + 5*time.Second)
	defer bound.Stop()
	select {
	case err := <-answered:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
	case <-bound.C:
		t.Fatal("ProduceAcked did not answer at its deadline while the broker was frozen")
	}

	// The record was on the wire: once the broker answers, it is there.
	fr.Thaw()
	waitOffsets(t, adm, topic, func(_, _, end int64) bool { return end == 2 }, "the frozen record written after all")
}
