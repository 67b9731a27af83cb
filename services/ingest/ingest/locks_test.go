package ingest

import (
	"context"
	"testing"
)

func TestKeyedMutexSerialisesOneKeyOnlyAndForgetsIdleKeys(t *testing.T) {
	var k keyedMutex
	unlockA, err := k.lock(t.Context(), "endpoint:a")
	if err != nil {
		t.Fatal(err)
	}
	// Another key is free while a is held.
	unlockB, err := k.lock(t.Context(), "endpoint:b")
	if err != nil {
		t.Fatalf("a second key waited for the first: %v", err)
	}
	unlockB()
	// The same key waits, and gives up with its context.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := k.lock(ctx, "endpoint:a"); err == nil {
		t.Fatal("a held key was locked twice")
	}
	got := make(chan struct{})
	go func() {
		unlock, err := k.lock(t.Context(), "endpoint:a")
		if err == nil {
			unlock()
		}
		close(got)
	}()
	unlockA()
	<-got
	if n := k.size(); n != 0 {
		t.Fatalf("%d keys kept after every lock was released, want 0", n)
	}
}
