package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envClients names the languages TestPolyglotClients runs, e.g.
// "python,node,java"; unset, it is skipped. make test-clients builds the
// clients (make clients) and bin/hookline first and sets it.
const envClients = "HOOKLINE_TEST_CLIENTS"

// clientRunTimeout bounds one example's run: a JVM's start, a client's
// retries and a consumer's group join on a busy machine included.
const clientRunTimeout = 2 * time.Minute

// polyglotExample is how to run one language's two examples from the
// repository root; each takes its extra arguments at the end.
type polyglotExample struct {
	publish, results func(root string) ([]string, error)
}

var polyglotExamples = map[string]polyglotExample{
	"python": {
		publish: fixedArgv("bin/clients/python/venv/bin/python", "clients/python/publish.py"),
		results: fixedArgv("bin/clients/python/venv/bin/python", "clients/python/results.py"),
	},
	"node": {
		publish: fixedArgv("node", "clients/node/publish.js"),
		results: fixedArgv("node", "clients/node/results.js"),
	},
	"java": {
		publish: javaArgv("dev.hookline.examples.Publish"),
		results: javaArgv("dev.hookline.examples.Results"),
	},
}

func fixedArgv(argv ...string) func(string) ([]string, error) {
	return func(string) ([]string, error) { return argv, nil }
}

// javaArgv runs a main class on the classpath Maven wrote for the build.
func javaArgv(class string) func(string) ([]string, error) {
	return func(root string) ([]string, error) {
		cp, err := os.ReadFile(filepath.Join(root, "clients/java/target/classpath.txt"))
		if err != nil {
			return nil, fmt.Errorf("%w (make clients-java writes it)", err)
		}
		return []string{"java", "-cp", "clients/java/target/classes:" + strings.TrimSpace(string(cp)), class}, nil
	}
}

var (
	publishedLine = regexp.MustCompile(`(?m)^event (evt_\w+) published with idempotency key (\S+)$`)
	deliveredLine = regexp.MustCompile(`(?m)^delivery (dlv_\w+) DELIVERY_STATE_DELIVERED attempts=1$`)
)

// TestPolyglotClients runs the Python, Node and Java examples of clients/
// against a live Hookline (bin/hookline dev, whose embedded Kafka they
// read; or, with HOOKLINE_TEST_KAFKA naming a real Kafka, bin/ingest,
// bin/dispatcher and bin/scheduler on it): each language's client creates an endpoint, publishes through a
// proxy that fails the first three tries (UNAVAILABLE with a retry
// pushback, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED) and follows the
// delivery to a receiver here; its results consumer then finds that
// delivery on hookline.results, read_committed.
func TestPolyglotClients(t *testing.T) {
	langs := os.Getenv(envClients)
	if langs == "" {
		t.Skipf("set %s=python,node,java to run the clients of clients/ (make test-clients)", envClients)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	hl := startLiveHookline(t, root)
	rx := newWebhookRecorder(t)
	proxy := newFlakyProxy(t, hl.grpcAddr)

	for _, lang := range strings.Split(langs, ",") {
		ex, ok := polyglotExamples[lang]
		if !ok {
			t.Fatalf("%s: no examples for %q", envClients, lang)
		}
		var deliveryID string
		passed := t.Run(lang+"/client", func(t *testing.T) {
			argv, err := ex.publish(root)
			if err != nil {
				t.Fatal(err)
			}
			out := runExample(t, root, argv, map[string]string{
				"HOOKLINE_ADDR":         proxy.addr,
				"HOOKLINE_API_KEY":      hl.apiKey,
				"HOOKLINE_RECEIVER_URL": rx.url + "/" + lang,
			})
			pub := publishedLine.FindStringSubmatch(out)
			del := deliveredLine.FindStringSubmatch(out)
			if pub == nil || del == nil {
				t.Fatalf("the output names no published event and no delivered delivery:\n%s", out)
			}
			eventID, key := pub[1], pub[2]
			checkRetries(t, proxy.triesOf(key), eventID)
			if got := rx.eventsAt("/" + lang); !slices.Contains(got, eventID) {
				t.Fatalf("receiver /%s got webhook-ids %v, not %s", lang, got, eventID)
			}
			deliveryID = del[1]
		})
		fmt.Printf("%s client: %s\n", lang, verdict(passed))

		passed = t.Run(lang+"/consumer", func(t *testing.T) {
			if deliveryID == "" {
				t.Fatal("the client delivered nothing to look for")
			}
			argv, err := ex.results(root)
			if err != nil {
				t.Fatal(err)
			}
			out := runExample(t, root, append(argv, deliveryID), map[string]string{
				"HOOKLINE_KAFKA_BROKERS": hl.kafkaAddr,
				"HOOKLINE_RESULTS_TOPIC": hl.resultsTopic,
				"HOOKLINE_RESULTS_GROUP": "polyglot-" + lang + "-" + randomHex(4),
				"HOOKLINE_WAIT_SECONDS":  "90",
			})
			want := regexp.MustCompile(`(?m)^` + deliveryID + ` attempt=1 state=DELIVERY_STATE_DELIVERED class=OUTCOME_CLASS_SUCCESS status=204 `)
			if !want.MatchString(out) {
				t.Fatalf("the consumer did not print %s delivered:\n%s", deliveryID, out)
			}
		})
		fmt.Printf("%s consumer: %s\n", lang, verdict(passed))
	}
}

// checkRetries checks that gRPC itself retried the publish by the
// service-config policy: four tries with one idempotency key, numbered by
// grpc-previous-rpc-attempts, the first retry after the server's pushback,
// and the try that got through answered with the event the lost first try
// had created.
func checkRetries(t *testing.T, tries []publishTry, eventID string) {
	t.Helper()
	if len(tries) != len(flakyFailures)+1 {
		t.Fatalf("the proxy saw %d tries with the printed idempotency key, want %d (3 failed, 1 passed)", len(tries), len(flakyFailures)+1)
	}
	for i, try := range tries {
		t.Logf("try %d at +%v, grpc-previous-rpc-attempts %q", i+1, try.at.Sub(tries[0].at).Round(time.Millisecond), try.previous)
		if want := fmt.Sprint(i); i > 0 && try.previous != want {
			t.Errorf("try %d: grpc-previous-rpc-attempts %q, want %q (a retry by gRPC's policy)", i+1, try.previous, want)
		}
	}
	if gap := tries[1].at.Sub(tries[0].at); gap < flakyPushback*9/10 {
		t.Errorf("first retry %v after the first try: the server's pushback of %v was not honoured", gap, flakyPushback)
	}
	if first, last := tries[0].eventID, tries[len(tries)-1].eventID; first != eventID || last != eventID {
		t.Errorf("lost first try created %s, the retry answered %s, the client printed %s: want one event", first, last, eventID)
	}
}

func verdict(passed bool) string {
	if passed {
		return "ok"
	}
	return "FAIL"
}

// runExample runs argv in root with env added, bounded in time, and
// returns its standard output; it fails the test when the run fails.
func runExample(t *testing.T, root string, argv []string, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), clientRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s (%v):\n%s%s", strings.Join(argv[len(argv)-1:], " "), time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", argv[0], err, stderr.String())
	}
	return stdout.String()
}

// webhookRecorder is a receiver that answers 204 and keeps each request's
// webhook-id by path.
type webhookRecorder struct {
	url string
	mu  sync.Mutex
	ids map[string][]string
}

func newWebhookRecorder(t *testing.T) *webhookRecorder {
	r := &webhookRecorder{ids: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.ids[req.URL.Path] = append(r.ids[req.URL.Path], req.Header.Get("webhook-id"))
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// eventsAt returns the webhook-ids received at path.
func (r *webhookRecorder) eventsAt(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids[path]...)
}
