package main

import (
	"flag"
	"time"
)

// benchConfig is historybench's settings, all flags.
type benchConfig struct {
	deliveries int
	payload    int
	queries    int
	ingestBin  string
	workDir    string
	out        string
	kafkaPort  int
	keepKafka  bool
	catchUp    time.Duration
	memLimit   string
}

func parseConfig(args []string) (benchConfig, error) {
	var c benchConfig
	fs := flag.NewFlagSet("historybench", flag.ContinueOnError)
	fs.IntVar(&c.deliveries, "deliveries", 1_000_000, "deliveries to load into history (one event each)")
	fs.IntVar(&c.payload, "payload-bytes", 2048, "payload size of each event")
	fs.IntVar(&c.queries, "queries", 2000, "GetDelivery calls, and ListDeliveries pages, to time")
	fs.StringVar(&c.ingestBin, "ingest", "bin/ingest", "the ingest binary (make build writes it)")
	fs.StringVar(&c.workDir, "dir", "bin/historybench", "where Kafka's data, the index and the logs go (wiped first)")
	fs.StringVar(&c.out, "out", "bin/bench/history.md", "where the results table is written")
	fs.IntVar(&c.kafkaPort, "kafka-port", 19396, "Kafka's PLAINTEXT port on 127.0.0.1 (the next two are its controller and TLS ports)")
	fs.BoolVar(&c.keepKafka, "keep-kafka", false, "leave Kafka running at the end")
	fs.DurationVar(&c.catchUp, "catch-up-timeout", 20*time.Minute, "how long ingest may take to index everything")
	fs.StringVar(&c.memLimit, "ingest-gomemlimit", "100MiB", "GOMEMLIMIT of the ingest process (the Go runtime's soft heap limit; empty: none)")
	return c, fs.Parse(args)
}
