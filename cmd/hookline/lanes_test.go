package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestLanesCommandsListSkipAndResendABlockedLane: on hookline dev, an
// endpoint created with --ordering per_key --on-head-failure block; the
// heads of lanes a and b fail permanently and block. lanes blocked lists
// both; a skip naming the wrong delivery is refused; lanes resend (after
// the receiver is fixed) delivers a's head; lanes skip releases b.
func TestLanesCommandsListSkipAndResendABlockedLane(t *testing.T) {
	dev := startDev(t, t.TempDir())
	waitServing(t, dev.grpc, insecure.NewCredentials())
	env := map[string]string{"HOOKLINE_ADDR": dev.grpc, "HOOKLINE_API_KEY": dev.apiKey}
	getenv := func(k string) string { return env[k] }
	var mu sync.Mutex
	codes := map[string]int{`"a"`: http.StatusBadRequest, `"b"`: http.StatusBadRequest}
	delivered := map[string]bool{}
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		code, ok := codes[string(body)]
		if !ok {
			code = http.StatusNoContent
		}
		if code < 300 {
			delivered[string(body)] = true
		}
		mu.Unlock()
		w.WriteHeader(code)
	}))
	defer rx.Close()
	cli := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), args, &out, getenv)
		return out.String(), err
	}
	out, err := cli("endpoint", "create", "--url", rx.URL+"/hooks", "--ordering", "per_key", "--on-head-failure", "block")
	if err != nil {
		t.Fatal(err)
	}
	var created hooklinev1.CreateEndpointResponse
	if err := protojson.Unmarshal([]byte(out), &created); err != nil || created.GetEndpoint().GetOnHeadFailure() != hooklinev1.HeadFailure_HEAD_FAILURE_BLOCK {
		t.Fatalf("endpoint create printed %q (%v)", out, err)
	}
	ep := created.GetEndpoint().GetId()
	heads := map[string]string{}
	for _, key := range []string{"a", "b"} {
		out, err := cli("publish", "--type", "order.updated", "--data", `"`+key+`"`, "--ordering-key", key)
		if err != nil {
			t.Fatal(err)
		}
		var pub hooklinev1.PublishEventResponse
		if err := protojson.Unmarshal([]byte(out), &pub); err != nil {
			t.Fatal(err)
		}
		heads[key] = pub.GetDeliveries()[0].GetDeliveryId()
	}
	blocked := func() *hooklinev1.ListBlockedLanesResponse {
		out, err := cli("lanes", "blocked", "--endpoint", ep)
		if err != nil {
			t.Fatal(err)
		}
		var l hooklinev1.ListBlockedLanesResponse
		if err := protojson.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("lanes blocked printed %q: %v", out, err)
		}
		return &l
	}
	waitUntil(t, "both lanes blocked", func() bool { return len(blocked().GetLanes()) == 2 })
	if l := blocked().GetLanes(); l[0].GetOrderingKey() != "a" || l[0].GetDeliveryId() != heads["a"] || l[0].GetLastStatusCode() != http.StatusBadRequest {
		t.Fatalf("lanes blocked: %v", l)
	}
	if _, err := cli("lanes", "skip", "--endpoint", ep, "--ordering-key", "a", "--delivery", heads["b"]); err == nil || !strings.Contains(err.Error(), "FailedPrecondition") {
		t.Fatalf("a skip naming another lane's head: %v; want FailedPrecondition", err)
	}
	mu.Lock()
	codes[`"a"`] = http.StatusNoContent // fixed
	mu.Unlock()
	if out, err := cli("lanes", "resend", "--endpoint", ep, "--ordering-key", "a", "--delivery", heads["a"]); err != nil || !strings.Contains(out, "lcm_") {
		t.Fatalf("lanes resend: %q, %v", out, err)
	}
	if out, err := cli("lanes", "skip", "--endpoint", ep, "--ordering-key", "b", "--delivery", heads["b"]); err != nil || !strings.Contains(out, "lcm_") {
		t.Fatalf("lanes skip: %q, %v", out, err)
	}
	waitUntil(t, "a's head delivered and no lane blocked", func() bool {
		mu.Lock()
		ok := delivered[`"a"`]
		mu.Unlock()
		return ok && len(blocked().GetLanes()) == 0
	})
}

// waitUntil polls cond every 50 ms for at most a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("not within a minute: %s", what)
		}
	}
}
