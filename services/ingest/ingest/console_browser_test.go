package ingest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
	r.start(WithConsoleListener(ln))
	r.produceHistory(6, time.Now().Add(-time.Minute))
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
	step("filter the log to ep_a's delivered deliveries",
		chromedp.Navigate(base+"/deliveries?endpoint=ep_a"),
		chromedp.WaitVisible(chromedp.CSS("#filters")),
		chromedp.SetValue(chromedp.CSS("#state"), "delivered"),
		chromedp.Click(chromedp.CSS("#apply")),
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
