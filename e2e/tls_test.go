package e2e

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The TLS listener of the test broker (make test-real: scripts/kafka.sh
// starts one with a throwaway CA).
const (
	envKafkaTLS   = "HOOKLINE_TEST_KAFKA_TLS"
	envKafkaTLSCA = "HOOKLINE_TEST_KAFKA_TLS_CA"
)

// TestDeliveryOverTLS runs a delivery end to end with every client of
// every service talking TLS to Apache Kafka (--kafka-tls, --kafka-tls-ca),
// and checks that a client which does not trust the broker's CA is
// refused rather than silently connected.
func TestDeliveryOverTLS(t *testing.T) {
	addr, ca := os.Getenv(envKafkaTLS), os.Getenv(envKafkaTLSCA)
	if addr == "" || ca == "" {
		t.Skipf("set %s and %s to a TLS listener and its CA (make test-real does)", envKafkaTLS, envKafkaTLSCA)
	}
	st := startStack(t, func(c *stackConfig) {
		c.kafka.Brokers = []string{addr}
		c.kafka.TLS = true
		c.kafka.TLSCAFile = ca
	})
	rx := newReceiver(t, http.StatusOK)
	st.createEndpoint(rx.URL + "/hooks")
	pub := st.publish("invoice.paid", `{"over":"tls"}`)
	res := kafkatest.Decode(t, st.readN(st.topics.Results, 1), func() *hooklinev1.AttemptResult { return new(hooklinev1.AttemptResult) })[0]
	if res.GetEventId() != pub.GetEventId() || res.GetState() != hooklinev1.DeliveryState_DELIVERY_STATE_DELIVERED {
		t.Fatalf("result over TLS: %v", res)
	}

	// The system roots do not know the throwaway CA: no connection.
	untrusting := st.kafka
	untrusting.TLSCAFile = ""
	opts, err := untrusting.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RetryTimeout(2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("a client that does not trust the broker's CA connected")
	}
}
