package scheduler

import (
	"time"

	"github.com/hookline/hookline/platform/health"
	hkafka "github.com/hookline/hookline/platform/kafka"
)

// Config is the scheduler's configuration, read by platform/config from
// flags and HOOKLINE_* environment variables.
type Config struct {
	Kafka  hkafka.Config
	Health health.Config

	Group           string        `flag:"group" env:"HOOKLINE_SCHEDULER_GROUP" default:"hookline-scheduler" usage:"Kafka consumer group of the schedulers"`
	TransactionalID string        `flag:"transactional-id" env:"HOOKLINE_SCHEDULER_TRANSACTIONAL_ID" usage:"Kafka transactional id, unique and stable per scheduler instance (default: hookline-scheduler-<hostname>)"`
	TxnTimeout      time.Duration `flag:"transaction-timeout" env:"HOOKLINE_SCHEDULER_TRANSACTION_TIMEOUT" default:"0s" usage:"Kafka transaction timeout (0: three --session-timeout): how long a transaction left open by an instance that died and does not come back under its --transactional-id holds back read-committed readers of the partitions it wrote"`
	SessionTimeout  time.Duration `flag:"session-timeout" env:"HOOKLINE_SCHEDULER_SESSION_TIMEOUT" default:"10s" usage:"Kafka group session timeout: how long a scheduler that died (kill -9, lost host) keeps its tier partitions, and so delays their timers, before the others take them over"`
	Tiers           []string      `flag:"tiers" env:"HOOKLINE_SCHEDULER_TIERS" default:"1s,5s,30s,1m,5m,30m,1h" usage:"delay tiers, one topic each; a timer longer than the largest re-enters it"`
	BatchSize       int           `flag:"batch-size" env:"HOOKLINE_SCHEDULER_BATCH_SIZE" default:"5000" usage:"records taken per poll"`
	MaxParked       int           `flag:"max-parked" env:"HOOKLINE_SCHEDULER_MAX_PARKED" default:"1000000" usage:"most parked deliveries (paused endpoints' holds) one scheduler indexes in memory; one over it goes back to the recheck path (the retries topic, due --park-recheck later) and is counted by hookline.scheduler.parked.overflow"`
	ParkRecheck     time.Duration `flag:"park-recheck" env:"HOOKLINE_SCHEDULER_PARK_RECHECK" default:"5s" usage:"how long a parked delivery over --max-parked waits in the retries topic before the dispatcher looks again whether its endpoint resumed"`
	FetchMaxWait    time.Duration `flag:"fetch-max-wait" env:"HOOKLINE_SCHEDULER_FETCH_MAX_WAIT" default:"250ms" usage:"longest an idle fetch waits for new data; a tier partition resumed while a fetch is in flight is read after it, so keep this well under the smallest tier"`
}
