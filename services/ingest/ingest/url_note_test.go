package ingest

import (
	"strings"
	"testing"
)

// TestUnresolvableHostIsAcceptedWithANote: where a host need not
// resolve to be accepted (dev mode: every destination allowed), one
// that does not resolve now is accepted (DNS may be fixed later), and
// urlNote says so for the response and the endpoint's page; a host that
// resolves, or an address, gets no note.
func TestUnresolvableHostIsAcceptedWithANote(t *testing.T) {
	dev := newURLTestService(t, func(c *Config) { c.AllowPrivate = true })
	acme := tenantCtx(t, "acme")
	if err := dev.urls.validateURL(acme, "https://nowhere.acme.test/hooks"); err != nil {
		t.Fatalf("an unresolvable host in dev mode: %v, want it accepted", err)
	}
	note := dev.urls.urlNote(acme, "https://nowhere.acme.test/hooks")
	if !strings.Contains(note, "nowhere.acme.test") || !strings.Contains(note, "does not resolve") {
		t.Fatalf("note %q: want it to say nowhere.acme.test does not resolve", note)
	}
	for _, u := range []string{"https://intranet.acme.test/hooks", "https://10.1.2.3/hooks"} {
		if note := dev.urls.urlNote(acme, u); note != "" {
			t.Errorf("%s: note %q, want none", u, note)
		}
	}
}
