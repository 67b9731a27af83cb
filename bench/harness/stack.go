package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// chosen below the kernel's ephemeral range and never the same twice in
// a run. A port from that range (what ":0" gives) can be taken by any
// outgoing connection between this check and the bind of the process it
// is for: make chaos on three brokers lost its baseline row to a
// dispatcher's --health-addr "address already in use".
func FreePort() (int, error) {
	lo := ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		if lo-portsBase < 1000 {
			break
		}
		p := portsBase + rand.IntN(lo-portsBase)
		if handedOut[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		handedOut[p] = true
		return p, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// portsBase is the lowest port FreePort hands out: above the harness's
// Kafka ports (19500-19999), below the kernel's ephemeral range.
const portsBase = 20000

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{} // never twice in one run
)

// ephemeralLow is the first port of the kernel's ephemeral range, from
// which outgoing connections take their local ports (32768 when it
// cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}
