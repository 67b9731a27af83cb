package main

import (
	"context"
	"fmt"
	"io"
	"os"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

type tailFlags struct {
	Kafka     hkafka.Config
	FromStart bool `flag:"from-start" usage:"print every retained result, then follow (default: only new ones)"`
}

// runResultsTail prints each AttemptResult of the results topic as one
// JSON line (the protobuf JSON mapping with proto names, as the HTTP API
// writes it, and text bytes: see readableJSON) until interrupted. It reads committed
// records only, as every consumer of Hookline's topics should.
func runResultsTail(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	var f tailFlags
	if _, err := parse("results tail", &f, args, out, getenv); err != nil {
		return err
	}
	opts, err := f.Kafka.Opts()
	if err != nil {
		return err
	}
	start := kgo.NewOffset().AtEnd()
	if f.FromStart {
		start = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(f.Kafka.Topics().Results),
		kgo.ConsumeResetOffset(start),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		// Fetch errors are retried by the client (a topic not created
		// yet, a broker restarting); say so and keep following.
		fs.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "hookline: reading %s/%d: %v (retrying)\n", t, p, err)
		})
		var werr error
		fs.EachRecord(func(r *kgo.Record) {
			var res hooklinev1.AttemptResult
			if err := hkafka.Decode(r, &res); err != nil {
				werr = err
				return
			}
			b, err := readableJSON(&res, "")
			if err == nil {
				_, err = fmt.Fprintln(out, string(b))
			}
			if err != nil {
				werr = err
			}
		})
		if werr != nil {
			return werr
		}
	}
}
