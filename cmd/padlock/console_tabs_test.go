package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleTabsInBrowser: `padlock serve` given two backends shows a tab
// per backend in a real browser (Chromium, headless), each tab with its
// own backend's holds only; a click on the other tab shows the other's.
// The page's screenshot is saved as console-tabs.png (in
// $PADLOCK_SCREENSHOT_DIR if set).
func TestConsoleTabsInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	urls := []string{startEtcd(t, ctx), "mem://console-tabs"}
	d, err := newDeck(ctx, urls, "web/", 50*time.Millisecond, true)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.handler())
	rctx, stop := context.WithCancel(ctx)
	for _, c := range d.consoles {
		go c.run(rctx)
	}
	t.Cleanup(func() { stop(); srv.Close(); d.close() })

	onEtcd, onMem := openT(t, ctx, urls[0]), openT(t, ctx, urls[1])
	for _, name := range []string{"web/orders/4711", "web/nightly-report"} {
		if _, err := onEtcd.Lock(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := onMem.RLock(ctx, "web/cache-warm"); err != nil {
		t.Fatal(err)
	}

	bctx := openPage(t, ctx, srv.URL+"/?backend=1", 1100, 700)
	waitContains(t, bctx, "#holders tbody", "web/cache-warm")
	tabs := func() (current, all string) {
		t.Helper()
		var err error
		if current, err = readText(bctx, `#backends a[aria-current="page"]`, "textContent"); err != nil {
			t.Fatal(err)
		}
		if all, err = readText(bctx, `#backends`, "textContent"); err != nil {
			t.Fatal(err)
		}
		return current, all
	}
	current, all := tabs()
	if current != "mem://console-tabs" || !strings.Contains(all, strings.TrimSuffix(redacted(urls[0]), "/run")) {
		t.Fatalf("tabs %q with %q selected, want both backends with mem://console-tabs selected", all, current)
	}
	if got := holdersText(t, bctx); strings.Contains(got, "web/orders") {
		t.Errorf("the mem:// tab lists etcd's holds: %q", got)
	}

	// The etcd tab, by a click.
	if _, err := chromedp.Run(bctx, chromedp.Click(`#backends a[data-backend="0"]`)); err != nil {
		t.Fatal(err)
	}
	waitContains(t, bctx, "#holders tbody", "web/orders/4711")
	waitContains(t, bctx, "#holders tbody", "web/nightly-report")
	if current, _ := tabs(); current != redacted(urls[0]) {
		t.Errorf("after the click the selected tab is %q, want %q", current, redacted(urls[0]))
	}
	if got := holdersText(t, bctx); strings.Contains(got, "web/cache-warm") {
		t.Errorf("the etcd tab lists mem://'s holds: %q", got)
	}

	saveScreenshot(t, bctx, "console-tabs.png")
}

// holdersText is the text of the page's table of holds.
func holdersText(t *testing.T, bctx context.Context) string {
	t.Helper()
	got, err := readText(bctx, "#holders tbody", "textContent")
	if err != nil {
		t.Fatal(err)
	}
	return got
}
