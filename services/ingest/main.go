// Command ingest is Hookline's gRPC edge: it accepts events and endpoint
// administration from producers and writes them to Kafka.
package main

import (
	"log/slog"

	"github.com/hookline/hookline/platform/cmdmain"
	"github.com/hookline/hookline/services/ingest/ingest"
)

func main() {
	cmdmain.Main("ingest", func(cfg ingest.Config, log *slog.Logger) (cmdmain.Runner, error) {
		return ingest.New(cfg, ingest.WithLogger(log))
	})
}
