package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/padlock-go/padlock"
)

// The console's timeline in a real browser, through a scripted incident:
// a held name shows a bar for its holder; a waiter shows as "1 waiting"
// on the name's row; a force release from the page ends the bar in an
// orange cross and the waiter's bar follows; and a holder that is paused
// (a padlock run process stopped with SIGSTOP, so that it renews nothing)
// loses its lease, and its bar ends in a red cross, counted as expired.
// The contention chart counts the acquisitions, the waiter and the two
// holds that ended badly. A click on a name opens its detail: its holds
// with their tokens and how each ended, and who holds it now. The page's screenshot is saved as console-timeline.png (in
// $PADLOCK_SCREENSHOT_DIR if set).
func TestConsoleTimelineInBrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := startEtcd(t, ctx)
	_, srv := serveConsole(t, ctx, url, true)
	bctx := openPage(t, ctx, srv.URL+"/", 1100, 700)
	row := func(name string) string { return `#timeline g.row[data-name="` + name + `"]` }

	// A holder, then a waiter behind it.
	// Leases long enough that no renewal comes late on a loaded machine
	// (openT): the only hold that may expire is the paused one.
	a, b := openT(t, ctx, url), openT(t, ctx, url)
	first, err := a.Lock(padlock.WithOwner(ctx, "nightly"), "web/report")
	if err != nil {
		t.Fatal(err)
	}
	waitPresent(t, bctx, row("web/report")+` rect.bar.open[data-token="`+strconv.FormatUint(first.Token(), 10)+`"]`)
	next := make(chan *padlock.Lock, 1)
	go func() {
		lk, err := b.Lock(ctx, "web/report")
		if err != nil {
			t.Error(err)
		}
		next <- lk
	}()
	waitContains(t, bctx, row("web/report")+` text.waiters`, "1 waiting")

	// Force-released from the page itself (its token, its origin).
	force := `fetch("unlock", {method: "POST", headers: {"X-Padlock-CSRF": document.querySelector("meta[name=csrf]").content,
		"Content-Type": "application/json"}, body: JSON.stringify({name: "web/report"})}).then(r => r.status)`
	if status, err := chromedp.Run(bctx, chromedp.Evaluate[int](force, chromedp.EvalAwaitPromise)); err != nil || status != 200 {
		t.Fatalf("force unlock from the page: status %d, %v", status, err)
	}
	second := <-next
	if second == nil {
		t.FailNow()
	}
	defer second.Unlock(ctx)
	waitPresent(t, bctx, row("web/report")+` path.mark.forced[data-token="`+strconv.FormatUint(first.Token(), 10)+`"]`)
	waitPresent(t, bctx, row("web/report")+` rect.bar.open[data-token="`+strconv.FormatUint(second.Token(), 10)+`"]`)

	// A paused holder: padlock run, stopped, renews nothing; its 2s lease
	// runs out on the server.
	run := exec.CommandContext(ctx, os.Args[0])
	run.Env = append(os.Environ(), argsEnv+"="+strings.Join([]string{"run", "--url", url, "--ttl", "2s", "--owner", "batch", "web/batch", "--", "sleep", "60"}, "\n"))
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { run.Process.Kill(); run.Wait() }()
	waitPresent(t, bctx, row("web/batch")+` rect.bar.open`)
	if err := run.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitPresent(t, bctx, row("web/batch")+` path.mark.lost`)
	waitContains(t, bctx, "#counters", "1 forced, 1 expired (lost)")
	waitPresent(t, bctx, `#history tr.ev-expired`)

	// The contention chart: the three holds acquired, the waiter that
	// queued behind the first, and the two holds that ended badly (the
	// forced one, the lost one).
	sum := func(sel string) string {
		return `[...document.querySelectorAll(` + strconv.Quote(sel) + `)].reduce((n, e) => n + Number(e.dataset.count), 0)`
	}
	waitTrue(t, bctx, "three acquisitions in the chart", sum("#contention rect.acq")+` >= 3`)
	waitTrue(t, bctx, "the waiter in the chart", `document.querySelector('#contention circle.wait[data-waiters="1"]') !== null`)
	waitTrue(t, bctx, "the forced and the lost hold in the chart", sum("#contention path.loss")+` >= 2`)

	// The detail of a name, opened from its row's label: the forced hold
	// and the one after it, with their tokens, and who holds it now.
	// The click is dispatched in the page: the timeline is drawn anew on
	// every look, so a node found by one call may be gone by the next.
	click := `(() => { const e = document.querySelector(` + strconv.Quote(row("web/report")+` text.label`) + `);
		if (!e) return false; e.dispatchEvent(new MouseEvent("click", {bubbles: true})); return true; })()`
	if ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](click)); err != nil || !ok {
		t.Fatalf("clicking the name's label: found %v, %v", ok, err)
	}
	tok := func(lk *padlock.Lock) string { return strconv.FormatUint(lk.Token(), 10) }
	waitContains(t, bctx, "#detail-name", "web/report")
	waitPresent(t, bctx, `#detail-history tr[data-token="`+tok(first)+`"] td.end-force-unlocked`)
	waitPresent(t, bctx, `#detail-history tr[data-token="`+tok(second)+`"] td.end-held`)
	waitContains(t, bctx, "#detail-now", "token "+tok(second))
	waitContains(t, bctx, "#detail-now", "0 waiting")

	// The incident took seconds: show the last 30 of them.
	zoom := `const w = document.getElementById("window"); w.value = "30000"; w.dispatchEvent(new Event("change")); w.value`
	if v, err := chromedp.Run(bctx, chromedp.Evaluate[string](zoom)); err != nil || v != "30000" {
		t.Fatalf("choosing the 30s window: %q, %v", v, err)
	}
	waitContains(t, bctx, "#timeline text.axis", "now")
	saveScreenshot(t, bctx, "console-timeline.png")
}

// waitTrue waits until the page's expression js is true, bounded by a
// minute: a condition polled in the browser, as the page updates itself.
func waitTrue(t *testing.T, bctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		tctx, cancel := context.WithTimeout(bctx, 5*time.Second)
		ok, err := chromedp.Run(tctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %s (%s: %v, %v)", what, js, ok, err)
		}
		time.Sleep(50 * time.Millisecond) // the next look
	}
}

// waitPresent waits until the page has an element sel, bounded by a minute.
func waitPresent(t *testing.T, bctx context.Context, sel string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(bctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.WaitReady(chromedp.CSS(sel))); err != nil {
		hctx, cancel := context.WithTimeout(bctx, 5*time.Second)
		defer cancel()
		events, _ := readText(hctx, "#history tbody", "textContent")
		t.Fatalf("%s never appeared on the page: %v (events shown: %q)", sel, err, events)
	}
}

// waitContains waits until the element sel's text contains want: a
// condition polled in the browser, bounded by a minute.
func waitContains(t *testing.T, bctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var got string
	for {
		tctx, cancel := context.WithTimeout(bctx, 5*time.Second)
		var err error
		got, err = readText(tctx, sel, "textContent") // SVG text has no innerText
		cancel()
		if err == nil && strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			hctx, cancel := context.WithTimeout(bctx, 5*time.Second)
			defer cancel()
			events, _ := readText(hctx, "#history tbody", "textContent")
			t.Fatalf("%s shows %q (err %v), want it to contain %q (events shown: %q)", sel, got, err, want, events)
		}
		time.Sleep(50 * time.Millisecond) // the next look; the page updates itself
	}
}

// readText reads the property prop (textContent or innerText) of the
// first element sel in one evaluation in the page. Finding the node and
// reading it in two protocol requests fails ("No node with given id found")
// whenever the page redraws it in between, and a panel redrawn at every
// update lost that race for a whole minute on a loaded machine.
func readText(ctx context.Context, sel, prop string) (string, error) {
	js := `(() => { const e = document.querySelector(` + strconv.Quote(sel) + `);
		if (e === null) throw new Error("no element " + ` + strconv.Quote(sel) + `);
		return e.` + prop + `; })()`
	return chromedp.Run(ctx, chromedp.Evaluate[string](js))
}

// openTTL opens a Locker on url whose holds have the lease ttl.
func openTTL(t *testing.T, ctx context.Context, url string, ttl time.Duration) *padlock.Locker {
	t.Helper()
	l, err := padlock.Open(ctx, url, padlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
