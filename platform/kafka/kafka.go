// Package kafka holds what every Hookline service shares about Kafka:
// connection settings (brokers, TLS, SASL), topic names, topic creation
// and verification, and the protobuf record codec.
package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is the Kafka section of every service's configuration.
type Config struct {
	Brokers     []string `flag:"kafka-brokers" env:"HOOKLINE_KAFKA_BROKERS" default:"127.0.0.1:9092" usage:"Kafka bootstrap brokers, comma-separated"`
	TopicPrefix string   `flag:"topic-prefix" env:"HOOKLINE_TOPIC_PREFIX" default:"hookline." usage:"prefix of every topic name"`
	ClientID    string   `flag:"kafka-client-id" env:"HOOKLINE_KAFKA_CLIENT_ID" default:"hookline" usage:"client id sent to Kafka"`

	TLS           bool   `flag:"kafka-tls" env:"HOOKLINE_KAFKA_TLS" usage:"connect to Kafka over TLS"`
	TLSCAFile     string `flag:"kafka-tls-ca" env:"HOOKLINE_KAFKA_TLS_CA" usage:"PEM file of CAs that sign the brokers' certificates (default: system roots)"`
	TLSCertFile   string `flag:"kafka-tls-cert" env:"HOOKLINE_KAFKA_TLS_CERT" usage:"PEM client certificate for mutual TLS"`
	TLSKeyFile    string `flag:"kafka-tls-key" env:"HOOKLINE_KAFKA_TLS_KEY" usage:"PEM client key for mutual TLS"`
	TLSServerName string `flag:"kafka-tls-server-name" env:"HOOKLINE_KAFKA_TLS_SERVER_NAME" usage:"server name to verify the brokers' certificates against"`

	SASLMechanism string `flag:"kafka-sasl-mechanism" env:"HOOKLINE_KAFKA_SASL_MECHANISM" usage:"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL)"`
	SASLUser      string `flag:"kafka-sasl-user" env:"HOOKLINE_KAFKA_SASL_USER" usage:"SASL user name"`
	SASLPassword  string `flag:"kafka-sasl-password" env:"HOOKLINE_KAFKA_SASL_PASSWORD" usage:"SASL password"`

	Partitions        int           `flag:"topic-partitions" env:"HOOKLINE_TOPIC_PARTITIONS" default:"6" usage:"partitions of each topic Hookline creates"`
	ReplicationFactor int           `flag:"topic-replication-factor" env:"HOOKLINE_TOPIC_REPLICATION_FACTOR" default:"-1" usage:"replication factor of each topic Hookline creates (-1: the broker's default)"`
	Retention         time.Duration `flag:"topic-retention" env:"HOOKLINE_TOPIC_RETENTION" default:"168h" usage:"retention of the deliveries, retries and results topics"`
	HoldRetention     time.Duration `flag:"topic-hold-retention" env:"HOOKLINE_TOPIC_HOLD_RETENTION" default:"720h" usage:"retention of the dead-letter topic"`

	ProducerLinger time.Duration `flag:"kafka-linger" env:"HOOKLINE_KAFKA_LINGER" default:"0s" usage:"how long a producer waits for more records before sending a partition's batch; 0 sends at once, and records that arrive while requests are in flight (up to 5 per broker) share the next batch"`
	Compression    string        `flag:"kafka-compression" env:"HOOKLINE_KAFKA_COMPRESSION" default:"none" usage:"compression of produced batches: none, snappy, lz4, zstd or gzip"`

	// ClientOpts are appended to every client's options; embedding
	// programs and tests set them (a custom dialer, a logger). Not a flag.
	ClientOpts []kgo.Opt
}

// metadataMinAge is how often a client may refresh metadata at most
// (Opts).
const metadataMinAge = 250 * time.Millisecond

// Opts returns the client options for cfg: seed brokers, client id,
// TLS and SASL.
func (c Config) Opts() ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured; set --kafka-brokers or HOOKLINE_KAFKA_BROKERS")
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...), kgo.ClientID(c.ClientID),
		// A produce kgo retries waits for a metadata refresh, and kgo
		// refreshes at most every MetadataMinAge (5 s by default). On a
		// replicated cluster a transaction's first produce often meets
		// CONCURRENT_TRANSACTIONS while the last one's markers are still
		// being written, so every such commit took 5 s (10 s with two)
		// and deliveries came in 5 s bursts (docs/reliability.md, "Three
		// brokers"). A refresh at most every 250 ms makes that retry cost
		// what the markers take.
		kgo.MetadataMinAge(metadataMinAge),
	}
	if c.TLS || c.TLSCAFile != "" || c.TLSCertFile != "" {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch m := strings.ToUpper(c.SASLMechanism); m {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("kafka: unknown SASL mechanism %q; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
	}
	return append(opts, c.ClientOpts...), nil
}

// ProducerOpts returns the batching options of Hookline's producers:
// ProducerLinger and Compression. Measured with the embedded broker
// (BENCHMARKS.md, "ingest profile"): a linger only adds its own length to
// every publish, since records that arrive while requests are in flight
// are batched anyway; compression costs CPU in the producer and in every
// reader and saves nothing on loopback. Over a network to a real
// cluster, lz4 or zstd with a linger of a few milliseconds trades that
// CPU and latency for bytes.
func (c Config) ProducerOpts() ([]kgo.Opt, error) {
	if c.ProducerLinger < 0 || c.ProducerLinger > time.Minute {
		return nil, fmt.Errorf("kafka: --kafka-linger %s: want 0 to 1m", c.ProducerLinger)
	}
	var codec kgo.CompressionCodec
	switch strings.ToLower(c.Compression) {
	case "", "none":
		codec = kgo.NoCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	default:
		return nil, fmt.Errorf("kafka: unknown --kafka-compression %q; use none, snappy, lz4, zstd or gzip", c.Compression)
	}
	return []kgo.Opt{kgo.ProducerLinger(c.ProducerLinger), kgo.ProducerBatchCompression(codec)}, nil
}

func (c Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka: TLS CA file %s holds no PEM certificate", c.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if c.TLSCertFile != "" || c.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: TLS client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Topics are the names of Hookline's topics under one prefix.
type Topics struct {
	Endpoints  string // compacted endpoint configuration
	Deliveries string // deliveries due now, keyed by endpoint id
	Retries    string // deliveries waiting for a retry, keyed by endpoint id
	Results    string // one AttemptResult per attempt
	Dead       string // dead letters
	Notices    string // endpoint health notices
	Lanes      string // ordered lanes' members outside memory (compacted)
	// Parked holds paused endpoints' deliveries by reference, keyed by
	// delivery id, a tombstone once released (compacted; DESIGN I45).
	Parked string
	// Idempotency holds claims on publish idempotency keys; ingest
	// creates it with its own retention (twice the key TTL).
	Idempotency string
	// ConsoleSessions holds the ids of signed-out console sessions;
	// ingest creates it with its own retention (twice a session's life).
	ConsoleSessions string
	// DelayPrefix starts each delay-tier topic name: DelayPrefix + "1m".
	DelayPrefix string
}

// Topics returns the topic names under c.TopicPrefix.
func (c Config) Topics() Topics {
	p := c.TopicPrefix
	return Topics{
		Endpoints:       p + "endpoints",
		Deliveries:      p + "deliveries",
		Retries:         p + "retries",
		Results:         p + "results",
		Dead:            p + "dead",
		Notices:         p + "notices",
		Lanes:           p + "lanes",
		Parked:          p + "parked",
		Idempotency:     p + "idempotency",
		ConsoleSessions: p + "console-sessions",
		DelayPrefix:     p + "delay.",
	}
}
