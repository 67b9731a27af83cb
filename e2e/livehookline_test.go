package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// liveHookline is Hookline running as processes of its own, as a user
// runs it, for clients in other languages to call.
type liveHookline struct {
	grpcAddr, kafkaAddr, apiKey, resultsTopic string
}

// serviceSecretsArgs are the flags the standalone services get for the
// endpoint secrets at rest: the suite's key file (made by TestMain).
func serviceSecretsArgs() []string { return []string{"--secrets-key-file", testKeyFile} }

// startLiveHookline starts bin/hookline dev on free loopback ports (with
// HOOKLINE_TEST_KAFKA unset or "kfake"), or else bin/scheduler,
// bin/dispatcher and bin/ingest on that Kafka with a topic prefix of their
// own; it waits until ingest answers health checks. All of it is stopped
// when the test ends, and with this process if the test dies.
func startLiveHookline(t *testing.T, root string) liveHookline {
	t.Helper()
	h := liveHookline{grpcAddr: freeAddr(t), apiKey: "hk_polyglot_" + randomHex(16)}
	var procs []*hooklineProc
	if v := os.Getenv(envKafka); v == "" || v == "kfake" {
		h.kafkaAddr, h.resultsTopic = freeAddr(t), "hookline.results"
		procs = append(procs, startHooklineProc(t, root, "hookline", "dev",
			"--data-dir", filepath.Join(t.TempDir(), "data"), "--grpc-addr", h.grpcAddr, "--kafka-addr", h.kafkaAddr,
			"--api-key", h.apiKey, "--metrics-addr", "", "--log-level", "warn"))
	} else {
		prefix := "polyglot" + randomHex(4) + "."
		h.kafkaAddr, h.resultsTopic = v, prefix+"results"
		common := slices.Concat([]string{"--kafka-brokers", v, "--topic-prefix", prefix, "--log-level", "warn"}, serviceSecretsArgs())
		procs = append(procs,
			startHooklineProc(t, root, "scheduler", slices.Concat(common,
				[]string{"--group", prefix + "scheduler", "--transactional-id", prefix + "scheduler"})...),
			startHooklineProc(t, root, "dispatcher", slices.Concat(common,
				[]string{"--group", prefix + "dispatcher", "--transactional-id", prefix + "dispatcher", "--allow-private-destinations"})...),
			startHooklineProc(t, root, "ingest", slices.Concat(common,
				[]string{"--grpc-addr", h.grpcAddr, "--api-keys", "polyglot:" + h.apiKey, "--allow-http", "--allow-private-destinations"})...))
	}
	waitServing(t, h.grpcAddr, procs)
	return h
}

// hooklineProc is one started binary of bin/.
type hooklineProc struct {
	name    string
	exited  chan struct{}
	exitErr error
}

// startHooklineProc starts bin/<name> with args, its output in a log the
// test shows when it fails, and stops it (SIGTERM, then SIGKILL after 15 s)
// when the test ends.
func startHooklineProc(t *testing.T, root, name string, args ...string) *hooklineProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin", name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v (make build writes bin/%s)", err, name)
	}
	p := &hooklineProc{name: name, exited: make(chan struct{})}
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("bin/%s log:\n%s", name, b)
			}
		}
	})
	return p
}

// waitServing waits until the gRPC health service at addr says SERVING,
// failing the test when it does not in time or a process exits first.
func waitServing(t *testing.T, addr string, procs []*hooklineProc) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	health := healthpb.NewHealthClient(cc)
	deadline := time.Now().Add(waitFor)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Hookline not serving on %s after %v: %v", addr, waitFor, err)
		}
		for _, p := range procs {
			select {
			case <-p.exited:
				t.Fatalf("bin/%s exited: %v", p.name, p.exitErr)
			default:
			}
		}
		time.Sleep(100 * time.Millisecond) // poll interval of the health check
	}
}
