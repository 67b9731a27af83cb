package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

func TestTakeHeadersKeepsCommasAndEqualsAndLeavesOtherFlags(t *testing.T) {
	rest, hs, given, err := takeHeaders([]string{"ep_1", "--header", "X-A=1,2=3", "--url=u", "-header-secret=X-Key=k", "--", "--header", "x=y"})
	if err != nil || !given {
		t.Fatal(err)
	}
	if strings.Join(rest, " ") != "ep_1 --url=u -- --header x=y" {
		t.Fatalf("rest %q", rest)
	}
	if len(hs) != 2 || hs[0].GetName() != "X-A" || hs[0].GetValue() != "1,2=3" || hs[0].GetSecret() || hs[1].GetName() != "X-Key" || hs[1].GetValue() != "k" || !hs[1].GetSecret() {
		t.Fatalf("headers %v", hs)
	}
	for _, bad := range [][]string{{"--header", "novalue"}, {"--header"}, {"--header-secret", "=v"}} {
		if _, _, _, err := takeHeaders(bad); err == nil {
			t.Errorf("takeHeaders(%q): no error", bad)
		}
	}
}

// TestEndpointCreateAndUpdateSendHeadersAndAuth: against hookline dev,
// `endpoint create --header --header-secret --auth bearer --auth-token
// @file` answers the secret header and the token as set without their
// values, and `endpoint test` reaches the receiver with them; `endpoint
// update --auth basic …` switches the auth while the secret header,
// given with an empty value, keeps its value.
func TestEndpointCreateAndUpdateSendHeadersAndAuth(t *testing.T) {
	dev := startDev(t, t.TempDir())
	waitServing(t, dev.grpc, insecure.NewCredentials())
	env := devEnv(dev)
	var mu sync.Mutex
	var got []http.Header
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
	}))
	defer rx.Close()
	last := func() http.Header { mu.Lock(); defer mu.Unlock(); return got[len(got)-1] }
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("cli-token-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := run(t.Context(), args, &out, env)
		return out.String(), err
	}
	out, err := cli("endpoint", "create", "--url", rx.URL, "--header", "X-Route=eu,1", "--header-secret", "X-Key=cli-secret-1", "--auth", "bearer", "--auth-token", "@"+tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "cli-secret-1") || strings.Contains(out, "cli-token-1") || !strings.Contains(out, `"value_set": true`) || !strings.Contains(out, `"token_set": true`) {
		t.Fatalf("endpoint create printed %s: want the secret header and token as set, without their values", out)
	}
	var created struct {
		Endpoint struct{ ID string } `json:"endpoint"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	id := created.Endpoint.ID
	if _, err := cli("endpoint", "test", id); err != nil {
		t.Fatal(err)
	}
	if h := last(); h.Get("X-Route") != "eu,1" || h.Get("X-Key") != "cli-secret-1" || h.Get("Authorization") != "Bearer cli-token-1" {
		t.Fatalf("receiver got %v", h)
	}
	if _, err := cli("endpoint", "update", id, "--auth", "basic", "--auth-username", "u", "--auth-password", "p", "--header-secret", "X-Key="); err != nil {
		t.Fatal(err)
	}
	if _, err := cli("endpoint", "test", id); err != nil {
		t.Fatal(err)
	}
	if h := last(); h.Get("X-Route") != "" || h.Get("X-Key") != "cli-secret-1" || h.Get("Authorization") != "Basic dTpw" {
		t.Fatalf("after update the receiver got %v; want X-Key kept, X-Route removed, basic auth", h)
	}
}
