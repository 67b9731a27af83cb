package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// msgKind says what a message to the loop is about.
type msgKind uint8

const (
	msgDone      msgKind = iota // an attempt ended; outs are its outputs
	msgResolved                 // a round of a partition's resolver ended (resolve.go)
	msgHeadRead                 // a blocked head's payload was read back for its command (lanecmd.go)
	msgCommitted                // a commit's transaction ended
)

// msg is what an attempt or a resolver goroutine tells the loop.
type msg struct {
	kind msgKind
	e    *entry
	outs []*kgo.Record
	// group are the other members of e's batch (batch.go): done with it,
	// their outputs among outs; formed is the batch's answer key.
	group  []*entry
	formed *answerKey
	// latency is how long the attempt took (zero when none was sent).
	latency time.Duration

	// A resolver round's end: its partition, its number, what it read
	// (err: nothing, the partition went away or the loop is stopping).
	part      *partWindow
	round     uint64
	lanes     bool
	endpoints bool

	// A commit's end: whether it committed, the produce error that
	// aborted it, a failure of the session itself, records written, and
	// how long the transaction took.
	committed  bool
	produceErr error
	err        error
	records    int
	took       time.Duration
	ending     time.Duration // of took, how long End ran (offsets, heartbeat, EndTxn)
	// blamed are the deliveries an aborted commit's refused records were
	// blamed on (hkafka.Blame), by id: their partitions start over.
	blamed map[string]string
}

// inbox carries messages to the loop goroutine and wakes it: a poll in
// progress is cancelled (what it fetched stays buffered in the client),
// and a loop waiting without polling is signalled. Safe for concurrent
// use.
type inbox struct {
	mu         sync.Mutex
	msgs       []msg
	cancelPoll context.CancelFunc
	signal     chan struct{}
}

func newInbox() *inbox { return &inbox{signal: make(chan struct{}, 1)} }

// post hands m to the loop and wakes it.
func (b *inbox) post(m msg) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.wakeLocked()
	b.mu.Unlock()
}

// wake wakes the loop with no message (a partition callback).
func (b *inbox) wake() {
	b.mu.Lock()
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *inbox) wakeLocked() {
	if b.cancelPoll != nil {
		b.cancelPoll()
		b.cancelPoll = nil
	}
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

// take returns the messages posted since the last take, reusing buf.
func (b *inbox) take(buf []msg) []msg {
	b.mu.Lock()
	defer b.mu.Unlock()
	buf, b.msgs = b.msgs, buf[:0]
	return buf
}

// arm registers cancel as the way to wake a poll about to start; it
// returns false, registering nothing, when messages already wait.
func (b *inbox) arm(cancel context.CancelFunc) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.msgs) > 0 {
		return false
	}
	b.cancelPoll = cancel
	return true
}

// disarm ends the poll's registration.
func (b *inbox) disarm() {
	b.mu.Lock()
	b.cancelPoll = nil
	b.mu.Unlock()
}
