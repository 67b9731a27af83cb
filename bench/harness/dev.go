package harness

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
)

// Dev is one `hookline dev` (ingest, dispatcher, scheduler and kfake in
// one process, persisted to DataDir), prepared on free loopback ports
// with an API key of its own. Start it with Proc.Start (again after a
// kill: the data directory stays); remove DataDir when done.
type Dev struct {
	Proc                        *Proc
	GRPCAddr, KafkaAddr, APIKey string
	// MetricsAddr serves the three services' Prometheus /metrics.
	MetricsAddr string
	DataDir     string
}

// NewDev prepares a `hookline dev` named name, logging to logDir, with a
// fresh data directory and a key "hk_<tag>_…". Every address it listens
// on is a free port of its own (gRPC, Kafka, console, metrics), so it
// never meets a `hookline dev` or anything else already on the machine
// on dev's fixed defaults (7070, 9092, 7071, 9464).
func NewDev(logDir, name, hookline, tag string) (*Dev, error) {
	gp, err := FreePort()
	if err != nil {
		return nil, err
	}
	kp, err := FreePort()
	if err != nil {
		return nil, err
	}
	cp, err := FreePort()
	if err != nil {
		return nil, err
	}
	mp, err := FreePort()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hookline-"+tag+"-"+name+"-")
	if err != nil {
		return nil, err
	}
	d := &Dev{GRPCAddr: "127.0.0.1:" + strconv.Itoa(gp), KafkaAddr: "127.0.0.1:" + strconv.Itoa(kp),
		APIKey: "hk_" + tag + "_" + hex.EncodeToString(b), DataDir: dir, MetricsAddr: "127.0.0.1:" + strconv.Itoa(mp)}
	d.Proc = NewProc(logDir, name, hookline, nil, "dev", "--data-dir", dir, "--grpc-addr", d.GRPCAddr,
		"--kafka-addr", d.KafkaAddr, "--console-addr", "127.0.0.1:"+strconv.Itoa(cp), "--metrics-addr", d.MetricsAddr, "--api-key", d.APIKey, "--log-level", "warn")
	d.Proc.Kind = "dev"
	return d, nil
}
