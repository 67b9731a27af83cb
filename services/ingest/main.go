// Command ingest is Hookline's gRPC edge: it accepts events and endpoint
// administration from producers and writes them to Kafka.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/services/ingest/ingest"
)

func main() {
	if err := run(); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	var cfg ingest.Config
	if err := config.Load(flag.NewFlagSet("ingest", flag.ContinueOnError), &cfg, os.Args[1:], os.Getenv); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc, err := ingest.New(cfg, ingest.WithLogger(slog.New(slog.NewJSONHandler(os.Stderr, nil))))
	if err != nil {
		return err
	}
	return svc.Run(ctx)
}
