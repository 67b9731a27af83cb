package idempotency

import (
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/payloadref"
	"github.com/twmb/franz-go/pkg/kgo"
)

// View is the materialised idempotency topic: the current winner of
// every key. Safe for concurrent use.
type View struct {
	now func() time.Time
	ttl time.Duration

	mu        sync.Mutex
	winners   map[string]*Claim
	lastSweep time.Time
}

// NewView returns an empty view; winners expire ttl after their
// expiry by now.
func NewView(now func() time.Time, ttl time.Duration) *View {
	return &View{now: now, ttl: ttl, winners: map[string]*Claim{}}
}

// Apply decides on r, the next record of the idempotency topic.
func (v *View) Apply(r *kgo.Record) {
	var rec hooklinev1.IdempotencyRecord
	if err := hkafka.Decode(r, &rec); err != nil {
		return // not a claim: nothing to decide on
	}
	k := string(r.Key)
	v.mu.Lock()
	defer v.mu.Unlock()
	w := v.winners[k]
	switch rec.GetState() {
	case hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_CLAIMED:
		if w == nil || !rec.GetCreatedAt().AsTime().Before(w.Rec.GetExpiresAt().AsTime()) {
			rec.Deliveries, rec.EndpointIds = nil, nil
			v.winners[k] = &Claim{Rec: &rec, Ref: payloadref.Of(r)}
		}
	case hooklinev1.IdempotencyState_IDEMPOTENCY_STATE_COMMITTED:
		if w != nil && w.Rec.GetClaimId() == rec.GetClaimId() {
			w.Committed = true
		}
	default:
	}
	// Forget winners long expired. The margin of one more TTL keeps the
	// decision independent of when each process sweeps, unless writers'
	// clocks are a whole TTL apart.
	now := v.now()
	if now.Sub(v.lastSweep) > v.ttl/8 {
		v.lastSweep = now
		for k, w := range v.winners {
			if now.After(w.Rec.GetExpiresAt().AsTime().Add(v.ttl)) {
				delete(v.winners, k)
			}
		}
	}
}

// Winner returns a copy of key k's winning claim, and whether there is
// one, expired or not.
func (v *View) Winner(k string) (Claim, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.winners[k]
	if !ok {
		return Claim{}, false
	}
	return *w, true
}

// Live returns k's winning claim unless there is none or it expired at now.
func (v *View) Live(k string, now time.Time) (Claim, bool) {
	w, ok := v.Winner(k)
	if !ok || !now.Before(w.Rec.GetExpiresAt().AsTime()) {
		return Claim{}, false
	}
	return w, true
}
