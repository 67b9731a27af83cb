// Package cmdmain is the one main of every Hookline service binary: load
// the typed config from flags and environment, build the service, run it
// until SIGINT or SIGTERM, exit once.
package cmdmain

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
)

// Runner is a long-running service.
type Runner interface {
	Run(ctx context.Context) error
}

// Main runs the service that build makes from a C loaded from the
// command line and the environment, logging JSON to stderr. It calls
// os.Exit(1) on failure and returns otherwise.
func Main[C any](name string, build func(cfg C, log *slog.Logger) (Runner, error)) {
	if err := run(name, build); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run[C any](name string, build func(cfg C, log *slog.Logger) (Runner, error)) error {
	var cfg C
	if err := config.Load(flag.NewFlagSet(name, flag.ContinueOnError), &cfg, os.Args[1:], os.Getenv); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc, err := build(cfg, slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	return svc.Run(ctx)
}
