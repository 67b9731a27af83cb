package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/bench/harness"
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
	k := &harness.Kafka{RepoDir: ".", Dir: filepath.Join(cfg.workDir, "kafka"), Port: cfg.kafkaPort, ControllerPort: cfg.kafkaPort + 1, TLSPort: cfg.kafkaPort + 2}
	brokers, err := k.Up(ctx)
	if err != nil {
		return err
	}
	if !cfg.keepKafka {
		defer func() { _ = k.Down() }()
	}

	var raw [32]byte
	_, _ = rand.Read(raw[:])
	key := "hk_" + hex.EncodeToString(raw[:])
	port, err := harness.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var env []string
	if cfg.memLimit != "" {
		env = []string{"GOMEMLIMIT=" + cfg.memLimit}
	}
	in := &ingestProc{addr: addr, proc: harness.NewProc(cfg.workDir, "ingest", cfg.ingestBin, env,
		"--grpc-addr", addr, "--kafka-brokers", brokers, "--api-keys", "bench:read:"+key,
		"--data-dir", filepath.Join(cfg.workDir, "index"), "--topic-partitions", "6", "--topic-replication-factor", "1",
		"--insecure-plaintext-secrets")} // no endpoints: no secrets
	rep := report{cfg: cfg}

	// First start: creates the topics, empty index.
	if _, err := in.start(ctx); err != nil {
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
	rep.peakCatchUp = in.peakMiB()

	fmt.Fprintln(os.Stderr, "timing queries …")
	if rep.get, rep.list, err = cl.measure(ctx, loaded, cfg.queries); err != nil {
		return err
	}
	rep.rss = in.rssMiB()
	rep.disk = dirBytes(filepath.Join(cfg.workDir, "index"))

	fmt.Fprintln(os.Stderr, "restarting ingest …")
	in.stop()
	cl.close()
	t0 := time.Now()
	if rep.restartServing, err = in.start(ctx); err != nil {
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
	rep.rssAfter = in.rssMiB()
	rep.resumedLine = grepLog(in.proc.LogPath(), "history index open")

	out := rep.markdown()
	fmt.Print(out)
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(cfg.out, []byte(out), 0o644)
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
