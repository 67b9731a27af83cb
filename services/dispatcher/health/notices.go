package health

import (
	"sync"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NoticeView is, per endpoint, whether an endpoint.failing notice is out
// (not followed by endpoint.recovered), when the last one or its last
// reminder went out, and whether the endpoint was in outage mode then,
// read from the notices topic. It is the durable part of an endpoint's
// health: a dispatcher that takes an endpoint over after a rebalance or a
// restart seeds its state from it, so an outage that spans the handover
// sends no second endpoint.failing notice, keeps its reminder cadence and
// stays in outage mode — only if it was in outage mode (transient
// failures): an endpoint refusing every event (4xx) is failing but never
// held. Safe for concurrent use.
type NoticeView struct {
	mu      sync.Mutex
	failing map[string]failingNotice // endpoint id → its last failing notice or reminder
}

// failingNotice is what the last failing notice of an endpoint said.
type failingNotice struct {
	at     time.Time
	outage bool
}

// NewNoticeView returns a view of no notice yet.
func NewNoticeView() *NoticeView { return &NoticeView{failing: map[string]failingNotice{}} }

// Apply folds one notices record in; records that do not decode are not
// notices this view needs.
func (v *NoticeView) Apply(r *kgo.Record) {
	var n hooklinev1.Notice
	if hkafka.Decode(r, &n) != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch n.GetType() {
	case hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_FAILING:
		v.failing[n.GetEndpointId()] = failingNotice{at: n.GetAt().AsTime(), outage: n.GetOutage()}
	case hooklinev1.NoticeType_NOTICE_TYPE_ENDPOINT_RECOVERED:
		delete(v.failing, n.GetEndpointId())
	}
}

// Lookup reports whether endpoint id is failing, since its last failing
// notice or reminder, and whether that notice was written in outage mode.
// It is the Seed of the dispatcher's Receivers.
func (v *NoticeView) Lookup(id string) (failing bool, since time.Time, outage bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n, failing := v.failing[id]
	return failing, n.at, n.outage
}

// Prune forgets the endpoints gone says are gone (deleted): a failing
// notice of a deleted endpoint is never followed by a recovered one.
func (v *NoticeView) Prune(gone func(id string) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.failing {
		if gone(id) {
			delete(v.failing, id)
		}
	}
}

// Len is the number of endpoints whose failing notice is out.
func (v *NoticeView) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.failing)
}
