package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func ping(t *testing.T, c Config) error {
	t.Helper()
	opts, err := c.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

func TestSASLMechanismsAuthenticate(t *testing.T) {
	tests := []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
	for _, mech := range tests {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "hook", "line-secret"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			good := Config{Brokers: c.ListenAddrs(), ClientID: "t", SASLMechanism: mech, SASLUser: "hook", SASLPassword: "line-secret"}
			if err := ping(t, good); err != nil {
				t.Fatalf("valid credentials: %v", err)
			}
			bad := good
			bad.SASLPassword = "wrong"
			if err := ping(t, bad); err == nil {
				t.Fatal("a wrong password authenticated")
			}
		})
	}
}

func TestOptsRejectsBadSettings(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string
	}{
		{"no brokers", Config{}, "no brokers"},
		{"unknown mechanism", Config{Brokers: []string{"x:1"}, SASLMechanism: "GSSAPI"}, "unknown SASL mechanism"},
		{"missing CA", Config{Brokers: []string{"x:1"}, TLSCAFile: "/nonexistent/ca.pem"}, "TLS CA file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.give.Opts()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestProducerOptsAcceptsEachCodecAndRejectsOthers(t *testing.T) {
	tests := []struct {
		give    Config
		wantErr string
	}{
		{give: Config{}},
		{give: Config{Compression: "none"}},
		{give: Config{Compression: "snappy", ProducerLinger: 5 * time.Millisecond}},
		{give: Config{Compression: "LZ4"}},
		{give: Config{Compression: "zstd"}},
		{give: Config{Compression: "gzip"}},
		{give: Config{Compression: "brotli"}, wantErr: "unknown --kafka-compression"},
		{give: Config{ProducerLinger: -time.Millisecond}, wantErr: "--kafka-linger"},
		{give: Config{ProducerLinger: 2 * time.Minute}, wantErr: "--kafka-linger"},
	}
	for _, tt := range tests {
		opts, err := tt.give.ProducerOpts()
		switch {
		case tt.wantErr == "" && (err != nil || len(opts) != 2):
			t.Errorf("ProducerOpts(%q, %s) = %d opts, %v; want 2, nil", tt.give.Compression, tt.give.ProducerLinger, len(opts), err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ProducerOpts(%q, %s): %v, want an error mentioning %q", tt.give.Compression, tt.give.ProducerLinger, err, tt.wantErr)
		}
	}
}
