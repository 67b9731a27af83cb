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

// ceilingLimit stands for another package's constant that a flag's
// default must follow.
const ceilingLimit = 1000

type codeDefaults struct {
	Ceiling int     `flag:"ceiling" env:"T_CEILING" usage:"ceiling"`
	Rate    float64 `flag:"rate-ceiling" usage:"rate ceiling"`
}

func (c *codeDefaults) SetDefaults() { c.Ceiling, c.Rate = ceilingLimit, 2.5 }

type withCodeDefaults struct {
	Limits codeDefaults
	Addr   string `flag:"addr" default:":7070" usage:"listen address"`
}

// TestDefaultsSetInCode: a section's SetDefaults gives the defaults of
// its untagged fields, with the environment and flags over them as over
// a tag's, and -h shows them.
func TestDefaultsSetInCode(t *testing.T) {
	got, err := Defaults[withCodeDefaults]()
	if err != nil {
		t.Fatal(err)
	}
	if want := (withCodeDefaults{Limits: codeDefaults{Ceiling: ceilingLimit, Rate: 2.5}, Addr: ":7070"}); got != want {
		t.Fatalf("Defaults = %+v, want %+v", got, want)
	}

	var c withCodeDefaults
	err = Load(flag.NewFlagSet("t", flag.ContinueOnError), &c, []string{"-rate-ceiling", "7"}, func(k string) string {
		if k == "T_CEILING" {
			return "10"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.Ceiling != 10 || c.Limits.Rate != 7 {
		t.Fatalf("environment and flag over code defaults: got %+v, want Ceiling 10, Rate 7", c.Limits)
	}

	var out bytes.Buffer
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	fs.SetOutput(&out)
	if err := Load(fs, &withCodeDefaults{}, []string{"-h"}, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("want flag.ErrHelp, got %v", err)
	}
	for _, want := range []string{`(default "1000")`, `(default "2.5")`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
