package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// TestDevBusyPortFailsBeforeTheBanner: each port hookline dev listens on,
// taken by another process, stops it before it says it is running, with
// an error naming the port, the flag and the environment variable that
// move it.
func TestDevBusyPortFailsBeforeTheBanner(t *testing.T) {
	tests := []struct {
		flag, env string
	}{
		{"--grpc-addr", "HOOKLINE_DEV_GRPC_ADDR"},
		{"--kafka-addr", "HOOKLINE_DEV_KAFKA_ADDR"},
		{"--console-addr", "HOOKLINE_DEV_CONSOLE_ADDR"},
		{"--metrics-addr", "HOOKLINE_DEV_METRICS_ADDR"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			addrs := map[string]string{"--grpc-addr": "127.0.0.1:0", "--kafka-addr": "127.0.0.1:0", "--console-addr": "127.0.0.1:0", "--metrics-addr": "127.0.0.1:0"}
			addrs[tt.flag] = busy.Addr().String()
			args := []string{"dev", "--data-dir", t.TempDir(), "--log-level", "warn"}
			for f, a := range addrs {
				args = append(args, f, a)
			}
			var out bytes.Buffer
			err = run(t.Context(), args, &out, func(string) string { return "" })
			if err == nil {
				t.Fatalf("hookline dev ran with %s %s taken", tt.flag, busy.Addr())
			}
			_, port, _ := net.SplitHostPort(busy.Addr().String())
			for _, want := range []string{port, tt.flag, tt.env} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
			if strings.Contains(out.String(), "running") {
				t.Errorf("hookline dev printed its banner before failing:\n%s", out.String())
			}
		})
	}
}

// TestDevBannerCommandsRunFromTheClone: the banner's commands name the
// binary make run built, which is not on PATH.
func TestDevBannerCommandsRunFromTheClone(t *testing.T) {
	dev := startDev(t, t.TempDir()).banner
	for _, line := range strings.Split(dev, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "hookline" {
			t.Errorf("banner line %q calls hookline, which is not on PATH; want ./bin/hookline", line)
		}
	}
	if !strings.Contains(dev, "./bin/hookline endpoint create") {
		t.Errorf("banner lacks ./bin/hookline endpoint create:\n%s", dev)
	}
}

// TestDevBannerCommandsReachAMovedIngest: with --grpc-addr moved, the
// banner's export line sets HOOKLINE_ADDR too, so the commands after it
// reach this dev as pasted.
func TestDevBannerCommandsReachAMovedIngest(t *testing.T) {
	dev := startDev(t, t.TempDir())
	if !strings.Contains(dev.banner, "HOOKLINE_ADDR="+dev.grpc) {
		t.Fatalf("banner does not export HOOKLINE_ADDR=%s:\n%s", dev.grpc, dev.banner)
	}
}
