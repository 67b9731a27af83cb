package dispatcher

import (
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
)

// Config is the dispatcher's configuration, read by platform/config from
// flags and HOOKLINE_* environment variables.
type Config struct {
	Kafka hkafka.Config

	Group           string        `flag:"group" env:"HOOKLINE_DISPATCHER_GROUP" default:"hookline-dispatcher" usage:"Kafka consumer group of the dispatchers"`
	TransactionalID string        `flag:"transactional-id" env:"HOOKLINE_DISPATCHER_TRANSACTIONAL_ID" usage:"Kafka transactional id, unique and stable per dispatcher instance (default: hookline-dispatcher-<hostname>)"`
	TxnTimeout      time.Duration `flag:"transaction-timeout" env:"HOOKLINE_DISPATCHER_TRANSACTION_TIMEOUT" default:"60s" usage:"Kafka transaction timeout"`
	Workers         int           `flag:"workers" env:"HOOKLINE_DISPATCHER_WORKERS" default:"256" usage:"attempts in flight at once per dispatcher"`
	BatchSize       int           `flag:"batch-size" env:"HOOKLINE_DISPATCHER_BATCH_SIZE" default:"1000" usage:"deliveries taken per poll"`
	CommitInterval  time.Duration `flag:"commit-interval" env:"HOOKLINE_DISPATCHER_COMMIT_INTERVAL" default:"20ms" usage:"how often completed deliveries' results and offsets are committed"`
	DrainTimeout    time.Duration `flag:"drain-timeout" env:"HOOKLINE_DISPATCHER_DRAIN_TIMEOUT" default:"15s" usage:"on shutdown, how long in-flight attempts may finish"`

	AttemptTimeout time.Duration `flag:"attempt-timeout" env:"HOOKLINE_ATTEMPT_TIMEOUT" default:"10s" usage:"default per-attempt timeout; endpoints may override"`
	MaxAttempts    uint32        `flag:"max-attempts" env:"HOOKLINE_MAX_ATTEMPTS" default:"16" usage:"default attempt budget of a delivery"`
	MaxAge         time.Duration `flag:"max-age" env:"HOOKLINE_MAX_AGE" default:"72h" usage:"default time budget of a delivery, from its first attempt"`
	RetryAfterMax  time.Duration `flag:"retry-after-max" env:"HOOKLINE_RETRY_AFTER_MAX" default:"24h" usage:"longest Retry-After (on 429 and 503) honoured; longer asks are capped"`
	MaxFaults      int           `flag:"max-worker-faults" env:"HOOKLINE_MAX_WORKER_FAULTS" default:"5" usage:"worker faults (panics) one delivery may cause before it is set aside on the dead-letter topic"`

	MaxInFlight int           `flag:"max-in-flight" env:"HOOKLINE_MAX_IN_FLIGHT" default:"10" usage:"default cap of attempts in flight to one endpoint; endpoints may override"`
	RateLimit   float64       `flag:"rate-limit" env:"HOOKLINE_RATE_LIMIT" default:"100" usage:"default attempts per second to one endpoint; endpoints may override"`
	CapRetry    time.Duration `flag:"cap-retry" env:"HOOKLINE_CAP_RETRY" default:"1s" usage:"how long a delivery over its endpoint's concurrency cap is deferred (no attempt burned)"`
	ParkRecheck time.Duration `flag:"park-recheck" env:"HOOKLINE_PARK_RECHECK" default:"1m" usage:"how often a paused endpoint's held deliveries check whether it has resumed"`

	FailingAfter   int           `flag:"failing-after" env:"HOOKLINE_FAILING_AFTER" default:"5" usage:"consecutive failed attempts after which an endpoint.failing notice goes out"`
	RemindEvery    time.Duration `flag:"remind-every" env:"HOOKLINE_REMIND_EVERY" default:"6h" usage:"how often an endpoint.failing reminder goes out while the outage lasts (0: never)"`
	AutoPauseAfter int           `flag:"auto-pause-after" env:"HOOKLINE_AUTO_PAUSE_AFTER" default:"100" usage:"consecutive permanent failures after which an endpoint is paused (0: never)"`

	OutageAfter    int           `flag:"outage-after" env:"HOOKLINE_OUTAGE_AFTER" default:"2" usage:"transient failures of this many distinct deliveries in a row put an endpoint in outage mode (0: never; endpoints may opt out)"`
	OutageRecheck  time.Duration `flag:"outage-recheck" env:"HOOKLINE_OUTAGE_RECHECK" default:"2m" usage:"in outage mode, how often held deliveries look whether the endpoint is back"`
	OutageProbeMax time.Duration `flag:"outage-probe-max" env:"HOOKLINE_OUTAGE_PROBE_MAX" default:"2m" usage:"in outage mode, the longest wait between probes (the endpoint's backoff, capped)"`

	NoticeWebhookURL    string `flag:"notice-webhook-url" env:"HOOKLINE_NOTICE_WEBHOOK_URL" usage:"operator webhook that receives every endpoint notice, signed (default: notices go to the notices topic only)"`
	NoticeWebhookSecret string `flag:"notice-webhook-secret" env:"HOOKLINE_NOTICE_WEBHOOK_SECRET" usage:"whsec_… secret that signs notices sent to --notice-webhook-url"`

	AllowPrivate bool     `flag:"allow-private-destinations" env:"HOOKLINE_ALLOW_PRIVATE_DESTINATIONS" usage:"deliver to loopback and private addresses (development only)"`
	AllowCIDRs   []string `flag:"allow-cidrs" env:"HOOKLINE_ALLOW_CIDRS" usage:"CIDRs receivers may resolve to despite being private, comma-separated"`
}
