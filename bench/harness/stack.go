package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hookline/hookline/platform/keyring"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// NewAPIKey makes a key for tenant with `hookline apikey new`, as an
// operator would, and returns the key and its --api-keys entry.
func NewAPIKey(ctx context.Context, hookline, tenant string) (key, entry string, err error) {
	out, err := exec.CommandContext(ctx, hookline, "apikey", "new", "--tenant", tenant).Output()
	if err != nil {
		return "", "", fmt.Errorf("hookline apikey new: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "key:"); ok {
			key = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "entry:"); ok {
			entry = strings.TrimSpace(v)
		}
	}
	if key == "" || entry == "" {
		return "", "", fmt.Errorf("hookline apikey new printed no key or entry: %q", out)
	}
	return key, entry, nil
}

// SecretsKeyFile makes the --secrets-key-file that a stack's ingest and
// dispatchers share, with one fresh key, as dir/name (kept if it exists),
// and returns its path.
func SecretsKeyFile(dir, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	_, err := keyring.CreateFile(path, time.Now())
	return path, err
}

// WaitServing waits until ingest's gRPC health on addr says SERVING (it
// has read the endpoint configuration from Kafka), at most limit,
// failing early if one of procs exits.
func WaitServing(ctx context.Context, addr string, limit time.Duration, procs ...*Proc) error {
	ctx, cancel := Exited(ctx, procs...)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, limit)
	defer cancelT()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for {
		st, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err == nil {
			for {
				m, rerr := st.Recv()
				if rerr != nil {
					err = rerr
					break
				}
				if m.GetStatus() == healthpb.HealthCheckResponse_SERVING {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for ingest on %s to serve: %w", addr, context.Cause(ctx))
		}
		if status.Code(err) != codes.Unavailable {
			return fmt.Errorf("health of ingest on %s: %w", addr, err)
		}
		// Unavailable: the connection dropped mid-stream; WaitForReady
		// blocks the next Watch until it is back.
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
