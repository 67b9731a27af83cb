// Command dispatcher delivers webhooks: it consumes the deliveries topic,
// POSTs each delivery signed to its endpoint, and writes every attempt's
// result to the results topic.
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
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
)

func main() {
	if err := run(); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	var cfg dispatcher.Config
	if err := config.Load(flag.NewFlagSet("dispatcher", flag.ContinueOnError), &cfg, os.Args[1:], os.Getenv); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	svc, err := dispatcher.New(cfg, dispatcher.WithLogger(log))
	if err != nil {
		return err
	}
	return svc.Run(ctx)
}
