package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The rows of a run share one cluster but are separate experiments: a
// row's topics are deleted when it ends, so the next row starts on
// brokers that carry only their own internal topics. Kept, they added
// up (about 50 partitions a row, three replicas each, on brokers with
// 512 MiB heaps): by the 16th row every broker hosted some 750
// partitions of finished rows, and the rolling upgrade's restarts ran
// 1.5-2x slower in the full table than alone (docs/reliability.md,
// "Every row on three brokers, each row on its own topics"). Groups are
// left: a static member stays in its group until its session times
// out, and an empty group costs the coordinator nothing.
const cleanupTimeout = 30 * time.Second

// deleteTopics deletes every topic named with the stack's prefix. A failure is reported, never fatal: the row's
// figures are already taken.
func (s *stack) deleteTopics() {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.brokers, ",")...))
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %s: topics not deleted: %v\n", s.prefix, err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %s: topics not listed: %v\n", s.prefix, err)
		return
	}
	var ours []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, s.prefix) {
			ours = append(ours, t)
		}
	}
	if len(ours) > 0 {
		resp, err := adm.DeleteTopics(ctx, ours...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %s: topics not deleted: %v\n", s.prefix, err)
		}
	}
}
