package ingest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	hooklinev1 "github.com/hookline/hookline/gen/hookline/v1"
	hkafka "github.com/hookline/hookline/platform/kafka"
	"github.com/hookline/hookline/sdk/ids"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// chromium finds the browser: Debian's chromium package (make test
// installs it). Without it the test is skipped, unless
// HOOKLINE_REQUIRE_CHROMIUM is set (make test sets it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("HOOKLINE_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium not found; install it: apt-get install -y chromium")
	}
	t.Skip("chromium not found (apt-get install -y chromium); make test installs it")
	return ""
}

// repoBin returns the repository's bin/ directory, where CI keeps the
// screenshot.
func repoBin(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return filepath.Join(d, "bin")
		}
	}
	t.Fatal("no go.work above " + dir)
	return ""
}

func TestConsoleInChromiumShowsTheTimelineOfADeliveryThatFailedThenSucceeded(t *testing.T) {
	browser := chromium(t)
	r := newHistoryRig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The endpoints as the store holds them, each in the state its
	// deliveries show: ep_a recovers after a retry, ep_b answers 410 to
	// everything (failing; outage mode never holds permanent failures),
	// ep_c fails transiently and its deliveries are held past their due
	// time (outage mode).
	r.start(WithConsoleListener(ln))
	r.produceEndpoints("ep_a", "ep_b", "ep_c")
	r.produceHistory(6, time.Now().Add(-time.Minute))
	held := r.produceOutage("ep_c", 3, time.Now().Add(-30*time.Second))
	base := "http://" + ln.Addr().String()

	alloc, cancel := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	// Start the browser on ctx itself: the steps' shorter contexts
	// would otherwise own it, and close it when they end.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			page, perr := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("browser, %s: %v; the page (%v):\n%s", what, err, perr, page)
		}
	}
	get := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatalf("browser, %s: %v", what, err)
		}
		return v
	}
	step("sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#api_key")),
		chromedp.SendKeys(chromedp.CSS("#api_key"), historyTestKey),
		chromedp.Click(chromedp.CSS("#sign_in")),
		chromedp.WaitVisible(chromedp.CSS("#endpoints")))
	health, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll("#endpoints tr.endpoint")).map(tr => [tr.dataset.id, tr.querySelector(".health").textContent]))`))
	if err != nil {
		t.Fatalf("browser, read the endpoints' health: %v", err)
	}
	if want := map[string]string{"ep_a": "active", "ep_b": "failing", "ep_c": "outage mode"}; fmt.Sprint(health) != fmt.Sprint(want) {
		t.Fatalf("endpoints labelled %v, want %v", health, want)
	}
	step("the log, newest first",
		chromedp.Navigate(base+"/deliveries"),
		chromedp.WaitVisible(chromedp.CSS("a.delivery-link")))
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("a.delivery-link").textContent`))
	if err != nil || first != held[len(held)-1] {
		t.Fatalf("the log's first row is %q (%v), want the newest delivery %s", first, err, held[len(held)-1])
	}
	step("open a held delivery",
		chromedp.Navigate(base+"/deliveries/"+held[0]),
		chromedp.WaitVisible(chromedp.CSS("#held")))
	heldText := get("read why it is held", chromedp.Text(chromedp.CSS("#held")))
	if !strings.Contains(heldText, "held: outage mode") {
		t.Fatalf("a delivery held in outage mode says %q", heldText)
	}
	step("filter the log to ep_a's delivered deliveries",
		chromedp.Navigate(base+"/deliveries?endpoint=ep_a"),
		chromedp.WaitVisible(chromedp.CSS("#filters")),
		chromedp.SetValue(chromedp.CSS("#state"), "delivered"),
		chromedp.Click(chromedp.CSS("#apply")),
		// The form's submit navigates: wait for the filtered page (its
		// state option is selected by the server), or the link found below
		// can be the unfiltered page's, gone by the click.
		chromedp.WaitReady(chromedp.CSS(`#state option[value="delivered"][selected]`)),
		chromedp.WaitVisible(chromedp.CSS("a.delivery-link")))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#deliveries tr td:nth-child(4)")).map(td => td.textContent)`))
	if err != nil {
		t.Fatalf("browser, read the log: %v", err)
	}
	step("open the first",
		chromedp.Click(chromedp.CSS("a.delivery-link")),
		chromedp.WaitVisible(chromedp.CSS("#timeline")))
	timeline := get("read the timeline", chromedp.Text(chromedp.CSS("#timeline")))
	state := get("read the state", chromedp.Text(chromedp.CSS("#state")))
	attempts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline tr.attempt").length`))
	if err != nil {
		t.Fatalf("browser, count attempts: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser, screenshot: %v", err)
	}
	for _, s := range rows {
		if s != "delivered" {
			t.Fatalf("the log filtered to delivered shows %q", rows)
		}
	}
	if state != "delivered" || attempts != 2 {
		t.Fatalf("timeline: state %q with %d attempts, want delivered after 2", state, attempts)
	}
	for _, want := range []string{"503", "transient", "120ms", "upstream unavailable", "retry_scheduled", "200", "delivered"} {
		if !strings.Contains(timeline, want) {
			t.Fatalf("timeline lacks %q:\n%s", want, timeline)
		}
	}
	payload := get("read the payload", chromedp.Text(chromedp.CSS("#payload")))
	if !strings.Contains(payload, `{"n":`) {
		t.Fatalf("the delivery page shows payload %q, want the event's JSON", payload)
	}
	if strings.Index(timeline, "503") > strings.Index(timeline, "200") {
		t.Fatalf("the failed attempt is not listed before the one that succeeded:\n%s", timeline)
	}
	bin := repoBin(t)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(bin, "console-timeline.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
}

// produceEndpoints writes an active endpoint record of tenant acme for
// each id.
func (r *historyRig) produceEndpoints(ids ...string) {
	t := r.t
	t.Helper()
	opts, err := r.kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, id := range ids {
		rec, err := hkafka.Record(r.topics.Endpoints, id, &hooklinev1.EndpointRecord{Version: 1, Endpoint: &hooklinev1.Endpoint{
			Id: id, TenantId: "acme", Url: "https://" + id + ".example/hooks", Status: hooklinev1.EndpointStatus_ENDPOINT_STATUS_ACTIVE}})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// produceOutage writes n deliveries to ep whose first attempt failed
// transiently (503) with a retry due a second later, which never came:
// the dispatcher holds them in outage mode (a hold writes no result). It
// returns their ids, oldest first.
func (r *historyRig) produceOutage(ep string, n int, at time.Time) []string {
	t := r.t
	t.Helper()
	opts, err := r.kafka.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	for i := range n {
		now := at.Add(time.Duration(i) * time.Second)
		d := &hooklinev1.Delivery{DeliveryId: ids.New(ids.Delivery, now), EventId: ids.New(ids.Event, now), TenantId: "acme", EndpointId: ep,
			EventType: "invoice.paid", Payload: []byte(`{"n":1}`), Attempt: 1, CreatedAt: timestamppb.New(now)}
		res := &hooklinev1.AttemptResult{DeliveryId: d.GetDeliveryId(), EventId: d.GetEventId(), TenantId: "acme", EndpointId: ep, EventType: d.GetEventType(),
			Attempt: 1, State: hooklinev1.DeliveryState_DELIVERY_STATE_RETRY_SCHEDULED, StatusCode: 503, Class: hooklinev1.OutcomeClass_OUTCOME_CLASS_TRANSIENT,
			StartedAt: timestamppb.New(now), NextAttemptAt: timestamppb.New(now.Add(time.Second))}
		for _, m := range []struct {
			topic string
			msg   proto.Message
		}{{r.topics.Deliveries, d}, {r.topics.Results, res}} {
			rec, err := hkafka.Record(m.topic, ep, m.msg)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, d.GetDeliveryId())
	}
	return out
}
