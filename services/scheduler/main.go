// Command scheduler owns every retry timer: it moves pending retries through
// the Kafka delay-tier topics and releases each to the deliveries topic
// when it is due.
package main

import (
	"github.com/hookline/hookline/platform/cmdmain"
	"github.com/hookline/hookline/services/scheduler/scheduler"
)

func main() {
	cmdmain.Main("scheduler", func(cfg scheduler.Config, env cmdmain.Env) (cmdmain.Runner, error) {
		return scheduler.New(cfg, scheduler.WithLogger(env.Log), scheduler.WithTelemetry(env.Telemetry.TracerProvider, env.Telemetry.MeterProvider))
	})
}
