// Package dispatcher is the only part of Hookline that talks HTTP to
// receivers. It consumes the deliveries topic, makes one signed attempt
// per delivery, classifies the outcome, and writes the attempt's result,
// and the delivery's retry, deferral or dead letter, in one Kafka
// transaction with the consumed offsets: a crash re-attempts (receivers
// deduplicate on webhook-id) but never writes a Kafka record twice.
//
// # Layout
//
// The dispatcher is split by what each part holds; data flows one way,
// from the Kafka session in, and no package below imports this one:
//
//   - attempt (services/dispatcher/attempt): one HTTP attempt, signed,
//     and its outcome class (success, transient, permanent), status,
//     latency and Retry-After. No Kafka.
//   - decide (services/dispatcher/decide): what follows an attempt —
//     delivered, retried (and when: the endpoint's backoff, Retry-After,
//     the give-up time), or ended (and whether the end may block an
//     ordered lane). Pure: no I/O, table tests.
//   - health (services/dispatcher/health): each endpoint's failure
//     streak, the notices and automatic pause it calls for, and outage
//     mode's one probe at a time; seeded from the notices topic.
//   - retryafter, notify: the Retry-After header's parsing; notices sent
//     to the operator's webhook.
//
// In this package, each file holds one job:
//
//   - the session and its lifecycle: dispatcher.go (Service, Run, one
//     transactional group session at a time), rejoin.go and assigned.go
//     (what a join asks for and an assignment reads), synced.go (the
//     balancer that remembers the last SyncGroup), lookback.go and
//     above.go (what an assignment skips), yield.go (the rebalance
//     hand-off's state machine, I44), drain.go (a graceful stop), and
//     platform/kafka's Membership (a member expelled for its session
//     ends its session, I47);
//   - the loop (loop.go: engine, one goroutine owning all of what
//     follows): the window of polled records and their watermarks
//     (window.go), placing each record (place.go, resolve.go: its
//     endpoint and lane state read first; early.go: not due yet), the
//     fair shares of attempt memory and starts (fair.go, lane.go:
//     one endpoint's cap and rate), spilling what waits too long to the
//     retry path (spill.go), and committing (commit.go, above.go;
//     produce.go: the records checked against Kafka's limits, an
//     abort's blame);
//   - ordered lanes and blocked heads: ordered.go (a lane's members in
//     sequence, who may start), lanes.go (the lanes topic: laneCommit,
//     its share of a commit), block.go (a head that blocks its lane),
//     lanecmd.go (resend and skip of a blocked head);
//   - one record's handling: handle.go (handler: triage, the gates, a
//     record's process span and worker faults; attempter: the attempt),
//     outcome.go (the attempter's: the decision turned into records,
//     endpoint health; block.go's headFailed and block when a head
//     blocks its lane), hold.go (held deliveries: parked, deferred, read
//     back by reference), writer.go (the records that follow a delivery:
//     results, retries, dead letters, deferrals, set-asides),
//     autopause.go (an automatic pause until it is settled),
//     answered.go and answerjournal.go (answers kept across a crash),
//     recordauth.go (record MACs, checked at triage), transformed.go
//     (transformations; a run that ended is settled at triage), early.go
//     (a record read too early, sent back: the handler's notYetDue);
//   - telemetry.go, memory.go, statedump.go: what an operator sees.
//
// The loop's parts are types of their own, each holding its state and
// given what else it uses (a few fields of the Service, the window, the
// lanes, function fields) when the engine (loop.go) wires them together.
// The engine keeps the loop itself: polling, collecting the inbox,
// sweeping dropped partitions, placing and starting (place.go), the
// fetch share, the end of a session, and what an operator sees.
//
//   - committer (commit.go, above.go): the commit being built and the
//     one in flight: the entries it popped or takes above their
//     watermark, the skips for a partition's next window, its share of
//     the lanes topic (laneCommit), the poll gate, the backoff and
//     retry after an abort, the commits begun and ended;
//   - resolvers (resolve.go; lanecmd.go's headDelivery): what an entry
//     waits for before it is placed — its partition's resolver rounds
//     (each partition's state in its partWindow) and a blocked head's
//     payload read back for its command; placed entries go back through
//     the engine's placeNow;
//   - orderedLanes (ordered.go; block.go's takeBlockMark): the ordered
//     lanes' turns — a member's place, how its turn ended, stale lanes
//     forgotten; their state stays in each lane's ordering;
//   - laneCommands (lanecmd.go): operators' resend and skip of a blocked
//     head, the scheduler's release of a member it set aside;
//   - spiller (spill.go; block.go's spillBlocked, drain.go's handOff,
//     yield.go's spillLeaving): every spill to the retry path, and
//     relief's clocks.
//
// The flow of one polled record: loop (poll) → place (triage, lane) →
// fair pick → attempt goroutine → decide → outcome records → inbox →
// window (watermark) → commit, with the rebalance hand-off and the
// membership check between turns. docs/DESIGN.md maps each invariant to
// the file that keeps it.
package dispatcher
