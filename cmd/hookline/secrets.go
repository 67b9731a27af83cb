package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
)

type rekeyFlags struct {
	Kafka   hkafka.Config
	KeyFile string        `flag:"secrets-key-file" env:"HOOKLINE_SECRETS_KEY_FILE" usage:"the key file the services use, with the new key first (required)"`
	Timeout time.Duration `flag:"write-timeout" default:"30s" usage:"how long each endpoint's write may take"`
}

// runSecrets runs `hookline secrets new-key|rekey`.
func runSecrets(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		return errors.New("usage: hookline secrets new-key | hookline secrets rekey --secrets-key-file FILE [--kafka-brokers …]")
	}
	switch args[0] {
	case "new-key":
		_, err := fmt.Fprintln(out, keyring.NewKeyLine(time.Now()))
		return err
	case "rekey":
		var f rekeyFlags
		if _, err := parse("secrets rekey", &f, args[1:], out, getenv); err != nil {
			return err
		}
		return runRekey(ctx, f, out)
	}
	return fmt.Errorf("unknown secrets command %q; use new-key or rekey", args[0])
}

func runRekey(ctx context.Context, f rekeyFlags, out io.Writer) error {
	if f.KeyFile == "" {
		return errors.New("--secrets-key-file is required: the services' key file, with the new key on its first line")
	}
	keys, err := keyring.Load(f.KeyFile)
	if err != nil {
		return fmt.Errorf("--secrets-key-file: %w", err)
	}
	opts, err := f.Kafka.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(hkafka.MaxRecordBytes))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	store := endpoints.NewStore()
	stop, _, err := store.Start(ctx, f.Kafka)
	if err != nil {
		return err
	}
	defer stop()
	produce := func(ctx context.Context, r *kgo.Record) error {
		wctx, cancel := context.WithTimeout(ctx, f.Timeout)
		defer cancel()
		return hkafka.ProduceAcked(wctx, cl, r)
	}
	st, err := rekey(ctx, store, keys, f.Kafka.Topics().Endpoints, produce, time.Now)
	fmt.Fprintf(out, "rekey under key %q: %d endpoints rewritten, %d already under it, %d failed\n", keys.Current(), st.rewritten, st.current, len(st.failed))
	for _, e := range st.failed {
		fmt.Fprintln(out, "  ", e)
	}
	if err == nil && len(st.failed) > 0 {
		err = fmt.Errorf("%d endpoints not rekeyed; fix what is said above and run rekey again (it skips what is done)", len(st.failed))
	}
	return err
}

type rekeyStats struct {
	rewritten, current int
	failed             []error
}

// rekeyAttempts bounds the writes of one endpoint that lose to
// concurrent changes.
const rekeyAttempts = 10

// rekey rewrites every endpoint of store whose secrets are not all sealed
// under keys' current key: each is resealed under it (secrets whose
// grace is over are dropped) and written as the endpoint's next version
// through store.Write, so a concurrent change is never overwritten: a
// write that loses is made again from the state that won.
func rekey(ctx context.Context, store *endpoints.Store, keys *keyring.Keyring, topic string, produce func(context.Context, *kgo.Record) error, now func() time.Time) (rekeyStats, error) {
	var st rekeyStats
	for _, id := range store.IDs() {
		done := false
		for attempt := 1; !done; attempt++ {
			cur := store.Get(id)
			if cur == nil {
				break // deleted meanwhile
			}
			rec, changed, err := resealed(cur, keys, now())
			if err != nil {
				st.failed = append(st.failed, err)
				break
			}
			if !changed {
				st.current++
				break
			}
			r, err := hkafka.Record(topic, id, rec)
			if err != nil {
				return st, err
			}
			err = store.Write(ctx, r, produce)
			switch {
			case err == nil:
				st.rewritten++
				done = true
			case !errors.Is(err, endpoints.ErrLost):
				return st, fmt.Errorf("endpoint %s: %w", id, err)
			case attempt == rekeyAttempts:
				st.failed = append(st.failed, fmt.Errorf("endpoint %s: %d concurrent changes came first", id, attempt))
				done = true
			}
		}
	}
	return st, nil
}

// resealed returns cur's next version with every secret still signing at
// now sealed under keys' current key, and whether anything changed.
func resealed(cur *hooklinev1.EndpointRecord, keys *keyring.Keyring, now time.Time) (*hooklinev1.EndpointRecord, bool, error) {
	rec := proto.Clone(cur).(*hooklinev1.EndpointRecord)
	ep := rec.GetEndpoint()
	kept := rec.Secrets[:0]
	changed := false
	for _, es := range rec.GetSecrets() {
		if exp := es.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
			changed = true // its grace is over: it never signs again
			continue
		}
		re, ch, err := keys.Reseal(ep.GetTenantId(), ep.GetId(), es)
		if err != nil {
			return nil, false, err
		}
		kept = append(kept, re)
		changed = changed || ch
	}
	rec.Secrets = kept
	rec.Version = cur.GetVersion() + 1
	return rec, changed, nil
}
