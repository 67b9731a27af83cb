package config

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

type kafkaSection struct {
	Brokers []string `flag:"kafka-brokers" env:"T_BROKERS" default:"127.0.0.1:9092" usage:"brokers"`
}

type testConfig struct {
	Kafka   kafkaSection
	Addr    string        `flag:"addr" env:"T_ADDR" default:":7070" usage:"listen address"`
	Timeout time.Duration `flag:"timeout" env:"T_TIMEOUT" default:"10s" usage:"timeout"`
	Dev     bool          `flag:"dev" usage:"dev mode"`
	Max     uint32        `flag:"max" default:"16" usage:"max"`
	Rate    float64       `flag:"rate" default:"1.5" usage:"rate"`
}

func TestLoadPrecedence(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want testConfig
	}{
		{
			name: "defaults",
			want: testConfig{Kafka: kafkaSection{Brokers: []string{"127.0.0.1:9092"}}, Addr: ":7070", Timeout: 10 * time.Second, Max: 16, Rate: 1.5},
		},
		{
			name: "environment over default",
			env:  map[string]string{"T_ADDR": ":1", "T_BROKERS": "a:1, b:2"},
			want: testConfig{Kafka: kafkaSection{Brokers: []string{"a:1", "b:2"}}, Addr: ":1", Timeout: 10 * time.Second, Max: 16, Rate: 1.5},
		},
		{
			name: "flag over environment",
			env:  map[string]string{"T_ADDR": ":1"},
			args: []string{"-addr", ":2", "-dev", "-timeout", "3s", "-max", "2"},
			want: testConfig{Kafka: kafkaSection{Brokers: []string{"127.0.0.1:9092"}}, Addr: ":2", Timeout: 3 * time.Second, Dev: true, Max: 2, Rate: 1.5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got testConfig
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			if err := Load(fs, &got, tt.args, func(k string) string { return tt.env[k] }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLoadBadEnvironmentNamesTheVariable(t *testing.T) {
	var got testConfig
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	err := Load(fs, &got, nil, func(k string) string {
		if k == "T_TIMEOUT" {
			return "ten"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "T_TIMEOUT") {
		t.Fatalf("want an error naming T_TIMEOUT, got %v", err)
	}
}

func TestHelpDocumentsEverySetting(t *testing.T) {
	var got testConfig
	var out bytes.Buffer
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	fs.SetOutput(&out)
	err := Load(fs, &got, []string{"-h"}, func(string) string { return "" })
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("want flag.ErrHelp, got %v", err)
	}
	for _, want := range []string{"-kafka-brokers", "T_BROKERS", "-addr", "-timeout", "-dev", "-max", "-rate", `"10s"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
