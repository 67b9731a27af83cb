package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	rxlib "github.com/hookline/hookline/sdk/receiver"
	"github.com/hookline/hookline/sdk/sign"
)

// verifyCase is one webhook for a Standard Webhooks library to verify.
type verifyCase struct {
	Name    string            `json:"name"`
	Secret  string            `json:"secret"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
	WantOK  bool              `json:"-"`
	// WantMembers, for a batch that verifies, are the member ids the
	// script must print, in order.
	WantMembers []string `json:"-"`
}

// TestStandardWebhooksLibrariesVerifyHooklineSignatures delivers a real
// event through ingest and the dispatcher to an endpoint whose secret was
// just rotated (so two signatures are sent), then has the Standard
// Webhooks libraries for Python and Node, and Hookline's own Go receiver,
// verify what the endpoint got: with the new secret, with the old one,
// and (refused) with a tampered body or a wrong secret. The Makefile's
// test-receivers installs the pinned libraries and sets
// HOOKLINE_RX_PYTHON and HOOKLINE_RX_NODE_MODULES; without them the
// Python and Node halves are skipped.
func TestStandardWebhooksLibrariesVerifyHooklineSignatures(t *testing.T) {
	st := startStack(t)
	rx := newReceiver(t, http.StatusOK)
	created := st.createEndpoint(rx.URL + "/hooks")
	oldSecret := created.GetSecret()
	rot, err := st.endpoints().RotateEndpointSecret(st.ctx(), &hooklinev1.RotateEndpointSecretRequest{Id: created.GetEndpoint().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	newSecret := rot.GetSecret()
	st.publish("invoice.paid", `{"invoice":"in_1","amount":4200,"note":"caf\u00e9 ✓"}`)
	st.deliveredAll(1)
	got := rx.got()[0]
	if n := len(strings.Fields(got.header.Get(sign.HeaderSignature))); n != 2 {
		t.Fatalf("want two signatures during the rotation, got %q", got.header.Get(sign.HeaderSignature))
	}
	headers := map[string]string{}
	for _, h := range []string{sign.HeaderID, sign.HeaderTimestamp, sign.HeaderSignature} {
		headers[h] = got.header.Get(h)
	}
	cases := []verifyCase{
		{Name: "new secret", Secret: newSecret, Body: string(got.body), Headers: headers, WantOK: true},
		{Name: "old secret, still in its grace period", Secret: oldSecret, Body: string(got.body), Headers: headers, WantOK: true},
		{Name: "tampered body", Secret: newSecret, Body: strings.Replace(string(got.body), "4200", "9999", 1), Headers: headers},
		{Name: "wrong secret", Secret: sign.GenerateSecret(), Body: string(got.body), Headers: headers},
	}

	t.Run("go receiver", func(t *testing.T) {
		for _, c := range cases {
			r, err := rxlib.New(func(context.Context, rxlib.Event) error { return nil }, []string{c.Secret})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/hooks", strings.NewReader(c.Body))
			for k, v := range c.Headers {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if ok := w.Code == http.StatusAccepted; ok != c.WantOK {
				t.Errorf("%s: status %d, want verified=%v", c.Name, w.Code, c.WantOK)
			}
		}
	})
	verifyWithLibraries(t, cases)
}

// verifyWithLibraries has the Standard Webhooks libraries for Python and
// Node verify cases (subtests "python standardwebhooks" and "node
// standardwebhooks"), each skipped when make test-receivers did not set
// up its library.
func verifyWithLibraries(t *testing.T, cases []verifyCase) {
	t.Run("python standardwebhooks", func(t *testing.T) {
		py := os.Getenv("HOOKLINE_RX_PYTHON")
		if py == "" {
			t.Skip("HOOKLINE_RX_PYTHON is not set (make test-receivers sets it)")
		}
		checkVerifier(t, "python", cases, exec.CommandContext(t.Context(), py, filepath.Join("testdata", "standardwebhooks", "verify.py")))
	})
	t.Run("node standardwebhooks", func(t *testing.T) {
		mods := os.Getenv("HOOKLINE_RX_NODE_MODULES")
		if mods == "" {
			t.Skip("HOOKLINE_RX_NODE_MODULES is not set (make test-receivers sets it)")
		}
		cmd := exec.CommandContext(t.Context(), "node", filepath.Join("testdata", "standardwebhooks", "verify.js"))
		cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
		checkVerifier(t, "node", cases, cmd)
	})
}

// checkVerifier runs a verify script on cases and checks each verdict.
func checkVerifier(t *testing.T, lib string, cases []verifyCase, cmd *exec.Cmd) {
	t.Helper()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
	}
	var verdicts []struct {
		OK      bool     `json:"ok"`
		Error   string   `json:"error"`
		Members []string `json:"members"`
	}
	if err := json.Unmarshal(out, &verdicts); err != nil || len(verdicts) != len(cases) {
		t.Fatalf("%s printed %q (%v), want %d verdicts", cmd, out, err, len(cases))
	}
	for i, c := range cases {
		if verdicts[i].OK != c.WantOK {
			t.Errorf("%s standardwebhooks, %s: verified=%v (%s), want %v", lib, c.Name, verdicts[i].OK, verdicts[i].Error, c.WantOK)
		} else if c.WantOK && strings.Join(verdicts[i].Members, ",") != strings.Join(c.WantMembers, ",") {
			t.Errorf("%s standardwebhooks, %s: members %v, want %v", lib, c.Name, verdicts[i].Members, c.WantMembers)
		} else {
			t.Logf("%s standardwebhooks, %s: verified=%v %s%s", lib, c.Name, verdicts[i].OK, verdicts[i].Error, strings.Join(verdicts[i].Members, " "))
		}
	}
}
