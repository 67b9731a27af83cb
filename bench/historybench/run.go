package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// run is the whole bench: Kafka up, ingest up, load, catch up, measure,
// restart, measure, report.
func run(ctx context.Context, args []string) error {
	cfg, err := parseConfig(args)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(cfg.workDir); err != nil {
		return err
	}
	kafkaDir := filepath.Join(cfg.workDir, "kafka")
	kenv := []string{
		"HOOKLINE_KAFKA_DIR=" + kafkaDir,
		"HOOKLINE_KAFKA_PORT=" + strconv.Itoa(cfg.kafkaPort),
		"HOOKLINE_KAFKA_CONTROLLER_PORT=" + strconv.Itoa(cfg.kafkaPort+1),
		"HOOKLINE_KAFKA_TLS_PORT=" + strconv.Itoa(cfg.kafkaPort+2),
	}
	if err := kafkaScript(kenv, "up"); err != nil {
		_ = kafkaScript(kenv, "down")
		return err
	}
	if !cfg.keepKafka {
		defer func() { _ = kafkaScript(kenv, "down") }()
	}
	brokers := "127.0.0.1:" + strconv.Itoa(cfg.kafkaPort)

	var raw [16]byte
	_, _ = rand.Read(raw[:])
	key := "bench-" + hex.EncodeToString(raw[:])
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	in := ingestProc{
		bin: cfg.ingestBin, logDir: cfg.workDir, addr: addr,
		args: []string{"--grpc-addr", addr, "--kafka-brokers", brokers, "--api-keys", "bench:" + key,
			"--data-dir", filepath.Join(cfg.workDir, "index"), "--topic-partitions", "6", "--topic-replication-factor", "1"},
	}
	if cfg.memLimit != "" {
		in.env = []string{"GOMEMLIMIT=" + cfg.memLimit}
	}
	rep := report{cfg: cfg}

	// First start: creates the topics, empty index.
	if _, err := in.start(ctx, "ingest-1"); err != nil {
		return err
	}
	defer in.stop()
	cl, err := dial(addr, key)
	if err != nil {
		return err
	}
	defer cl.close()

	fmt.Fprintf(os.Stderr, "loading %d deliveries of %d bytes into Kafka …\n", cfg.deliveries, cfg.payload)
	loaded, err := load(ctx, brokers, cfg.deliveries, cfg.payload)
	if err != nil {
		return err
	}
	rep.loadTook = loaded.took

	fmt.Fprintln(os.Stderr, "waiting for ingest to index them …")
	start := time.Now()
	if err := cl.waitIndexed(ctx, loaded.last, cfg.catchUp); err != nil {
		return err
	}
	rep.catchUp = time.Since(start)
	rep.records = loaded.records
	rep.peakCatchUp = in.mem.peak()

	fmt.Fprintln(os.Stderr, "timing queries …")
	if rep.get, rep.list, err = cl.measure(ctx, loaded, cfg.queries); err != nil {
		return err
	}
	rep.rss = in.mem.now()
	rep.disk = dirBytes(filepath.Join(cfg.workDir, "index"))

	fmt.Fprintln(os.Stderr, "restarting ingest …")
	in.stop()
	cl.close()
	t0 := time.Now()
	if rep.restartServing, err = in.start(ctx, "ingest-2"); err != nil {
		return err
	}
	if cl, err = dial(addr, key); err != nil {
		return err
	}
	if err := cl.waitIndexed(ctx, loaded.last, time.Minute); err != nil {
		return err
	}
	rep.restartAnswering = time.Since(t0)
	if rep.getAfter, rep.listAfter, err = cl.measure(ctx, loaded, cfg.queries/4); err != nil {
		return err
	}
	rep.rssAfter = in.mem.now()
	rep.resumedLine = grepLog(filepath.Join(cfg.workDir, "ingest-2.log"), "history index open")

	out := rep.markdown()
	fmt.Print(out)
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(cfg.out, []byte(out), 0o644)
}

func kafkaScript(env []string, verb string) error {
	cmd := exec.Command("bash", "scripts/kafka.sh", verb)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/kafka.sh %s: %w", verb, err)
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func grepLog(path, needle string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, needle) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
