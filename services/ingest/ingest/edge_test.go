package ingest

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/platform/config"
)

func TestNewRefusesAWeakKeyOutsideDevMode(t *testing.T) {
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Secrets.InsecurePlaintext = true                                 // unit tests: no key file
	cfg.APIKeys = []string{"acme:hk_" + strings.Repeat("0123456789", 2)} // 20 decimal digits: 66 bits at most
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "fewer than 128") {
		t.Fatalf("a weak key outside dev mode: %v", err)
	}
	cfg.DevMode = true
	if _, err := New(cfg); err != nil {
		t.Fatalf("dev mode refused the key: %v", err)
	}
}

func TestNewRefusesHalfATLSConfiguration(t *testing.T) {
	cfg, err := config.Defaults[Config]()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Secrets.InsecurePlaintext = true // unit tests: no key file
	cfg.APIKeys = []string{"acme:hk_5b0e8f2d7c41a9e6d3b8f0c2a7e4d1b9"}
	for _, tt := range []struct{ cert, key, ca string }{{"c.pem", "", ""}, {"", "k.pem", ""}, {"", "", "ca.pem"}} {
		cfg.GRPCTLSCert, cfg.GRPCTLSKey, cfg.GRPCClientCA = tt.cert, tt.key, tt.ca
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "--grpc-tls-cert and --grpc-tls-key") {
			t.Errorf("%+v: %v", tt, err)
		}
	}
}
