package ingest

import (
	"context"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaProducer is the producer every write of this ingest goes
// through: the Kafka client Run makes (acks from all in-sync replicas)
// and --publish-timeout, which bounds each write. It holds nothing else.
type kafkaProducer struct {
	// client is set by Run.
	client *kgo.Client
	// timeout is --publish-timeout.
	timeout time.Duration
}

// produce writes rs and returns once all in-sync replicas have
// acknowledged them, within --publish-timeout.
func (p *kafkaProducer) produce(ctx context.Context, rs ...*kgo.Record) error {
	pctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	return hkafka.ProduceAcked(pctx, p.client, rs...)
}
