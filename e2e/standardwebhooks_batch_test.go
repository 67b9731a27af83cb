package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/sdk/batch"
	rxlib "github.com/hookline/hookline/sdk/receiver"
	"github.com/hookline/hookline/sdk/sign"
)

// TestStandardWebhooksLibrariesVerifyABatchAndListItsMembers: a batch
// as the dispatcher sends one (sdk/batch's body, the batch id as
// webhook-id, one Standard Webhooks signature over the whole body,
// webhook-batch-size) verifies unchanged with the Python and Node
// libraries and sdk/receiver, and each reads the member ids back in
// order; a tampered body, a wrong secret or a count that does not match
// the body is refused. The verify scripts are the ones the end-to-end
// batch test drives against a real dispatcher. Python and Node are
// skipped without make test-receivers' variables.
func TestStandardWebhooksLibrariesVerifyABatchAndListItsMembers(t *testing.T) {
	now := time.Now()
	members := []batch.Member{
		{ID: "evt_01", Type: "invoice.paid", Timestamp: now.Add(-2 * time.Second), Payload: []byte(`{"invoice":"in_1","note":"caf\u00e9 ✓"}`)},
		{ID: "evt_02", Type: "file.uploaded", Timestamp: now.Add(-time.Second), Payload: []byte{0, 1, 2, 0xff}},
		{ID: "evt_03", Type: "invoice.paid", Timestamp: now, Payload: []byte(` [1, 2] `)},
	}
	wantIDs := []string{"evt_01", "evt_02", "evt_03"}
	body := string(batch.Encode(members))
	secret := sign.GenerateSecret()
	signer, err := sign.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	id := batch.ID([]string{"dlv_01", "dlv_02", "dlv_03"})
	headers := func(size int, body string) map[string]string {
		return map[string]string{
			sign.HeaderID: id, sign.HeaderTimestamp: strconv.FormatInt(now.Unix(), 10),
			sign.HeaderSignature: signer.Sign(id, now, []byte(body)), batch.HeaderSize: strconv.Itoa(size),
		}
	}
	cases := []verifyCase{
		{Name: "batch", Secret: secret, Body: body, Headers: headers(3, body), WantOK: true, WantMembers: wantIDs},
		{Name: "tampered batch", Secret: secret, Body: strings.Replace(body, "in_1", "in_9", 1), Headers: headers(3, body)},
		{Name: "wrong secret", Secret: sign.GenerateSecret(), Body: body, Headers: headers(3, body)},
		{Name: "count does not match the body", Secret: secret, Body: body, Headers: headers(2, body)},
	}

	t.Run("go receiver", func(t *testing.T) {
		for _, c := range cases {
			worked := make(chan string, len(members))
			r, err := rxlib.New(func(_ context.Context, ev rxlib.Event) error { worked <- ev.ID; return nil }, []string{c.Secret}, rxlib.WithWorkers(1))
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- r.Run(ctx) }()
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/hooks", strings.NewReader(c.Body))
			for k, v := range c.Headers {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			stop()
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			close(worked)
			var got []string
			for id := range worked {
				got = append(got, id)
			}
			if ok := w.Code == http.StatusAccepted; ok != c.WantOK || strings.Join(got, ",") != strings.Join(c.WantMembers, ",") {
				t.Errorf("%s: status %d, worked on %v; want verified=%v and members %v", c.Name, w.Code, got, c.WantOK, c.WantMembers)
			}
		}
	})
	verifyWithLibraries(t, cases)
}
