package ingest

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEndpointURLPortOutOfRangeIsRefused: a URL no request can ever
// reach (port 0 or above 65535) is refused at create, naming the port.
func TestEndpointURLPortOutOfRangeIsRefused(t *testing.T) {
	dev := newURLTestService(t, func(c *Config) { c.AllowHTTP, c.AllowPrivate = true, true })
	acme := tenantCtx(t, "acme")
	for _, u := range []string{"http://127.0.0.1:99999/x", "http://127.0.0.1:0/x", "https://example.test:65536/"} {
		err := dev.urls.validateURL(acme, u)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "port") {
			t.Errorf("%s: %v, want InvalidArgument naming the port", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:65535/x", "http://127.0.0.1:1/x", "http://127.0.0.1/x"} {
		if err := dev.urls.validateURL(acme, u); err != nil {
			t.Errorf("%s: %v, want it accepted", u, err)
		}
	}
}
