package dispatcher

import (
	"context"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Each partition of the window has one resolver: the one reader of the
// views its entries wait for before they are placed (docs/DESIGN.md,
// "Ordered delivery"; invariant O2).
//
//   - The lanes view, once per partition window: no record of a
//     partition is placed (an ordered lane seeded, a settlement made)
//     until a read of the lanes view begun after the window was made (an
//     assignment, or the rewind after an aborted commit) succeeded. A
//     failing read is retried with backoff for as long as the partition
//     is owned; the partition is never worked on with a guess.
//   - The endpoints view, for entries of an endpoint it did not know:
//     each waits for a sync begun after it was read. Rounds coalesce:
//     every entry that arrives while a round is out is served by the
//     next one, so a backlog of any size costs one goroutine and at most
//     two syncs at a time, not one of each per delivery.
//
// Entries wait in pw.resolving in offset order, and an entry whose
// endpoint has an earlier entry waiting there waits behind it, whatever
// the view knows meanwhile: the members of an ordered lane are placed in
// the order they were read.

// resolvers runs the partitions' resolvers (each one's state: pw.res and
// pw.resolving) and reads blocked heads back for their commands
// (lanecmd.go): everything an entry waits for, in its partition's
// resolving queue, before it is placed. Loop goroutine only, but for
// heads.
type resolvers struct {
	// What it is given: the inbox its rounds and reads report to; the
	// loop's count of goroutines out (engine.outstanding), which each
	// one it starts adds to; read, which brings the views a round reads
	// up to date (Service.readState); and place, which places an entry
	// that waits for nothing more (engine.placeNow).
	in          *inbox
	outstanding *int
	read        func(ctx context.Context, lanes, endpoints bool) error
	place       func(*entry, time.Time)
	// readRecord reads a record back by reference (payloadref.Read);
	// heads hands a blocked head read back to its command (lanecmd.go).
	readRecord func(context.Context, *hooklinev1.RecordRef) (*kgo.Record, error)
	heads      fetchedHeads
}

// resolver is one partition's resolving state (loop goroutine only).
type resolver struct {
	lanesRead bool           // a read of the lanes view begun after the window was made succeeded
	running   bool           // a round is out
	started   uint64         // rounds begun
	served    uint64         // the last round that synced the endpoints view
	wanted    uint64         // the latest round an entry waits for
	waiting   map[string]int // entries in pw.resolving, by endpoint id
	walking   bool           // placeResolved runs: no round starts before it is done
}

// mustWait reports whether en, decoded, must wait in its partition's
// resolving queue before it is placed.
func (rs *resolvers) mustWait(en *entry) bool {
	r := &en.part.res
	return !r.lanesRead || r.waiting[en.d.GetEndpointId()] > 0
}

// queueResolving appends en to its partition's resolving queue; with
// needSync it waits for a sync of the endpoints view begun from now on.
// An entry's want is the first round begun after it was queued: any
// round from that one on that syncs the endpoints view serves it.
func (rs *resolvers) queueResolving(en *entry, needSync bool) {
	pw := en.part
	r := &pw.res
	en.state = entryResolving
	if needSync {
		en.want = r.started + 1
		r.wanted = max(r.wanted, en.want)
	}
	pw.resolving = append(pw.resolving, en) // in offset order
	if r.waiting == nil {
		r.waiting = map[string]int{}
	}
	r.waiting[en.d.GetEndpointId()]++
}

// resolve has en wait for a sync of the endpoints view: its endpoint is
// not known yet. A failing sync is retried with backoff, never counted
// as a worker fault; the record stays below the watermark meanwhile.
func (rs *resolvers) resolve(en *entry) {
	rs.queueResolving(en, true)
	rs.kick(en.part)
}

// kick starts a round of pw's resolver if something waits for one and
// none is out.
func (rs *resolvers) kick(pw *partWindow) {
	r := &pw.res
	if r.running || r.walking || pw.dropped {
		return
	}
	// The lanes first, in a round of their own: the entries behind
	// them wait for nothing else, and an endpoints sync follows.
	lanes := !r.lanesRead
	endpoints := !lanes && r.wanted > r.served
	if !lanes && !endpoints {
		return
	}
	r.running = true
	r.started++
	round := r.started
	*rs.outstanding++
	go func() {
		err := rs.read(pw.ctx, lanes, endpoints)
		rs.in.post(msg{kind: msgResolved, part: pw, round: round, lanes: lanes, endpoints: endpoints, err: err})
	}()
}

// resolved takes the end of a round of pw's resolver: what it read is
// marked read, the entries it served are placed, and the next round
// starts if entries wait for one.
func (rs *resolvers) resolved(m *msg, now time.Time) {
	pw := m.part
	if pw.dropped {
		return // its records come again, to a window of their own
	}
	r := &pw.res
	r.running = false
	if m.err != nil {
		return // the partition went away or the loop is stopping
	}
	if m.lanes {
		r.lanesRead = true
	}
	if m.endpoints {
		r.served = m.round
	}
	rs.placeResolved(pw, now)
	rs.kick(pw)
}

// headRead takes the end of a blocked head's read for its lane command
// m.e (lanecmd.go): the entry waited in its partition's resolving queue
// meanwhile, and is placed now in offset order with the others.
func (rs *resolvers) headRead(m *msg, now time.Time) {
	pw := m.part
	m.e.fetching = false
	if pw.dropped || m.err != nil {
		return // its records come again, to a window of their own
	}
	rs.placeResolved(pw, now)
	rs.kick(pw)
}

// placeResolved places, in offset order, pw's waiting entries that
// waited for nothing more, except those behind an earlier entry of
// their endpoint still waiting.
func (rs *resolvers) placeResolved(pw *partWindow, now time.Time) {
	r := &pw.res
	if !r.lanesRead || len(pw.resolving) == 0 {
		return
	}
	queued := pw.resolving
	pw.resolving = nil // rebuilt in order: an entry queued again keeps its place
	r.walking = true
	defer func() { r.walking = false }()
	var behind map[string]bool
	for i, en := range queued {
		queued[i] = nil
		id := en.d.GetEndpointId()
		if en.want > r.served || en.fetching || behind[id] {
			pw.resolving = append(pw.resolving, en)
			if behind == nil {
				behind = map[string]bool{}
			}
			behind[id] = true
			continue
		}
		if en.want > 0 {
			en.synced, en.want = true, 0
		}
		if r.waiting[id]--; r.waiting[id] == 0 {
			delete(r.waiting, id)
		}
		rs.place(en, now)
		if en.state == entryResolving { // its endpoint is unknown: queued again
			if behind == nil {
				behind = map[string]bool{}
			}
			behind[id] = true
		}
	}
}

// readState brings the views a round reads up to date, each read
// retried with backoff until it succeeds or ctx ends.
func (s *Service) readState(ctx context.Context, lanes, endpoints bool) error {
	if lanes {
		if err := s.untilRead(ctx, "lanes view", s.readLanes); err != nil {
			return err
		}
	}
	if endpoints {
		return s.readEndpoints(ctx) // retries by itself (untilRead)
	}
	return nil
}

// untilRead calls read (each call bounded by syncTimeout) until it
// succeeds, backing off with jitter (hkafka.Until); it fails only when
// ctx ends.
func (s *Service) untilRead(ctx context.Context, what string, read func(context.Context) error) error {
	return hkafka.Until(ctx, s.log, s.rand, what, syncTimeout, read)
}
