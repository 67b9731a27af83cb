// Package idempotency decides publish idempotency keys (SPEC
// R-INGEST-2) from the idempotency topic: which claim wins a key
// (View), what a claim fans out to (Deliveries, DeliveryID), how a
// request and a key are named (RequestHash, RecordKey), the recent
// claims' whole records an ingest keeps (Cache), and a publish under a
// key (Publisher). Only Publisher does I/O, and only with what ingest
// gives it (Deps): the Follower that feeds its View, the producer, the
// client options a claim is read back with, and the writing of a claim's
// deliveries. Ingest runs the Follower and publishes through the
// Publisher.
//
// Every claim on a key is a
// record on the idempotency topic keyed by tenant and key, so all records
// of one key are in one partition in one order that every ingest process
// reads the same way. The rules, applied in offset order:
//
//   - a CLAIMED record wins the key if the key has no winner, or if its
//     created_at is at or after the current winner's expires_at;
//     otherwise it loses and is ignored;
//   - a COMMITTED record marks the winner with the same claim id as
//     having its deliveries durable.
//
// The decision depends only on record contents and order, so two
// processes claiming the same key at the same moment agree on the winner.
// Only the winner (or, after it failed, a retry with the same request)
// writes deliveries, and always with the ids fixed in the claim, so a key
// yields at most one delivery id per endpoint.
package idempotency
