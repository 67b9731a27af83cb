package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hookline/hookline/platform/endpoints"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/twmb/franz-go/pkg/kgo"
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
	st, err := endpoints.Rekey(ctx, store, keys, f.Kafka.Topics().Endpoints, produce, time.Now)
	fmt.Fprintf(out, "rekey under key %q: %d endpoints rewritten, %d already under it, %d failed\n", keys.Current(), st.Rewritten, st.Current, len(st.Failed))
	for _, e := range st.Failed {
		fmt.Fprintln(out, "  ", e)
	}
	if err == nil && len(st.Failed) > 0 {
		err = fmt.Errorf("%d endpoints not rekeyed; fix what is said above and run rekey again (it skips what is done)", len(st.Failed))
	}
	return err
}
