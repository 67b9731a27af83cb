package kafka

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Jitter draws the random part of a backoff: n ↦ [0, n). A service
// passes its seeded source, so a seed fixes its waits; nil draws from
// math/rand/v2.
type Jitter interface{ Int64N(n int64) int64 }

// Until calls read, each call bounded by each, until it succeeds,
// backing off from 100 ms, doubling, at most 10 s, with jitter, and
// logging every failure as what was not read; it fails only when ctx
// ends. It is the one way a service waits for something Kafka must
// answer before its work goes on (a view read to its end, a topic's
// metadata): a broker restarting, or a leader moving, delays the work
// and never ends the process.
func Until(ctx context.Context, log *slog.Logger, jitter Jitter, what string, each time.Duration, read func(context.Context) error) error {
	for fails := 0; ; fails++ {
		rctx, cancel := context.WithTimeout(ctx, each)
		err := read(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		wait := min(100*time.Millisecond<<min(fails, 7), 10*time.Second)
		half := int64(wait / 2)
		if jitter != nil {
			wait = time.Duration(half + jitter.Int64N(half+1))
		} else {
			wait = time.Duration(half + rand.Int64N(half+1))
		}
		log.WarnContext(ctx, what+" not read; its work waits for it", "err", err, "failures", fails+1, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
