// Package health holds the dispatcher's health of the endpoints it
// serves, and outage mode:
//
//   - Receivers (receivers.go): per endpoint, its failure streak, which
//     notice an attempt's outcome calls for (endpoint.failing once per
//     outage, reminders, endpoint.recovered), when an automatic pause is
//     due and whether it is still pending, and outage mode: after
//     transient failures of distinct deliveries in a row, one probe at a
//     time (OutageGate, ProbeTurn), every other delivery held.
//   - NoticeView (notices.go): the durable part of that health, read
//     from the notices topic, which seeds Receivers for an endpoint this
//     dispatcher has just taken over (a rebalance, a restart).
//
// It decides; it writes nothing. The dispatcher turns an Event into the
// notices and the pausing endpoint record it writes, holds the deliveries
// the gate holds, and forgets or resets health on its partitions'
// assignments and its sessions. It holds neither an endpoint's cap nor
// its rate: those live in the dispatcher's lanes. It does not import the
// dispatcher: data flows one way, from the dispatcher in.
package health
