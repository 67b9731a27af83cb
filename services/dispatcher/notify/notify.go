// Package notify forwards endpoint health notices from the notices topic
// to an operator's webhook, signed like every Hookline delivery (Standard
// Webhooks). It consumes in its own consumer group and commits a notice
// only after the webhook answered 2xx, so every notice reaches the
// operator at least once (webhook-id is the notice id, for deduplication).
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/backoff"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/sign"
	"github.com/hookline/hookline/services/dispatcher/attempt"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
)

// Notifier posts notices to one operator webhook.
type Notifier struct {
	kafka  hkafka.Config
	group  string
	url    string
	signer *sign.Signer
	client *attempt.Client
	log    *slog.Logger
	rand   backoff.Rand
}

// New returns a Notifier posting to url, signed with secret ("whsec_…").
func New(kafka hkafka.Config, group, url, secret string, client *attempt.Client, log *slog.Logger, r backoff.Rand) (*Notifier, error) {
	signer, err := sign.NewSigner(secret)
	if err != nil {
		return nil, fmt.Errorf("notify: --notice-webhook-secret: %w", err)
	}
	return &Notifier{kafka: kafka, group: group, url: url, signer: signer, client: client, log: log, rand: r}, nil
}

// Run forwards notices until ctx ends.
func (n *Notifier) Run(ctx context.Context) error {
	opts, err := n.kafka.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumerGroup(n.group),
		kgo.ConsumeTopics(n.kafka.Topics().Notices),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
	)...)
	if err != nil {
		return fmt.Errorf("notify: kafka client: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		for _, r := range recs {
			if err := n.forward(ctx, r); err != nil {
				return nil // stopped while retrying; the notice stays uncommitted
			}
		}
		if len(recs) > 0 {
			if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
				n.log.Warn("notify: commit", "err", err)
			}
		}
	}
}

// forward posts one notice until the webhook takes it (2xx) or answers
// with a permanent error, backing off between tries; it returns only
// ctx's error.
func (n *Notifier) forward(ctx context.Context, r *kgo.Record) error {
	var nt hooklinev1.Notice
	if err := hkafka.Decode(r, &nt); err != nil {
		n.log.Error("notify: undecodable notice skipped", "offset", r.Offset, "err", err)
		return nil
	}
	body, err := protojson.Marshal(&nt)
	if err != nil {
		n.log.Error("notify: notice not encodable, skipped", "offset", r.Offset, "err", err)
		return nil //nolint:nilerr // a notice that cannot be encoded never will be; skipping it is the decision
	}
	for try := uint32(1); ; try++ {
		res, err := n.client.Do(ctx, attempt.Request{URL: n.url, EventID: nt.GetNoticeId(), EventType: "notice", Payload: body, Signer: n.signer, Timeout: 10 * time.Second})
		if err != nil {
			return err
		}
		if res.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
			return nil
		}
		if res.Class == hooklinev1.OutcomeClass_OUTCOME_CLASS_PERMANENT {
			n.log.Error("notify: operator webhook refused a notice", "notice_id", nt.GetNoticeId(), "status", res.StatusCode, "err", res.Err)
			return nil
		}
		wait := backoff.Policy{Initial: time.Second, Factor: 2, Max: 5 * time.Minute, Jitter: backoff.JitterEqual}.Delay(try, n.rand)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
