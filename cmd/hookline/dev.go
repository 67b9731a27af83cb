package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/platform/config"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/platform/keyring"
	"github.com/hookline/hookline/platform/supervise"
	"github.com/hookline/hookline/platform/telemetry"
	"github.com/hookline/hookline/services/dispatcher/dispatcher"
	"github.com/hookline/hookline/services/ingest/ingest"
	"github.com/hookline/hookline/services/scheduler/scheduler"
	"github.com/twmb/franz-go/pkg/kfake"
)

type devFlags struct {
	DataDir     string `flag:"data-dir" env:"HOOKLINE_DEV_DATA_DIR" default:".hookline-dev" usage:"where the embedded Kafka keeps its data and the API key"`
	GRPCAddr    string `flag:"grpc-addr" env:"HOOKLINE_DEV_GRPC_ADDR" default:"127.0.0.1:7070" usage:"gRPC listen address of ingest"`
	KafkaAddr   string `flag:"kafka-addr" env:"HOOKLINE_DEV_KAFKA_ADDR" default:"127.0.0.1:9092" usage:"listen address of the embedded Kafka (loopback only); any Kafka client can read the topics there"`
	ConsoleAddr string `flag:"console-addr" env:"HOOKLINE_DEV_CONSOLE_ADDR" default:"127.0.0.1:7071" usage:"listen address of the delivery console (loopback; empty: none)"`
	// ConsoleSessionKeyFile seals the console's session cookies.
	ConsoleSessionKeyFile string `flag:"console-session-key-file" env:"HOOKLINE_CONSOLE_SESSION_KEY_FILE" usage:"file of the keys that seal console session cookies (default: <data-dir>/console-session.key, made once with a random key and kept)"`
	APIKey                string `flag:"api-key" env:"HOOKLINE_DEV_API_KEY" usage:"API key of tenant \"dev\" (default: generated once and kept in the data dir)"`
	KeyFile               string `flag:"secrets-key-file" env:"HOOKLINE_SECRETS_KEY_FILE" usage:"key file that seals endpoint secrets at rest (default: <data-dir>/secrets.keys, made once with one key and kept)"`
	LogLevel              string `flag:"log-level" env:"HOOKLINE_LOG_LEVEL" default:"info" usage:"debug, info, warn or error"`
	// One /metrics for the three services: their metric names differ.
	MetricsAddr string `flag:"metrics-addr" env:"HOOKLINE_DEV_METRICS_ADDR" default:"127.0.0.1:9464" usage:"listen address of the Prometheus /metrics endpoint of all three services (empty: none)"`
	// TLS for ingest, as the standalone service takes it (default: plaintext on loopback).
	GRPCTLSCert  string `flag:"grpc-tls-cert" env:"HOOKLINE_GRPC_TLS_CERT" usage:"PEM certificate chain to serve ingest's gRPC over TLS with (default: plaintext); re-read when the file changes"`
	GRPCTLSKey   string `flag:"grpc-tls-key" env:"HOOKLINE_GRPC_TLS_KEY" usage:"PEM private key of --grpc-tls-cert"`
	GRPCClientCA string `flag:"grpc-client-ca" env:"HOOKLINE_GRPC_CLIENT_CA" usage:"PEM CA certificates: with it clients must present a certificate one of them signed (mutual TLS)"`
	PprofAddr    string `flag:"pprof-addr" env:"HOOKLINE_PPROF_ADDR" usage:"loopback listen address of the Go profiler (/debug/pprof/) of the whole process, e.g. 127.0.0.1:6060 (default: off)"`
}

// runDev runs ingest, the dispatcher and the scheduler in this process on an embedded
// Kafka (kfake) persisted under --data-dir. Receivers on loopback and
// private addresses, and http:// URLs, are allowed: it is for development.
func runDev(ctx context.Context, args []string, out io.Writer, getenv func(string) string) error {
	var f devFlags
	if _, err := parse("dev", &f, args, out, getenv); err != nil {
		return err
	}
	if err := loopback("--kafka-addr", f.KafkaAddr); err != nil {
		return err
	}
	_, portStr, _ := net.SplitHostPort(f.KafkaAddr)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("--kafka-addr: bad port %q", portStr)
	}
	if err := os.MkdirAll(f.DataDir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	key, err := devAPIKey(f.DataDir, f.APIKey)
	if err != nil {
		return err
	}
	if f.ConsoleSessionKeyFile == "" {
		if f.ConsoleSessionKeyFile, err = devConsoleKeyFile(f.DataDir); err != nil {
			return err
		}
	}
	if f.KeyFile == "" {
		f.KeyFile = filepath.Join(f.DataDir, "secrets.keys")
		if _, err := keyring.CreateFile(f.KeyFile, time.Now()); err != nil {
			return err
		}
	}
	// Traces (OTEL_* environment) per service, so a backend shows
	// hookline-ingest, hookline-dispatcher and hookline-scheduler; one
	// meter provider for all three.
	metricsEnv, err := telemetry.Start(ctx, "hookline-dev", telemetry.Config{MetricsAddr: f.MetricsAddr, LogLevel: f.LogLevel, PprofAddr: f.PprofAddr}, os.Stderr)
	if err != nil {
		// Start listens on --metrics-addr, then --pprof-addr.
		if strings.HasPrefix(err.Error(), "--metrics-addr") {
			return portTaken("--metrics-addr", "HOOKLINE_DEV_METRICS_ADDR", f.MetricsAddr, err)
		}
		return portTaken("--pprof-addr", "HOOKLINE_PPROF_ADDR", f.PprofAddr, err)
	}
	log := metricsEnv.Log
	if a := metricsEnv.PprofAddr(); a != "" {
		log.Info("pprof endpoint", "url", "http://"+a+"/debug/pprof/")
	}
	tel := map[string]*telemetry.Telemetry{}
	for _, svc := range []string{"ingest", "dispatcher", "scheduler"} {
		t, err := telemetry.Setup(ctx, "hookline-"+svc, telemetry.WithoutMetrics())
		if err != nil {
			return err
		}
		tel[svc] = t
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, t := range append(slices.Collect(maps.Values(tel)), metricsEnv.Telemetry) {
			if err := t.Shutdown(fctx); err != nil {
				log.Warn("telemetry not flushed", "err", err)
			}
		}
	}()
	mp := metricsEnv.Telemetry.MeterProvider

	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DataDir(filepath.Join(f.DataDir, "kafka")),
		kfake.ClusterID("hookline-dev"),
	)
	if err != nil {
		return portTaken("--kafka-addr", "HOOKLINE_DEV_KAFKA_ADDR", f.KafkaAddr, fmt.Errorf("embedded Kafka: %w", err))
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	kc, err := config.Defaults[hkafka.Config]()
	if err != nil {
		return err
	}
	kc.Brokers = brokers
	ic, err := config.Defaults[ingest.Config]()
	if err != nil {
		return err
	}
	ic.Kafka, ic.GRPCAddr = kc, f.GRPCAddr
	// The delivery history index lives beside the embedded Kafka's data,
	// so a restarted dev resumes it.
	ic.DataDir, ic.ConsoleAddr = filepath.Join(f.DataDir, "ingest-index"), f.ConsoleAddr
	ic.APIKeys = []string{"dev:" + key}
	ic.ConsoleSessionKeyFile = f.ConsoleSessionKeyFile
	ic.AllowHTTP, ic.AllowPrivate = true, true
	ic.DevMode = true // a --api-key of any strength
	ic.GRPCTLSCert, ic.GRPCTLSKey, ic.GRPCClientCA = f.GRPCTLSCert, f.GRPCTLSKey, f.GRPCClientCA
	// One developer, one tenant: no per-tenant rates (and load
	// benchmarks run on dev mode).
	ic.PublishRate, ic.ReplayRate, ic.EndpointWriteRate = 0, 0, 0
	ic.Secrets.KeyFile = f.KeyFile
	dc, err := config.Defaults[dispatcher.Config]()
	if err != nil {
		return err
	}
	dc.Kafka = kc
	dc.AllowPrivate = true
	dc.Secrets.KeyFile = f.KeyFile
	dc.TransactionalID = "hookline-dev-dispatcher"
	dc.AnswersDir = filepath.Join(f.DataDir, "dispatcher-answers") // a killed dev settles what its receivers answered

	sc, err := config.Defaults[scheduler.Config]()
	if err != nil {
		return err
	}
	sc.Kafka = kc
	sc.TransactionalID = "hookline-dev-scheduler"
	sched, err := scheduler.New(sc, scheduler.WithLogger(log.With("service", "scheduler")),
		scheduler.WithTelemetry(tel["scheduler"].TracerProvider, mp))
	if err != nil {
		return err
	}

	// Every port is bound before the banner says dev is running: a busy
	// one fails here, naming what moves it.
	ln, err := net.Listen("tcp", f.GRPCAddr)
	if err != nil {
		return portTaken("--grpc-addr", "HOOKLINE_DEV_GRPC_ADDR", f.GRPCAddr, err)
	}
	inOpts := []ingest.Option{ingest.WithLogger(log.With("service", "ingest")), ingest.WithListener(ln),
		ingest.WithTelemetry(tel["ingest"].TracerProvider, mp)}
	if f.ConsoleAddr != "" {
		if err := loopback("--console-addr", f.ConsoleAddr); err != nil {
			_ = ln.Close()
			return err
		}
		cln, err := net.Listen("tcp", f.ConsoleAddr)
		if err != nil {
			_ = ln.Close()
			return portTaken("--console-addr", "HOOKLINE_DEV_CONSOLE_ADDR", f.ConsoleAddr, err)
		}
		f.ConsoleAddr = cln.Addr().String() // what the banner shows
		inOpts = append(inOpts, ingest.WithConsoleListener(cln))
	}
	in, err := ingest.New(ic, inOpts...)
	if err != nil {
		return err
	}
	disp, err := dispatcher.New(dc, dispatcher.WithLogger(log.With("service", "dispatcher")),
		dispatcher.WithTelemetry(tel["dispatcher"].TracerProvider, mp))
	if err != nil {
		return err
	}

	fmt.Fprintf(out, `Hookline dev is running (Ctrl-C to stop).
  ingest gRPC   %s%s
  ingest HTTP   %s   (JSON, same port: POST /v1/events)
  console       %s   (sign in with the API key)
  Kafka         %s   (topics %s*, read with any Kafka client)
  API key       %s   (tenant "dev")
  data dir      %s   (endpoint secrets sealed with %s)
  metrics       %s
  traces        %s

Try it:
  export HOOKLINE_API_KEY=%s%s
  ./bin/hookline endpoint create --url http://127.0.0.1:9000/webhooks
  ./bin/hookline publish --type invoice.paid --data '{"invoice":"in_1","amount":4200}'
  curl -H "authorization: Bearer $HOOKLINE_API_KEY" -d '{"event_type":"invoice.paid","payload":{"invoice":"in_2"}}' %s/v1/events
  ./bin/hookline results tail --kafka-brokers %s
`, ln.Addr(), tlsNote(f), httpBase(f, ln.Addr().String()), consoleURL(f.ConsoleAddr), strings.Join(brokers, ","), kc.TopicPrefix, key, f.DataDir, f.KeyFile, metricsURL(metricsEnv), tracesTo(tel["ingest"]), key, addrExport(ln.Addr().String()), httpBase(f, ln.Addr().String()), strings.Join(brokers, ","))
	// Started in this order, stopped in the reverse one: ingest stops
	// taking events first, the dispatcher then drains what it has, the
	// scheduler hands back what is due, and the metrics endpoint
	// observes all of it.
	return supervise.Run(ctx,
		supervise.Part{Run: metricsEnv.Serve},
		supervise.Part{Name: "scheduler", Run: sched.Run},
		supervise.Part{Name: "dispatcher", Run: disp.Run},
		supervise.Part{Name: "ingest", Run: in.Run})
}

// loopback checks that addr, given as flag, is a loopback address: dev
// serves this machine only.
func loopback(flag, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: hookline dev listens on loopback only, got host %q", flag, host)
	}
	return nil
}

// portTaken says that addr, which flag (or env) sets, cannot be listened
// on, and how to pick another.
func portTaken(flag, env, addr string, err error) error {
	return fmt.Errorf("cannot listen on %s (%s): %w; pick another address with %s or %s (a busy port is usually another hookline dev)", addr, flag, err, flag, env)
}

func consoleURL(addr string) string {
	if addr == "" {
		return "off"
	}
	return "http://" + addr + "/"
}

// devAPIKey returns the given key, or the one kept in dir, or a new one
// that it keeps there, so a restarted dev keeps working with the exported
// HOOKLINE_API_KEY.
func devAPIKey(dir, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	path := filepath.Join(dir, "api-key")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	raw := make([]byte, 20)
	_, _ = rand.Read(raw)
	key := "hk_dev_" + hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return key, nil
}

// devConsoleKeyFile returns <dir>/console-session.key, writing a random
// key (256 bits, hex) into it when it does not exist: sessions survive a
// restarted dev, and the key is no one else's.
func devConsoleKeyFile(dir string) (string, error) {
	path := filepath.Join(dir, "console-session.key")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("console session key: %w", err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	if err := os.WriteFile(path, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("console session key: %w", err)
	}
	return path, nil
}

// metricsURL is where dev serves /metrics, or says there is none.
func metricsURL(e telemetry.Env) string {
	if a := e.MetricsAddr(); a != "" {
		return "http://" + a + "/metrics"
	}
	return "(none: --metrics-addr is empty)"
}

// tracesTo says where dev's traces go.
func tracesTo(t *telemetry.Telemetry) string {
	if !t.Tracing() {
		return "off (set OTEL_EXPORTER_OTLP_ENDPOINT to export)"
	}
	return "exported as OTEL_* says (services hookline-ingest, hookline-dispatcher, hookline-scheduler)"
}

// tlsNote says how clients reach a dev ingest that serves TLS.
// httpBase is the base URL of ingest's HTTP/JSON API.
func httpBase(f devFlags, addr string) string {
	if f.GRPCTLSCert != "" {
		return "https://" + addr
	}
	return "http://" + addr
}

func tlsNote(f devFlags) string {
	switch {
	case f.GRPCClientCA != "":
		return "   (mutual TLS: clients pass --ca, --cert and --key)"
	case f.GRPCTLSCert != "":
		return "   (TLS: clients pass --ca)"
	}
	return ""
}

// addrExport is the banner's HOOKLINE_ADDR setting when ingest is not
// where the CLI looks by default (127.0.0.1:7070), else "".
func addrExport(addr string) string {
	if addr == "127.0.0.1:7070" {
		return ""
	}
	return " HOOKLINE_ADDR=" + addr
}
