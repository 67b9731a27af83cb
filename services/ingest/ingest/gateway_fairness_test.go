package ingest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestOneTenantsSlowCallsDoNotStallAnothersGatewayCalls is issue 25 F5:
// every HTTP/JSON call rode one in-memory gRPC connection capped at
// 1,000 streams, so one tenant's 1,000 SendTestEvent calls waiting on a
// receiver that never answers (here: no dispatcher at all, so each waits
// its full minute) held every stream, and another tenant's
// GET /v1/endpoints queued behind them. It must be answered while they
// are still waiting.
func TestOneTenantsSlowCallsDoNotStallAnothersGatewayCalls(t *testing.T) {
	r := newHistoryRig(t)
	r.configure = func(c *Config) {
		c.APIKeys = []string{"acme:" + historyTestKey, "other:" + otherKey}
		c.AllowHTTP, c.AllowPrivate = true, true
	}
	r.start()
	base := "http://" + r.addr
	call := func(ctx context.Context, method, path, key, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	resp, err := call(t.Context(), http.MethodPost, "/v1/endpoints", historyTestKey, `{"url":"http://127.0.0.1:1/hook"}`)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Endpoint struct{ ID string } `json:"endpoint"`
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &created); err != nil || created.Endpoint.ID == "" {
		t.Fatalf("create endpoint: %s %s", resp.Status, b)
	}

	const slow = 1000
	var outcomes tally
	var ended atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	var sent, calls sync.WaitGroup
	sent.Add(slow)
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: slow}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range slow {
		calls.Go(func() {
			var once sync.Once
			done := func() { once.Do(sent.Done) }
			defer done()
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { done() }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, base+"/v1/endpoints/"+created.Endpoint.ID+":sendTestEvent", strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+historyTestKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if ctx.Err() == nil {
				ended.Add(1)
			}
			if err != nil {
				outcomes.add("error")
				return
			}
			outcomes.add(resp.Status)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	defer func() { cancel(); calls.Wait(); t.Logf("the slow calls ended: %v", outcomes.m) }()
	sent.Wait()
	// Each SendTestEvent writes its delivery, then waits for the
	// outcome: every call has either written its delivery (it is
	// waiting) or been answered.
	adm := r.admin()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ends, err := adm.ListEndOffsets(ctx, r.topics.Deliveries)
		if err != nil {
			t.Fatal(err)
		}
		written := int64(0)
		ends.Each(func(o kadm.ListedOffset) { written += o.Offset })
		if written+ended.Load() >= slow {
			t.Logf("%d slow calls waiting, %d answered", written, ended.Load())
			break
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("only %d slow calls waiting and %d answered", written, ended.Load())
		}
	}

	// A bound on the failure, not a wait: answered, this returns at once.
	octx, ocancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer ocancel()
	began := time.Now()
	resp, err = call(octx, http.MethodGet, "/v1/endpoints", otherKey, "")
	if err != nil {
		t.Fatalf("another tenant's GET /v1/endpoints behind 1,000 slow calls: %v (after %v)", err, time.Since(began))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another tenant's GET /v1/endpoints: %s", resp.Status)
	}
	t.Logf("another tenant's GET /v1/endpoints behind 1,000 slow SendTestEvent calls: %v", time.Since(began))
}

// tally counts outcomes. Safe for concurrent use.
type tally struct {
	mu sync.Mutex
	m  map[string]int
}

func (t *tally) add(k string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]int{}
	}
	t.m[k]++
}
