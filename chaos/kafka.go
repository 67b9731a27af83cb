package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// cluster is the Apache Kafka 4.4 that scripts/kafka.sh runs for chaos:
// one node or three, on ports and a directory of its own (19500-19520,
// /tmp) so it never meets another engineer's broker.
type cluster struct {
	cfg       config
	bootstrap string
}

func (c *cluster) env() []string {
	return []string{
		"HOOKLINE_KAFKA_NODES=" + strconv.Itoa(c.cfg.Nodes),
		"HOOKLINE_KAFKA_PORT=" + strconv.Itoa(c.cfg.KafkaPort),
		"HOOKLINE_KAFKA_CONTROLLER_PORT=" + strconv.Itoa(c.cfg.KafkaPort+1),
		"HOOKLINE_KAFKA_TLS_PORT=" + strconv.Itoa(c.cfg.KafkaPort+2),
		"HOOKLINE_KAFKA_DIR=" + c.cfg.KafkaDir,
		"HOOKLINE_KAFKA_HEAP=-Xms128m -Xmx512m",
	}
}

func (c *cluster) up(ctx context.Context) (string, error) {
	if c.bootstrap != "" {
		return c.bootstrap, nil
	}
	out, err := c.script(ctx, "up")
	if err != nil {
		_, _ = c.script(context.WithoutCancel(ctx), "down")
		return "", fmt.Errorf("kafka.sh up: %w", err)
	}
	lines := strings.Fields(strings.TrimSpace(out))
	if len(lines) == 0 {
		return "", errors.New("kafka.sh up printed no bootstrap address")
	}
	c.bootstrap = lines[len(lines)-1]
	return c.bootstrap, nil
}

func (c *cluster) down() {
	if c.bootstrap == "" {
		return
	}
	c.bootstrap = ""
	_, _ = c.script(context.Background(), "down")
}

// kill9 kill -9s broker node n (1-based); start brings it back on its data.
func (c *cluster) kill9(ctx context.Context, n int) error {
	_, err := c.script(ctx, "kill", strconv.Itoa(n))
	return err
}

func (c *cluster) start(ctx context.Context, n int) error {
	_, err := c.script(ctx, "start", strconv.Itoa(n))
	return err
}

func (c *cluster) script(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(c.cfg.RepoDir, "scripts/kafka.sh")}, args...)...)
	cmd.Env = append(os.Environ(), c.env()...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("kafka.sh %s: exit %d", strings.Join(args, " "), ee.ExitCode())
		}
		return "", err
	}
	return string(out), nil
}
