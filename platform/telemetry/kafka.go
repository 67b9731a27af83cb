package telemetry

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// KafkaClientMetrics returns the options that record franz-go client
// metrics (connections, bytes and records produced and fetched: kotel's
// meter) to mp; none when mp is the no-op provider.
func KafkaClientMetrics(mp metric.MeterProvider) []kgo.Opt {
	if _, off := mp.(metricnoop.MeterProvider); off {
		return nil
	}
	return []kgo.Opt{kgo.WithHooks(kotel.NewKotel(kotel.WithMeter(kotel.NewMeter(kotel.MeterProvider(mp)))).Hooks()...)}
}

// KafkaProducerTracing returns the options that start a "<topic> publish"
// producer span for every record produced (child of the record's
// Context) and write its W3C traceparent into the record's headers.
// Only the client that starts a delivery's life (ingest) uses it: hops
// after that copy the delivery's traceparent unchanged (see DESIGN.md,
// "One trace per delivery").
func KafkaProducerTracing(tp trace.TracerProvider) []kgo.Opt {
	tr := kotel.NewTracer(kotel.TracerProvider(tp), kotel.TracerPropagator(Propagator))
	return []kgo.Opt{kgo.WithHooks(kotel.NewKotel(kotel.WithTracer(tr)).Hooks()...)}
}

// RecordContext returns ctx with the span context carried in r's headers
// (the delivery's origin), if any.
func RecordContext(ctx context.Context, r *kgo.Record) context.Context {
	return Propagator.Extract(ctx, kotel.NewRecordCarrier(r))
}

// Lag is the hookline.kafka.consumer.lag gauge of one consumer: per
// topic, the records in the partitions it owns that it has not fetched
// yet (end offset, the last stable one under read_committed, minus the
// next offset to fetch). Safe for concurrent use.
type Lag struct {
	group string
	reg   metric.Registration

	mu   sync.Mutex
	lags map[string]map[int32]int64
}

// NewLag registers the gauge for group on mp. Close unregisters it.
func NewLag(mp metric.MeterProvider, group string) (*Lag, error) {
	l := &Lag{group: group, lags: map[string]map[int32]int64{}}
	m := mp.Meter("github.com/hookline/hookline/platform/telemetry")
	g, err := m.Int64ObservableGauge("hookline.kafka.consumer.lag",
		metric.WithUnit("{record}"),
		metric.WithDescription("Records in this consumer's partitions not yet fetched, per topic."))
	if err != nil {
		return nil, err
	}
	l.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for topic, parts := range l.lags {
			var sum int64
			for _, n := range parts {
				sum += n
			}
			o.ObserveInt64(g, sum, metric.WithAttributes(
				attribute.String("messaging.destination.name", topic),
				attribute.String("messaging.consumer.group.name", l.group)))
		}
		return nil
	}, g)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Observe updates the lag from a poll's fetches.
func (l *Lag) Observe(fs kgo.Fetches) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Err != nil {
			return
		}
		end := p.HighWatermark
		if p.LastStableOffset >= 0 && p.LastStableOffset < end {
			end = p.LastStableOffset
		}
		if end < 0 {
			return
		}
		next := int64(-1)
		if n := len(p.Records); n > 0 {
			next = p.Records[n-1].Offset + 1
		}
		if next < 0 {
			return
		}
		parts := l.lags[p.Topic]
		if parts == nil {
			parts = map[int32]int64{}
			l.lags[p.Topic] = parts
		}
		parts[p.Partition] = max(end-next, 0)
	})
}

// Forget drops partitions this consumer no longer owns.
func (l *Lag) Forget(m map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for topic, parts := range m {
		for _, p := range parts {
			delete(l.lags[topic], p)
		}
	}
}

// Close unregisters the gauge.
func (l *Lag) Close() error { return l.reg.Unregister() }
