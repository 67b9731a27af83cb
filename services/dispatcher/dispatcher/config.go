package dispatcher

import (
	"time"

	"github.com/hookline/hookline/platform/endpoints"
	phealth "github.com/hookline/hookline/platform/health"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/platform/netguard"
)

// Config is the dispatcher's configuration, read by platform/config from
// flags and HOOKLINE_* environment variables.
type Config struct {
	Kafka   hkafka.Config
	Health  phealth.Config
	Secrets keyring.Config
	// The destination flags (--allow-private-destinations, --allow-cidrs,
	// --tenant-allow-cidrs), shared with ingest; --notice-webhook-allow-cidrs
	// is the dispatcher's own.
	netguard.Config

	Group           string        `flag:"group" env:"HOOKLINE_DISPATCHER_GROUP" default:"hookline-dispatcher" usage:"Kafka consumer group of the dispatchers"`
	TransactionalID string        `flag:"transactional-id" env:"HOOKLINE_DISPATCHER_TRANSACTIONAL_ID" usage:"Kafka transactional id, unique and stable per dispatcher instance (default: hookline-dispatcher-<hostname>)"`
	TxnTimeout      time.Duration `flag:"transaction-timeout" env:"HOOKLINE_DISPATCHER_TRANSACTION_TIMEOUT" default:"0s" usage:"Kafka transaction timeout (0: three --session-timeout): how long a transaction left open by an instance that died and does not come back under its --transactional-id holds back read-committed readers of the partitions it wrote"`
	// GroupInstanceID makes the dispatcher a static member of its group
	// (KIP-345): a graceful stop does not leave the group, and an
	// instance back with the same id within --session-timeout gets its
	// partitions back with no rebalance, so the other dispatchers' work
	// is not moved (a move re-POSTs what the moved partitions had in
	// flight: docs/DESIGN.md, "What a crash, a rebalance or an outage
	// re-POSTs").
	GroupInstanceID string `flag:"group-instance-id" env:"HOOKLINE_DISPATCHER_GROUP_INSTANCE_ID" usage:"static group membership: a stable id per instance (e.g. the StatefulSet pod name); a graceful stop keeps the instance's partitions for --session-timeout, and a restart with the same id takes them back with no rebalance, so a rolling upgrade moves no work and re-POSTs nothing; an instance stopped for good hands its partitions over only after --session-timeout (default: none, dynamic membership)"`
	// AnswersDir keeps the receivers' 2xx answers not committed yet on
	// disk (answerjournal.go), so a process killed and started again on
	// it settles what they answered instead of POSTing it again.
	AnswersDir     string        `flag:"answers-dir" env:"HOOKLINE_DISPATCHER_ANSWERS_DIR" usage:"directory, one per instance and kept across restarts (a StatefulSet volume, or an emptyDir, which survives a container restart), where the dispatcher journals the receivers' 2xx answers whose settlements have not committed yet; a process killed (kill -9, OOM) and started again on it with the same --group-instance-id settles those deliveries from their answers instead of POSTing them again. Each answer costs a write(2), no fsync (default: none, answers are kept in memory only)"`
	SessionTimeout time.Duration `flag:"session-timeout" env:"HOOKLINE_DISPATCHER_SESSION_TIMEOUT" default:"10s" usage:"Kafka group session timeout: how long a dispatcher that died (kill -9, lost host) keeps its partitions before the others take them over"`
	BatchSize      int           `flag:"batch-size" env:"HOOKLINE_DISPATCHER_BATCH_SIZE" default:"2000" usage:"deliveries taken per poll"`
	FetchMaxWait   time.Duration `flag:"fetch-max-wait" env:"HOOKLINE_DISPATCHER_FETCH_MAX_WAIT" default:"250ms" usage:"longest an idle fetch of the deliveries topic waits for new data; on a replicated cluster a read_committed fetch is not always answered when a transaction commits, so this bounds how late a new delivery is seen"`
	CommitInterval time.Duration `flag:"commit-interval" env:"HOOKLINE_DISPATCHER_COMMIT_INTERVAL" default:"20ms" usage:"how often completed deliveries' results and offsets are committed"`
	DrainTimeout   time.Duration `flag:"drain-timeout" env:"HOOKLINE_DISPATCHER_DRAIN_TIMEOUT" default:"15s" usage:"on shutdown, how long in-flight attempts may finish"`
	CopyLookback   time.Duration `flag:"copy-lookback" env:"HOOKLINE_DISPATCHER_COPY_LOOKBACK" default:"5m" usage:"on a partition assignment, how far back before the committed offset the dispatcher reads the deliveries it takes over, so a copy ingest writes later (a publish retried with its idempotency key) is not attempted again; at least the publish timeout times the producers' retries (0: not read)"`

	AttemptTimeout time.Duration `flag:"attempt-timeout" env:"HOOKLINE_ATTEMPT_TIMEOUT" default:"10s" usage:"default per-attempt timeout; endpoints may override"`
	MaxAttempts    uint32        `flag:"max-attempts" env:"HOOKLINE_MAX_ATTEMPTS" default:"16" usage:"default attempt budget of a delivery"`
	MaxAge         time.Duration `flag:"max-age" env:"HOOKLINE_MAX_AGE" default:"72h" usage:"default time budget of a delivery, from its first attempt"`
	RetryAfterMax  time.Duration `flag:"retry-after-max" env:"HOOKLINE_RETRY_AFTER_MAX" default:"24h" usage:"longest Retry-After (on 429 and 503) honoured; longer asks are capped"`
	// AcceptUnsigned is the rolling-upgrade window of record
	// authentication (docs/security.md): records without a RecordMac are
	// sent; a record whose MAC does not verify is still refused.
	AcceptUnsigned bool `flag:"accept-unsigned-deliveries" env:"HOOKLINE_ACCEPT_UNSIGNED_DELIVERIES" usage:"send delivery records that carry no MAC (those written before ingest wrote them, during an upgrade): off, such a record is refused and dead-lettered unsent; a record with a MAC that does not verify is refused either way. Without --secrets-key-file no record is checked"`
	MaxFaults      int  `flag:"max-worker-faults" env:"HOOKLINE_MAX_WORKER_FAULTS" default:"5" usage:"worker faults (panics) one delivery may cause before it is set aside on the dead-letter topic"`

	MaxInFlight        int           `flag:"max-in-flight" env:"HOOKLINE_MAX_IN_FLIGHT" default:"10" usage:"default cap of attempts in flight to one endpoint; endpoints may override"`
	MaxInFlightCeiling int           `flag:"max-in-flight-ceiling" env:"HOOKLINE_MAX_IN_FLIGHT_CEILING" usage:"highest per-endpoint cap honoured; an endpoint asking for more gets this (ingest refuses more than the default, platform/endpoints.MaxInFlightCeiling)"`
	RateLimit          float64       `flag:"rate-limit" env:"HOOKLINE_RATE_LIMIT" default:"100" usage:"default attempts per second to one endpoint; endpoints may override (0: no limit)"`
	RateLimitCeiling   float64       `flag:"rate-limit-ceiling" env:"HOOKLINE_RATE_LIMIT_CEILING" usage:"highest per-endpoint rate honoured (attempts per second); an endpoint asking for more gets this (ingest refuses more than the default, platform/endpoints.RateLimitCeiling)"`
	ParkRecheck        time.Duration `flag:"park-recheck" env:"HOOKLINE_PARK_RECHECK" default:"5s" usage:"wait before a held delivery whose payload could not be read back looks again; a paused endpoint's deliveries and the members behind a blocked ordered lane's head no longer recheck: they wait once in the parked topic until the scheduler releases them (the scheduler's own --park-recheck is the wait of a parked delivery over its --max-parked)"`
	MaxHold            time.Duration `flag:"max-hold" env:"HOOKLINE_MAX_HOLD" default:"72h" usage:"longest a delivery is held without an attempt (paused endpoint, outage mode, spilled backlog) before it ends EXPIRED with a dead letter; must be below --topic-retention"`

	// The engine's memory: attempts in flight, and the window of polled
	// deliveries not yet committed (queued, in flight, or done above a
	// partition's low watermark).
	AttemptMemory int64         `flag:"attempt-memory" env:"HOOKLINE_ATTEMPT_MEMORY" default:"268435456" usage:"bytes all attempts in flight may use together; each is charged 32 KiB plus its payload (sockets, buffers, goroutine) — this, not a fixed pool, bounds how many attempts run at once"`
	WindowRecords int           `flag:"window-records" env:"HOOKLINE_WINDOW_RECORDS" default:"100000" usage:"deliveries the window may hold (polled, not yet committed); above it fetching stops and stuck partitions spill"`
	WindowBytes   int64         `flag:"window-bytes" env:"HOOKLINE_WINDOW_BYTES" default:"134217728" usage:"bytes the window may hold (record values plus a fixed overhead each)"`
	QueueTime     time.Duration `flag:"queue-time" env:"HOOKLINE_QUEUE_TIME" default:"30s" usage:"per endpoint, how much backlog (in time at its pace: its rate limit, or its cap's share of its attempts' latency, whichever is slower) waits in memory; beyond it deliveries are spilled, once, to the retry path due when the pace allows"`
	QueueMin      int           `flag:"queue-min" env:"HOOKLINE_QUEUE_MIN" default:"1000" usage:"per endpoint, deliveries that may wait in memory whatever its rate limit — unless its answers are so slow that fewer start within --queue-time (never fewer than its cap)"`
	QueueBytes    int64         `flag:"queue-bytes" env:"HOOKLINE_QUEUE_BYTES" default:"33554432" usage:"per endpoint, bytes of deliveries that may wait in memory"`
	EarlyHold     time.Duration `flag:"early-hold" env:"HOOKLINE_EARLY_HOLD" default:"2s" usage:"the clock-skew tolerance between scheduler and dispatcher: a delivery the scheduler released up to this long before its due time by this dispatcher's clock waits in memory until it is due; one released earlier goes back through the scheduler, pushed by how early it was (at most half of --stuck-after; 0: every early delivery goes back). Keep the hosts' clocks in sync (NTP) well within it"`
	StuckAfter    time.Duration `flag:"stuck-after" env:"HOOKLINE_STUCK_AFTER" default:"10s" usage:"when a partition's oldest uncommitted delivery has waited in its endpoint's queue this long, that endpoint's waiting deliveries are spilled so the partition's other endpoints go on"`

	FailingAfter   int           `flag:"failing-after" env:"HOOKLINE_FAILING_AFTER" default:"5" usage:"consecutive failed attempts after which an endpoint.failing notice goes out"`
	RemindEvery    time.Duration `flag:"remind-every" env:"HOOKLINE_REMIND_EVERY" default:"6h" usage:"how often an endpoint.failing reminder goes out while the outage lasts (0: never)"`
	AutoPauseAfter int           `flag:"auto-pause-after" env:"HOOKLINE_AUTO_PAUSE_AFTER" default:"100" usage:"consecutive permanent failures after which an endpoint is paused (0: never)"`

	OutageAfter    int           `flag:"outage-after" env:"HOOKLINE_OUTAGE_AFTER" default:"2" usage:"transient failures of this many distinct deliveries in a row put an endpoint in outage mode (0: never; endpoints may opt out)"`
	OutageRecheck  time.Duration `flag:"outage-recheck" env:"HOOKLINE_OUTAGE_RECHECK" default:"2m" usage:"in outage mode, how often held deliveries look whether the endpoint is back"`
	OutageProbeMax time.Duration `flag:"outage-probe-max" env:"HOOKLINE_OUTAGE_PROBE_MAX" default:"2m" usage:"in outage mode, the longest wait between probes (the endpoint's backoff, capped)"`

	NoticeWebhookURL    string   `flag:"notice-webhook-url" env:"HOOKLINE_NOTICE_WEBHOOK_URL" usage:"operator webhook that receives every endpoint notice, signed (default: notices go to the notices topic only)"`
	NoticeWebhookSecret string   `flag:"notice-webhook-secret" env:"HOOKLINE_NOTICE_WEBHOOK_SECRET" usage:"whsec_… secret that signs notices sent to --notice-webhook-url"`
	NoticeWebhookCIDRs  []string `flag:"notice-webhook-allow-cidrs" env:"HOOKLINE_NOTICE_WEBHOOK_ALLOW_CIDRS" usage:"CIDRs --notice-webhook-url may resolve to despite being private, comma-separated (its own list: --allow-cidrs and --tenant-allow-cidrs do not apply to it); never the cloud metadata addresses"`
	EgressProxy         string   `flag:"egress-proxy" env:"HOOKLINE_EGRESS_PROXY" usage:"HTTP proxy (http://[user:password@]host:port) every connection to receivers, OAuth2 token endpoints and --notice-webhook-url goes through with CONNECT, for static egress IPs; the destination guard still checks the resolved address, and the proxy is asked for that IP (default: direct)"`
	TenantEgressProxies []string `flag:"tenant-egress-proxy" env:"HOOKLINE_TENANT_EGRESS_PROXY" usage:"per-tenant override of --egress-proxy, comma-separated tenant=http://host:port, or tenant=direct for no proxy (e.g. acme=http://10.1.0.5:4750)"`

	ForwardTraceState []string `flag:"forward-tracestate" env:"HOOKLINE_FORWARD_TRACESTATE" usage:"keys of a producer's W3C tracestate list-members that receivers get, comma-separated (* for all; default: none, receivers get traceparent only)"`
	ForwardBaggage    []string `flag:"forward-baggage" env:"HOOKLINE_FORWARD_BAGGAGE" usage:"keys of a producer's W3C baggage members that receivers get, comma-separated (* for all; default: none)"`
}

// SetDefaults gives --max-in-flight-ceiling and --rate-limit-ceiling the
// limits ingest validates endpoints against (platform/endpoints), their
// one home; platform/config calls it before reading the flags.
func (c *Config) SetDefaults() {
	c.MaxInFlightCeiling = endpoints.MaxInFlightCeiling
	c.RateLimitCeiling = endpoints.RateLimitCeiling
}
