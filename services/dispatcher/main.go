// Command dispatcher delivers webhooks: it consumes the deliveries topic,
// POSTs each delivery signed to its endpoint, and writes every attempt's
// result to the results topic.
package main

import (
	"github.com/hookline/hookline/platform/cmdmain"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
)

func main() {
	cmdmain.Main("dispatcher", func(cfg dispatcher.Config, env cmdmain.Env) (cmdmain.Runner, error) {
		return dispatcher.New(cfg, dispatcher.WithLogger(env.Log), dispatcher.WithTelemetry(env.Telemetry.TracerProvider, env.Telemetry.MeterProvider))
	})
}
