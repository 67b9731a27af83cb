package harness

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaLinkCarriesAClientAndPartitionsIt: a client given only the
// link's bootstrap address produces and consumes through the link (every
// broker address it learns is one of the link's ports, so it never
// reaches the brokers around it); while the link is partitioned a
// produce gets no answer, and after Heal the held produce is answered.
func TestKafkaLinkCarriesAClientAndPartitionsIt(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	link, err := NewKafkaLink("test", c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(link.Bootstrap()), kgo.DefaultProduceTopic("t"), kgo.ConsumeTopics("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(time.Minute),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	for p := range int32(3) { // one record to each partition: each leader's port is used
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(strconv.Itoa(int(p)))}).FirstErr(); err != nil {
			t.Fatalf("produce through the link: %v", err)
		}
	}
	brokers := map[string]bool{}
	for _, a := range c.ListenAddrs() {
		brokers[a] = true
	}
	link.mu.Lock()
	ports := len(link.ports)
	for up, p := range link.ports {
		if !brokers[up] || brokers[p.ln.Addr().String()] {
			t.Errorf("link port %s for %s", p.ln.Addr(), up)
		}
	}
	link.mu.Unlock()
	if ports != 3 {
		t.Fatalf("link has %d ports, want one per broker (3)", ports)
	}

	link.Partition()
	answered := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Partition: 1, Value: []byte("held")}, func(_ *kgo.Record, err error) { answered <- err })
	select {
	case err := <-answered:
		t.Fatalf("a produce across the partition was answered (%v)", err)
	case <-time.After(2 * time.Second): // a bound on a wait, not the condition: nothing may arrive
	}
	link.Heal()
	if err := <-answered; err != nil {
		t.Fatalf("the produce held by the partition, after Heal: %v", err)
	}
	got := 0
	for got < 4 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
}

// TestALinkToADeadBrokerRefusesAsADirectConnectionWould: with nothing
// listening upstream, a connection through the link is reset, as a
// direct one would be refused — never the orderly close that kgo takes
// for a TLS mistake and does not retry ("broker closed the connection
// immediately"; make chaos's kill-broker and kill-txn-coordinator rows
// ended dispatcher sessions on it).
func TestALinkToADeadBrokerRefusesAsADirectConnectionWould(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	link, err := NewKafkaLink("test", dead)
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	c, err := net.Dial("tcp", link.Bootstrap())
	if err == nil { // the reset may come before the dial returns, or after
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err = c.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading a link to a dead broker: %v; want a connection reset", err)
	}
}
