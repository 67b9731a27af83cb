package harness

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

// Kafka is the Apache Kafka 4.4 that scripts/kafka.sh runs for one
// harness: one node or three (KRaft, every node broker and controller),
// on ports and a data directory of its own so it never meets another
// engineer's broker.
type Kafka struct {
	RepoDir                       string // repository root (scripts/kafka.sh)
	Dir                           string // data directory, wiped by Up; relative to RepoDir unless absolute
	Port, ControllerPort, TLSPort int
	Nodes                         int    // 0 or 1: one node
	Heap                          string // JVM heap options, if not kafka.sh's default

	bootstrap string
}

func (k *Kafka) env() []string {
	dir := k.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(k.RepoDir, dir)
	}
	env := []string{
		"HOOKLINE_KAFKA_NODES=" + strconv.Itoa(max(k.Nodes, 1)),
		"HOOKLINE_KAFKA_PORT=" + strconv.Itoa(k.Port),
		"HOOKLINE_KAFKA_CONTROLLER_PORT=" + strconv.Itoa(k.ControllerPort),
		"HOOKLINE_KAFKA_TLS_PORT=" + strconv.Itoa(k.TLSPort),
		"HOOKLINE_KAFKA_DIR=" + dir,
	}
	if k.Heap != "" {
		env = append(env, "HOOKLINE_KAFKA_HEAP="+k.Heap)
	}
	return env
}

// Up starts Kafka once and returns its bootstrap address.
func (k *Kafka) Up(ctx context.Context) (string, error) {
	if k.bootstrap != "" {
		return k.bootstrap, nil
	}
	out, err := k.script(ctx, "up")
	if err != nil {
		_, _ = k.script(context.WithoutCancel(ctx), "down")
		return "", err
	}
	fields := strings.Fields(out)
	if len(fields) == 0 {
		return "", errors.New("kafka.sh up printed no bootstrap address")
	}
	k.bootstrap = fields[len(fields)-1]
	return k.bootstrap, nil
}

// Down stops Kafka if Up started it.
func (k *Kafka) Down() error {
	if k.bootstrap == "" {
		return nil
	}
	k.bootstrap = ""
	_, err := k.script(context.Background(), "down")
	return err
}

// Kill9 kill -9s node n (1-based); Start brings it back on its data
// (n = 0: every node).
func (k *Kafka) Kill9(ctx context.Context, n int) error {
	_, err := k.script(ctx, "kill", strconv.Itoa(n))
	return err
}

// Start starts node n again on its data (n = 0: every node).
func (k *Kafka) Start(ctx context.Context, n int) error {
	_, err := k.script(ctx, "start", strconv.Itoa(n))
	return err
}

func (k *Kafka) script(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(k.RepoDir, "scripts/kafka.sh")}, args...)...)
	cmd.Env = append(os.Environ(), k.env()...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("kafka.sh %s: exit %d", strings.Join(args, " "), ee.ExitCode())
		}
		return "", fmt.Errorf("kafka.sh %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
