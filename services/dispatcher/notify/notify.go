// Package notify forwards endpoint health notices from the notices topic
// to an operator's webhook, signed like every Hookline delivery (Standard
// Webhooks). It consumes in its own consumer group and commits a notice
// only after the webhook answered 2xx, so every notice reaches the
// operator at least once (webhook-id is the notice id, for deduplication).
// Any other answer, a 4xx included, is retried with backoff: the operator
// webhook is one receiver the operator controls, and a 4xx there is a
// misconfiguration to fix (secret, route, auth), not a reason to lose the
// notice. Notices after it wait, in order.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/backoff"
	"github.com/hookline/hookline/sdk/sign"
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
	wait   func(ctx context.Context, d time.Duration) error
}

// Option configures a Notifier.
type Option func(*Notifier)

// WithWait replaces how the Notifier waits between tries (default: a
// timer, ended early by ctx); for tests.
func WithWait(wait func(ctx context.Context, d time.Duration) error) Option {
	return func(n *Notifier) { n.wait = wait }
}

// retryPolicy paces the tries of one notice: 1 s doubling to 5 min.
var retryPolicy = backoff.Policy{Initial: time.Second, Factor: 2, Max: 5 * time.Minute, Jitter: backoff.JitterEqual}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// New returns a Notifier posting to url, signed with secret ("whsec_…").
func New(kafka hkafka.Config, group, url, secret string, client *attempt.Client, log *slog.Logger, r backoff.Rand, opts ...Option) (*Notifier, error) {
	signer, err := sign.NewSigner(secret)
	if err != nil {
		return nil, fmt.Errorf("notify: --notice-webhook-secret: %w", err)
	}
	n := &Notifier{kafka: kafka, group: group, url: url, signer: signer, client: client, log: log, rand: r, wait: sleep}
	for _, o := range opts {
		o(n)
	}
	return n, nil
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

// forward posts one notice until the webhook takes it (2xx), backing off
// between tries whatever the answer (a 4xx too); it returns only ctx's
// error.
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
		wait := retryPolicy.Delay(try, n.rand)
		if res.StatusCode >= 400 && res.StatusCode < 500 {
			// Not dropped (at least once): the operator fixes the webhook,
			// the next try gets through.
			n.log.Error("notify: operator webhook refused a notice; retrying until it answers 2xx", "notice_id", nt.GetNoticeId(), "status", res.StatusCode, "try", try, "next_in", wait)
		} else {
			n.log.Warn("notify: operator webhook failed; retrying", "notice_id", nt.GetNoticeId(), "status", res.StatusCode, "err", res.Err, "try", try, "next_in", wait)
		}
		if err := n.wait(ctx, wait); err != nil {
			return err
		}
	}
}
