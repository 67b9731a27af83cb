// Command historybench measures ingest's delivery history at scale: it
// writes N deliveries (2 KB payloads, one event each) and their results
// straight to the topics of its own Apache Kafka (scripts/kafka.sh), runs
// bin/ingest with a --data-dir until the index has them all, then
// measures ingest's resident memory, GetDelivery and ListDeliveries
// latency, and how long a restart takes to be SERVING again. It prints a
// markdown table and writes it to --out.
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
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "historybench:", err)
		os.Exit(1)
	}
}
