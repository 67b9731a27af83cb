package ingest

import (
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/platform/netguard"
)

// Config is ingest's configuration, read by platform/config from flags
// and HOOKLINE_* environment variables.
type Config struct {
	Kafka   hkafka.Config
	Secrets keyring.Config
	// The destination flags (--allow-private-destinations, --allow-cidrs,
	// --tenant-allow-cidrs), shared with the dispatcher.
	netguard.Config

	GRPCAddr string   `flag:"grpc-addr" env:"HOOKLINE_GRPC_ADDR" default:"127.0.0.1:7070" usage:"gRPC listen address"`
	APIKeys  []string `flag:"api-keys" env:"HOOKLINE_API_KEYS" usage:"API keys, comma-separated tenant:[scope:]key or tenant:[scope:]sha256:<hex>; scope is publish, read or admin (the default); fixed until restart"`
	// APIKeysFile holds keys that can be added and revoked at run time.
	APIKeysFile string `flag:"api-keys-file" env:"HOOKLINE_API_KEYS_FILE" usage:"file of API keys, one tenant:[scope:]key or tenant:[scope:]sha256:<hex> per line (# comments); re-read when it changes, so keys are added and revoked without a restart"`

	// TLS at the listener, so every protocol on the port shares it.
	GRPCTLSCert  string `flag:"grpc-tls-cert" env:"HOOKLINE_GRPC_TLS_CERT" usage:"PEM certificate chain to serve gRPC over TLS with (default: plaintext); re-read when the file changes"`
	GRPCTLSKey   string `flag:"grpc-tls-key" env:"HOOKLINE_GRPC_TLS_KEY" usage:"PEM private key of --grpc-tls-cert; re-read when the file changes"`
	GRPCClientCA string `flag:"grpc-client-ca" env:"HOOKLINE_GRPC_CLIENT_CA" usage:"PEM CA certificates: with it every client must present a certificate one of them signed (mutual TLS); re-read when the file changes"`

	// DevMode is set by hookline dev only (it has no flag): API keys with
	// fewer than 128 bits of randomness are accepted.
	DevMode bool

	PublishTimeout   time.Duration `flag:"publish-timeout" env:"HOOKLINE_PUBLISH_TIMEOUT" default:"10s" usage:"how long PublishEvent waits for Kafka to take the write before answering UNAVAILABLE"`
	MaxInFlightBytes int64         `flag:"max-in-flight-bytes" env:"HOOKLINE_MAX_IN_FLIGHT_BYTES" default:"67108864" usage:"bytes of writes (PublishEvent calls, each charged its payload times one plus its endpoints, plus 1 KiB; recover batches, resends, test events) one ingest holds at once, shared fairly: while k tenants want bytes each may hold 1/k of it; a call beyond it waits its turn at most 1 s, then is answered RESOURCE_EXHAUSTED with a RetryInfo delay"`
	MaxPayloadBytes  int           `flag:"max-payload-bytes" env:"HOOKLINE_MAX_PAYLOAD_BYTES" default:"1048576" usage:"largest event payload accepted"`
	MaxEndpoints     int           `flag:"max-endpoints-per-tenant" env:"HOOKLINE_MAX_ENDPOINTS_PER_TENANT" default:"1000" usage:"most endpoints one tenant may have"`
	AllowHTTP        bool          `flag:"allow-http" env:"HOOKLINE_ALLOW_HTTP" usage:"accept http:// endpoint URLs (default: https only)"`
	DNSTimeout       time.Duration `flag:"dns-timeout" env:"HOOKLINE_DNS_TIMEOUT" default:"5s" usage:"how long resolving an endpoint URL's host may take before the call answers UNAVAILABLE"`
	IdempotencyTTL   time.Duration `flag:"idempotency-ttl" env:"HOOKLINE_IDEMPOTENCY_TTL" default:"24h" usage:"how long an idempotency key keeps returning its first response; the idempotency topic keeps records twice as long"`
	// Limits and quotas (docs/security.md, "Limits and quotas").
	PublishRate           float64       `flag:"publish-rate" env:"HOOKLINE_PUBLISH_RATE" default:"1000" usage:"PublishEvent calls per second each tenant may make, sustained (0: no limit); beyond it a call is RESOURCE_EXHAUSTED with a retry delay"`
	PublishBurst          int           `flag:"publish-burst" env:"HOOKLINE_PUBLISH_BURST" default:"2000" usage:"PublishEvent calls a tenant may make at once above --publish-rate"`
	ReplayRate            float64       `flag:"replay-rate" env:"HOOKLINE_REPLAY_RATE" default:"10" usage:"SendTestEvent, ResendDelivery, RecoverEndpoint, ResendLaneHead and SkipLaneHead calls per second each tenant may make, together, sustained (0: no limit); beyond it a call is RESOURCE_EXHAUSTED with a retry delay"`
	ReplayBurst           int           `flag:"replay-burst" env:"HOOKLINE_REPLAY_BURST" default:"50" usage:"of those calls, how many a tenant may make at once above --replay-rate"`
	EndpointWriteRate     float64       `flag:"endpoint-write-rate" env:"HOOKLINE_ENDPOINT_WRITE_RATE" default:"100" usage:"endpoint writes (create, update, delete, pause, resume, rotate secret) per second each tenant may make, sustained (0: no limit); beyond it a call is RESOURCE_EXHAUSTED with a retry delay"`
	EndpointWriteBurst    int           `flag:"endpoint-write-burst" env:"HOOKLINE_ENDPOINT_WRITE_BURST" default:"1000" usage:"endpoint writes a tenant may make at once above --endpoint-write-rate"`
	MaxHeldBytesPerTenant int64         `flag:"max-held-bytes-per-tenant" env:"HOOKLINE_MAX_HELD_BYTES_PER_TENANT" default:"1073741824" usage:"payload bytes of one tenant's deliveries that paused endpoints may hold, together (0: no limit); a publish that would add to a paused endpoint beyond it is RESOURCE_EXHAUSTED, naming the endpoint; publishes to the tenant's other endpoints are unaffected"`
	MaxFanoutBytes        int64         `flag:"max-fanout-bytes" env:"HOOKLINE_MAX_FANOUT_BYTES" default:"67108864" usage:"largest payload × matching endpoints one PublishEvent may write; above it the call is RESOURCE_EXHAUSTED"`
	MaxConcurrentStreams  uint32        `flag:"grpc-max-concurrent-streams" env:"HOOKLINE_GRPC_MAX_CONCURRENT_STREAMS" default:"1000" usage:"most concurrent calls (HTTP/2 streams) one client connection may have open"`
	KeepaliveMinTime      time.Duration `flag:"grpc-keepalive-min-time" env:"HOOKLINE_GRPC_KEEPALIVE_MIN_TIME" default:"10s" usage:"a client pinging more often than this is disconnected (GOAWAY too_many_pings)"`
	KeepaliveTime         time.Duration `flag:"grpc-keepalive-time" env:"HOOKLINE_GRPC_KEEPALIVE_TIME" default:"2m" usage:"after this long without activity the server pings a client connection"`
	KeepaliveTimeout      time.Duration `flag:"grpc-keepalive-timeout" env:"HOOKLINE_GRPC_KEEPALIVE_TIMEOUT" default:"20s" usage:"a connection whose ping is not answered within this is closed"`
	RecoverMaxWindow      time.Duration `flag:"recover-max-window" env:"HOOKLINE_RECOVER_MAX_WINDOW" default:"168h" usage:"widest since..until window one RecoverEndpoint call may name"`
	RecoverMaxDeliveries  int           `flag:"recover-max-deliveries" env:"HOOKLINE_RECOVER_MAX_DELIVERIES" default:"10000" usage:"most deliveries one RecoverEndpoint call may redeliver; a window with more is refused (recover it in parts)"`
	// Fairness of long calls and of the HTTP/JSON gateway (longcalls.go, gateway.go).
	MaxLongCallsPerTenant int           `flag:"max-long-calls-per-tenant" env:"HOOKLINE_MAX_LONG_CALLS_PER_TENANT" default:"8" usage:"SendTestEvent and RecoverEndpoint calls one tenant may have running at once in one ingest; another is RESOURCE_EXHAUSTED"`
	HTTPCallTimeout       time.Duration `flag:"http-call-timeout" env:"HOOKLINE_HTTP_CALL_TIMEOUT" default:"90s" usage:"deadline of an HTTP/JSON call that sets none (a Grpc-Timeout header sets its own)"`

	// What callers without a key, and slow ones, can hold (preauth.go).
	MaxUnauthenticatedBytes int64         `flag:"max-unauthenticated-bytes" env:"HOOKLINE_MAX_UNAUTHENTICATED_BYTES" default:"67108864" usage:"bytes all connections that have not yet made an authenticated call may hold together (96 KiB each plus what they sent; each may send at most 144 KiB, and must authenticate within 30 s); a connection beyond it is closed"`
	HTTPBodyTimeout         time.Duration `flag:"http-body-timeout" env:"HOOKLINE_HTTP_BODY_TIMEOUT" default:"30s" usage:"how long an HTTP/JSON call may take to send its request body; a slower one is cut off"`

	DataDir         string `flag:"data-dir" env:"HOOKLINE_DATA_DIR" usage:"directory of the delivery history index (Pebble); a restart resumes from it. Empty: a temporary directory, rebuilt from the topics at every start. One process per directory"`
	PageTokenSecret string `flag:"page-token-secret" env:"HOOKLINE_PAGE_TOKEN_SECRET" usage:"key that signs list page tokens (a token only resumes its own tenant's list); every replica needs the same one (default: derived from --api-keys); console sessions have their own key (--console-session-key-file)"`
	HistoryCache    int64  `flag:"history-cache-bytes" env:"HOOKLINE_HISTORY_CACHE_BYTES" default:"33554432" usage:"block cache of the delivery history index"`
	ConsoleAddr     string `flag:"console-addr" env:"HOOKLINE_CONSOLE_ADDR" usage:"listen address of the delivery console (web, sign-in with an API key), e.g. 127.0.0.1:7071; a loopback address unless --console-tls-cert is set (default: off)"`
	ConsoleTLSCert  string `flag:"console-tls-cert" env:"HOOKLINE_CONSOLE_TLS_CERT" usage:"PEM certificate for the console (with --console-tls-key); without, plain HTTP, meant for loopback"`
	ConsoleTLSKey   string `flag:"console-tls-key" env:"HOOKLINE_CONSOLE_TLS_KEY" usage:"PEM key of --console-tls-cert"`
	ConsoleClientCA string `flag:"console-client-ca" env:"HOOKLINE_CONSOLE_CLIENT_CA" usage:"PEM CA certificates: with it (and --console-tls-cert) every console client must present a certificate one of them signed (default: --grpc-client-ca, so mutual TLS covers the console as it does the API); re-read when the file changes"`
	// ConsoleSessionKeyFile is required whenever the console is on.
	ConsoleSessionKeyFile string        `flag:"console-session-key-file" env:"HOOKLINE_CONSOLE_SESSION_KEY_FILE" usage:"file of the secret keys that seal console session cookies, one per line, each at least 32 random characters (openssl rand -hex 32); the first seals, every line opens (rotate by adding the new key first); every replica needs the same file; required with --console-addr"`
	ShutdownTimeout       time.Duration `flag:"shutdown-timeout" env:"HOOKLINE_SHUTDOWN_TIMEOUT" default:"15s" usage:"how long in-flight calls may finish on shutdown"`
}
