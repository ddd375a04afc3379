package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/padlock-go/padlock"
)

// The console in a real browser (headless Chromium, driven over the
// DevTools protocol): a lock taken by the test appears on the page, moves
// to its next holder on a hand-off, and disappears on release, pushed by
// the server with no reload. The test saves a screenshot of the page while
// the lock is held (in $PADLOCK_SCREENSHOT_DIR if set).
func TestConsoleInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	_, srv := serveConsole(t, ctx, url, false)
	bctx := openPage(t, ctx, srv.URL+"/", 1100, 500)

	a, b := openT(t, ctx, url), openT(t, ctx, url)
	row := `#holders tr[data-name="web/report"]`
	tokenCell := row + ` td:nth-child(3)`
	lk, err := a.Lock(padlock.WithOwner(ctx, "nightly"), "web/report")
	if err != nil {
		t.Fatal(err)
	}
	waitText(t, bctx, tokenCell, strconv.FormatUint(lk.Token(), 10))
	waitText(t, bctx, row+` td:nth-child(2)`, "writer") // the kind

	saveScreenshot(t, bctx, "console.png")

	res := make(chan *padlock.Lock, 1)
	go func() {
		next, err := b.Lock(ctx, "web/report")
		if err != nil {
			t.Error(err)
		}
		res <- next
	}()
	waitText(t, bctx, row+` td:nth-child(9)`, "1") // the waiter, counted
	if err := lk.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-res
	waitText(t, bctx, tokenCell, strconv.FormatUint(next.Token(), 10))
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancelWait := context.WithTimeout(bctx, 30*time.Second)
	defer cancelWait()
	if _, err := chromedp.Run(wctx, chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("the released lock stayed on the page: %v", err)
	}
}

// waitText waits until the element sel shows want: a condition polled in
// the browser, bounded by a minute, as waitPresent and waitContains are (a
// rehearsal under load did not see the first hold within 30s).
func waitText(t *testing.T, bctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var got string
	for {
		tctx, cancel := context.WithTimeout(bctx, 5*time.Second)
		var err error
		got, err = readText(tctx, sel, "innerText")
		cancel()
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s shows %q (err %v), want %q", sel, got, err, want)
		}
		time.Sleep(50 * time.Millisecond) // the next look; the page updates itself
	}
}

// chromium returns the path of a Chromium binary, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// openPage opens url in headless Chromium (a window of w×h), for as long
// as the test runs; it fails the test in CI when Chromium is missing, and
// skips it elsewhere.
func openPage(t *testing.T, ctx context.Context, url string, w, h int) context.Context {
	t.Helper()
	chrome := chromium()
	if chrome == "" {
		if os.Getenv("PADLOCK_REQUIRE_SERVERS") == "1" {
			t.Fatal("chromium is not installed (scripts/test installs the Debian package)")
		}
		t.Skip("chromium is not installed")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.WindowSize(w, h),
		// Chromium leaves a directory for its singleton socket in $TMPDIR
		// (/tmp/org.chromium.Chromium.*) at every start; the test's own
		// temporary directory goes with the test.
		chromedp.Env("TMPDIR="+t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if _, err := chromedp.Run(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	return bctx
}

// saveScreenshot saves the page's screenshot as name, in
// $PADLOCK_SCREENSHOT_DIR if set (docs/ renders the docs' pictures).
func saveScreenshot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("PADLOCK_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, name)
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}
