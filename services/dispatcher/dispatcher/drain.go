package dispatcher

import "time"

// A graceful stop (SIGTERM) re-POSTs nothing (docs/DESIGN.md, "What a
// crash, a rebalance or an outage re-POSTs"): the loop starts no
// attempt, lets those in flight end within --drain-timeout, commits
// what they completed, and only then leaves. A commit cannot pass a
// partition's oldest delivery not done, so a delivery still waiting in
// its lane (behind its endpoint's cap or rate, or an ordered lane's
// turn) would hold every completed delivery read after it uncommitted,
// and the next owner would POST those again. So while the loop stops,
// every delivery waiting in a lane is spilled — deferred through the
// retry path with its attempt number and budgets untouched, an ordered
// lane's members recorded outside like any spill (spill.go) — and the
// watermark passes it: the last commits carry everything that
// completed. A spilled delivery comes back after at least
// minSpillDelay; one that was never attempted costs that, not a
// duplicate.
//
// Not spilled: deliveries still waiting for the endpoints view or the
// lanes read (resolve.go: they may not be placed before it), and those
// read early waiting for their due time (early.go); they hold their
// partition's watermark as before.

// drainCommitDue says whether the stopping loop commits now: once no
// attempt is in flight, or once the drain deadline passed. A commit
// begun while attempts were still in flight carried none of what they
// completed, and one more had to follow it: a commit's length (0.5-1.2 s
// on the chaos cluster's three loaded brokers) that the partitions
// waited through, unconsumed, before their next owner could read them
// (the rolling upgrade's healthy p99; docs/reliability.md). Waiting for
// the attempts instead makes the drain's last commit its only one: it
// ends at the later of the attempts' end and a commit in progress, plus
// one commit. flying is how many attempts are in flight (fair.flying).
func drainCommitDue(flying int, now, drainBy time.Time) bool {
	return flying == 0 || !drainBy.IsZero() && !now.Before(drainBy)
}

// handOff spills every delivery waiting in a lane (the loop, while it
// stops).
func (sp *spiller) handOff(now time.Time) {
	n := 0
	for _, l := range sp.f.lanes {
		if l.queued > 0 {
			n += l.queued
			sp.spillWaiting(l, now, "drain")
		}
	}
	if n > 0 {
		sp.log.Info("stopping: deliveries waiting in lanes deferred to the retry path, so what completed after them is committed", "deferred", n)
	}
}
