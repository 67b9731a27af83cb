// Command loadbench measures Hookline from the outside, the way a new user
// would: it runs the built binaries (bin/hookline dev, or bin/ingest,
// bin/dispatcher and bin/scheduler on Apache Kafka 4.4) as subprocesses,
// creates endpoints and publishes events over the public gRPC API, and
// counts what its own HTTP receivers on 127.0.0.1 get. Every scenario is
// bounded in time and count and stops by itself; the result is one
// markdown table with a ceiling measured in the same run (a plain Go HTTP
// client POSTing the same payload to the same receiver).
//
// Run it with make bench (embedded Kafka) or make bench-real; loadbench -h
// lists every setting.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}
