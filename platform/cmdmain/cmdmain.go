// Package cmdmain is the one main of every Hookline service binary: load
// the typed config from flags and environment, set up logging and
// OpenTelemetry, set the Go runtime's memory limit from the container's
// unless GOMEMLIMIT is set (platform/memlimit), build the service, run it
// until SIGINT or SIGTERM, flush telemetry, exit once.
package cmdmain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hookline/hookline/platform/config"
	"github.com/hookline/hookline/platform/memlimit"
	"github.com/hookline/hookline/platform/telemetry"
)

// Runner is a long-running service.
type Runner interface {
	Run(ctx context.Context) error
}

// Main runs the service that build makes from a C loaded from the
// command line and the environment. The service is named "hookline-"+name
// in traces and metrics; logs are JSON on stderr. It calls os.Exit(1) on
// failure and returns otherwise.
func Main[C any](name string, build func(cfg C, env Env) (Runner, error)) {
	if err := run(name, build); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// Env is what Main gives build besides the config.
type Env = telemetry.Env

func run[C any](name string, build func(cfg C, env Env) (Runner, error)) error {
	var cfg struct {
		Service   C
		Telemetry telemetry.Config
	}
	if err := config.Load(flag.NewFlagSet(name, flag.ContinueOnError), &cfg, os.Args[1:], os.Getenv); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := telemetry.Start(ctx, "hookline-"+name, cfg.Telemetry, os.Stderr)
	if err != nil {
		return err
	}
	defer func() {
		// Last in the shutdown order: flush what the service recorded.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := env.Telemetry.Shutdown(fctx); err != nil {
			env.Log.Warn("telemetry not flushed", "err", err)
		}
	}()
	limit, why := memlimit.Set(os.Getenv, "/sys/fs/cgroup")
	env.Log.Info("memory limit", "bytes", limit, "from", why)
	svc, err := build(cfg.Service, env)
	if err != nil {
		return err
	}
	return env.Run(ctx, svc.Run)
}
