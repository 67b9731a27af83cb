package ingest

import (
	"context"
	"fmt"
	"sync"
	"time"

	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/services/ingest/console"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sessionRevocations are the console's signed-out sessions, shared by
// every replica through the console-sessions topic: a sign-out writes a
// record keyed by the session id (no value: the record's timestamp says
// when), every ingest follows the topic into ids, and a session is
// checked after the follower has caught up with the topic's end, so a
// sign-out that returned is refused by every replica from then on.
//
// A revocation list, not a per-key epoch: signing out ends that one
// session, not every session of the API key (several people may sign
// in with one key). It is bounded by time: a session expires
// console.SessionTTL after sign-in, so an id revoked at t matters until
// t + SessionTTL at most; the view forgets it then and the topic
// (delete policy, retention twice that) drops it.
//
// It is safe for concurrent use.
type sessionRevocations struct {
	// topic is the console-sessions topic, written by produce.
	topic   string
	now     func() time.Time
	produce func(ctx context.Context, rs ...*kgo.Record) error
	follow  *hkafka.Follower
	mu      sync.Mutex
	ids     map[string]time.Time // id → when it may be forgotten
}

func newSessionRevocations(topic string, now func() time.Time, produce func(ctx context.Context, rs ...*kgo.Record) error) *sessionRevocations {
	r := &sessionRevocations{topic: topic, now: now, produce: produce, ids: map[string]time.Time{}}
	r.follow = hkafka.NewFollower(r.apply, topic)
	return r
}

// spec is the topic's spec: time retention, twice a session's life.
func (r *sessionRevocations) spec() hkafka.TopicSpec {
	return hkafka.TopicSpec{Name: r.topic, Configs: map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   fmt.Sprint((2 * console.SessionTTL).Milliseconds()),
	}}
}

func (r *sessionRevocations) apply(rec *kgo.Record) {
	if len(rec.Key) == 0 {
		return
	}
	forget := rec.Timestamp.Add(console.SessionTTL)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, at := range r.ids {
		if !now.Before(at) {
			delete(r.ids, id)
		}
	}
	if now.Before(forget) {
		r.ids[string(rec.Key)] = forget
	}
}

// Revoke writes the sign-out and waits for Kafka to take it.
func (r *sessionRevocations) Revoke(ctx context.Context, id string, _ time.Time) error {
	rec := &kgo.Record{Topic: r.topic, Key: []byte(id), Value: []byte{}, Timestamp: r.now()}
	if err := r.produce(ctx, rec); err != nil {
		return fmt.Errorf("console sign-out: %w", err)
	}
	return nil
}

// Revoked reads the topic to its end, then looks id up.
func (r *sessionRevocations) Revoked(ctx context.Context, id string) (bool, error) {
	if err := r.follow.Sync(ctx, r.topic); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok, nil
}
