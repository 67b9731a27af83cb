package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	"github.com/hookline/hookline/platform/kafkatest"
	"github.com/hookline/hookline/services/ingest/ingest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Outside dev mode, endpoints on loopback, private, link-local and
// metadata addresses are refused when created, by literal or by name, and
// again on the resolved IP when dialled: a name that resolved to a public
// address at creation and to loopback later (DNS rebinding) gets the
// answer of a name that does not resolve, and no request. An allowlisted
// CIDR is accepted.
func TestPrivateDestinationsAreRefusedAtCreationAndAtDial(t *testing.T) {
	// What ingest's resolver answers at creation. The dispatcher uses the
	// system resolver, where "localhost" is loopback: the rebinding.
	answers := map[string][]net.IP{
		"loopback.test": {net.ParseIP("127.0.0.1")},
		"mixed.test":    {net.ParseIP("93.184.216.34"), net.ParseIP("10.0.0.7")},
		"allowed.test":  {net.ParseIP("10.1.2.3")},
		"localhost":     {net.ParseIP("93.184.216.34")},
	}
	st := startStack(t, func(c *stackConfig) {
		c.ingest.AllowPrivate = false
		c.ingest.AllowCIDRs = []string{"10.1.0.0/16"}
		c.ingestOpts = append(c.ingestOpts, ingest.WithResolver(func(_ context.Context, host string) ([]net.IP, error) {
			if ips, ok := answers[host]; ok {
				return ips, nil
			}
			return nil, fmt.Errorf("no such host %q", host)
		}))
		c.dispatcher.AllowPrivate = false
	})

	refused := []string{
		"http://127.0.0.1:9000/hooks",
		"http://10.0.0.1/hooks",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]:8080/hooks",
		"http://[fd00:ec2::254]/",
		"http://100.64.0.1/",
		"http://loopback.test/hooks",
		"http://mixed.test/hooks",
		"http://[fe80::1%25eth0]/hooks",
		"http://[64:ff9b::a9fe:a9fe]/",
		"http://[2002:7f00:1::]/",
	}
	before := st.endOffsets(st.topics.Endpoints)
	for _, u := range refused {
		_, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: u})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "destination not allowed") ||
			strings.Contains(err.Error(), "10.0.0.7") || strings.Contains(err.Error(), "127.0.0.1 is in") {
			t.Errorf("create %s: want InvalidArgument (destination not allowed), got %v", u, err)
		}
	}
	if after := st.endOffsets(st.topics.Endpoints); after != before {
		t.Fatalf("refused endpoints wrote %d records", after-before)
	}
	if _, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: "http://allowed.test/hooks"}); err != nil {
		t.Fatalf("an allowlisted CIDR was refused: %v", err)
	}

	rx := newReceiver(t, http.StatusOK)
	port := mustPort(t, rx.URL)
	ep, err := st.endpoints().CreateEndpoint(st.ctx(), &hooklinev1.CreateEndpointRequest{Url: "http://localhost:" + port + "/hooks", EventTypes: []string{"rebind.*"}})
	if err != nil {
		t.Fatalf("a name resolving to a public address was refused at creation: %v", err)
	}
	pub := st.publish("rebind.check", `{}`)
	var res *hooklinev1.AttemptResult
	for _, r := range kafkatest.Decode(t, st.readN(st.topics.Results, 2), func() *hooklinev1.AttemptResult { return &hooklinev1.AttemptResult{} }) {
		if r.GetEndpointId() == ep.GetEndpoint().GetId() {
			res = r
		}
	}
	// A name refused at dial reads exactly like a name that does not
	// resolve (transient, R-CLASS): a tenant cannot tell an internal
	// name that exists from one that does not.
	if res == nil || res.GetEventId() != pub.GetEventId() || res.GetClass() != hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT ||
		res.GetError() != `cannot resolve "localhost" to an allowed address` {
		t.Fatalf("dial to a rebound name: result %v, want a transient 'cannot resolve \"localhost\" to an allowed address', not naming the address", res)
	}
	if n := len(rx.got()); n != 0 {
		t.Fatalf("the receiver behind the rebound name got %d requests", n)
	}
}

func mustPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}
