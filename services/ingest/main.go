// Command ingest is Hookline's gRPC edge: it accepts events and endpoint
// administration from producers and writes them to Kafka.
package main

import (
	"github.com/hookline/hookline/platform/cmdmain"
	"github.com/hookline/hookline/services/ingest/ingest"
)

func main() {
	cmdmain.Main("ingest", func(cfg ingest.Config, env cmdmain.Env) (cmdmain.Runner, error) {
		return ingest.New(cfg, ingest.WithLogger(env.Log), ingest.WithTelemetry(env.Telemetry.TracerProvider, env.Telemetry.MeterProvider))
	})
}
