package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/padlock-go/padlock"
)

//go:embed console/index.html
var consoleFiles embed.FS

var indexPage = template.Must(template.ParseFS(consoleFiles, "console/index.html"))

// runServe runs the web console until interrupted.
func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	urls := urlsFlag(fs, "backend `URL` (default $PADLOCK_URL); repeat it to watch several backends in one console")
	listen := fs.String("listen", "127.0.0.1:7070", "address to serve on (loopback by default)")
	prefix := fs.String("prefix", "", "show only the locks whose names start with this")
	interval := fs.Duration("interval", 500*time.Millisecond, "how often to read the holders (where the backend pushes changes, as etcd does, also as they change)")
	allowUnlock := fs.Bool("allow-unlock", false, "offer force-unlock on the page (read-only otherwise)")
	var metricsURLs urlsValue
	fs.Var(&metricsURLs, "metrics", "an application's Prometheus `URL` that serves padlock's metrics; repeat it for several: the page charts acquisitions a second, waits (p50, p99) and holds lost per backend from them")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: padlock serve [--url URL]... [--listen ADDR] [--prefix P] [--interval D] [--allow-unlock] [--metrics URL]...

A web console: a timeline of each name's holds (losses and forced releases
marked, waiters counted), the detail of one name, the locks held now
(token, owner, host, pid, age, lease left, waiters), recent acquisitions,
hand-offs, releases and losses, pushed to the page as they happen; one tab
per backend when --url is given more than once; with --metrics, charts of
what the applications' own Lockers measured (acquisitions a second, how
long they waited, holds lost), read from their Prometheus endpoints;
/metrics (Prometheus) and /healthz on the same server.`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	if *interval <= 0 {
		return usageError{errors.New("serve needs a positive --interval")}
	}
	var apps *appMetrics
	if list := metricsURLs.list(); len(list) > 0 {
		var err error
		if apps, err = newAppMetrics(list, max(*interval, time.Second)); err != nil {
			return err
		}
	}
	d, err := newDeck(ctx, urls.list(), *prefix, *interval, *allowUnlock)
	if err != nil {
		return err
	}
	defer d.close()
	if apps != nil {
		d.apps = apps
		go apps.run(ctx)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second}
	for _, c := range d.consoles {
		go c.run(ctx)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "padlock: console on http://%s/\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// deck is the consoles of one padlock serve, one per backend URL, behind
// one page, one force-unlock token and one /metrics.
type deck struct {
	consoles    []*console
	prefix      string
	allowUnlock bool
	csrf        string // required in X-Padlock-CSRF on a force-unlock
	registry    *prometheus.Registry
	meters      *sdkmetric.MeterProvider
	apps        *appMetrics // the applications' metrics (--metrics), or nil
}

// console polls one backend's holders and pushes what changed to every
// open page.
type console struct {
	l           *padlock.Locker
	backend     string // the URL, redacted: the page's label
	prefix      string
	interval    time.Duration
	allowUnlock bool
	csrf        string
	seen        metric.Int64Counter // acquisitions and hand-offs observed
	attrBackend attribute.KeyValue  // padlock.backend on its instruments

	mu       sync.Mutex
	follows  bool // the backend pushes changes, and run follows them
	snap     snapshot
	held     map[holdKey]padlock.Holder // at the last look that read them
	heldAt   time.Time                  // when that look was
	history  []event                    // newest first
	counters counters
	// open are the spans of the holds held at the last look; spans the
	// ended ones of the last spanWindow, oldest first (the timeline's).
	open  map[holdKey]*span
	spans []span
	// load is what the looks of the last spanWindow found, oldest first.
	load []loadPoint
	// leases is the most lease left each held hold was seen with: its
	// lease's length as far as the console can tell (a renewal puts it
	// back there), against which the page shows what is left.
	leases map[holdKey]int64
	subs   map[chan snapshot]struct{}
	// forcedHere are the holds this console's page force-unlocked, until
	// a look at the holders finds them gone: known without the server's
	// record (ForcedReleases), which a backend may not keep.
	forcedHere map[holdKey]bool
	deck       *deck // the console's deck: its page, /metrics, and close
}

// holdKey identifies one hold: a forced release's record names the same.
type holdKey struct {
	name, id string
	token    uint64
}

func keyOf(h padlock.Holder) holdKey { return holdKey{h.Name, h.ID, h.Token} }

type snapshot struct {
	At       time.Time    `json:"at"`
	Error    string       `json:"error,omitempty"`
	Holders  []holderView `json:"holders"`
	History  []event      `json:"history"`
	Counters counters     `json:"counters"`
	// Spans are the holds of the last spanWindow, ended or not, oldest
	// first: the timeline.
	Spans []span `json:"spans"`
	// Load is what each look of the last spanWindow found, oldest first:
	// the contention chart's waiters.
	Load []loadPoint `json:"load"`
	// Follows says that the backend pushes changes (Locker.WatchHolders)
	// and the console reads the holders as they change; else it reads them
	// every IntervalMs only.
	Follows    bool  `json:"follows"`
	IntervalMs int64 `json:"interval_ms"`
	// Apps is what the applications' metrics say (--metrics), or nil.
	Apps *appView `json:"apps,omitempty"`
}

// loadPoint is a second's count of holds, of waiters (over every name,
// each name's waiters counted once) and of names with a waiter: the most
// that the looks of that second found.
type loadPoint struct {
	At        time.Time `json:"at"`
	Holds     int       `json:"holds"`
	Waiters   int       `json:"waiters"`
	Contended int       `json:"contended"`
}

// span is one hold over time, as the console saw it: from the look that
// first found it to the look that found it gone, and how it ended.
type span struct {
	Name   string     `json:"name"`
	Kind   string     `json:"kind"`
	Token  uint64     `json:"token"`
	Holder string     `json:"holder,omitempty"`
	From   time.Time  `json:"from"`
	To     *time.Time `json:"to,omitempty"`  // nil while held
	End    string     `json:"end,omitempty"` // handed off, released, force-unlocked, expired
}

// spanWindow is how far back the timeline goes; maxSpans bounds the ended
// spans kept (the oldest go first).
const (
	spanWindow = 15 * time.Minute
	maxSpans   = 5000
)

type holderView struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`            // as padlock holders shows it (kindsOf)
	Value   string `json:"value,omitempty"` // a leader's`
	Token   uint64 `json:"token"`
	Owner   string `json:"owner,omitempty"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	AgeMs   *int64 `json:"ageMs,omitempty"`
	LeftMs  *int64 `json:"leftMs,omitempty"`
	LeaseMs *int64 `json:"leaseMs,omitempty"` // the most left seen: the lease's length, as far as the console can tell
	Waiters int    `json:"waiters"`
}

type event struct {
	At     time.Time `json:"at"`
	Name   string    `json:"name"`
	Event  string    `json:"event"` // acquired, handed off, released, force-unlocked, expired
	Token  uint64    `json:"token"`
	Holder string    `json:"holder,omitempty"`
}

type counters struct {
	Acquired int64 `json:"acquired"`
	Handoffs int64 `json:"handoffs"`
	Released int64 `json:"released"`
	Forced   int64 `json:"forced"`
	Expired  int64 `json:"expired"` // holds gone with their lease run out: lost
}

const historyLen = 100

// newDeck opens a console on each of urls (at least one), sharing one
// force-unlock token, one meter provider (padlock.backend tells the
// consoles' instruments apart; each console's Locker reports its own
// instruments to it too) and one Prometheus registry.
func newDeck(ctx context.Context, urls []string, prefix string, interval time.Duration, allowUnlock bool) (*deck, error) {
	if len(urls) == 0 || slices.Contains(urls, "") {
		return nil, usageError{errors.New("needs --url or $PADLOCK_URL")}
	}
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	rand.Read(b)
	d := &deck{prefix: prefix, allowUnlock: allowUnlock, csrf: hex.EncodeToString(b), registry: reg,
		meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))}
	seen := map[string]bool{}
	for _, url := range urls {
		label := redacted(url)
		if seen[label] {
			d.close()
			return nil, usageError{fmt.Errorf("--url %s given twice", label)}
		}
		seen[label] = true
		c, err := d.open(ctx, url, interval)
		if err != nil {
			d.close()
			return nil, err
		}
		d.consoles = append(d.consoles, c)
	}
	return d, nil
}

// newConsole is a deck of one console, on url.
func newConsole(ctx context.Context, url, prefix string, interval time.Duration, allowUnlock bool) (*console, error) {
	d, err := newDeck(ctx, []string{url}, prefix, interval, allowUnlock)
	if err != nil {
		return nil, err
	}
	return d.consoles[0], nil
}

// open opens the console of one backend.
func (d *deck) open(ctx context.Context, url string, interval time.Duration) (*console, error) {
	if url == "" {
		return nil, usageError{errors.New("needs --url or $PADLOCK_URL")}
	}
	l, err := padlock.Open(ctx, url, padlock.WithMeterProvider(d.meters))
	if err != nil {
		return nil, asUsage(err)
	}
	c := &console{l: l, backend: redacted(url), prefix: d.prefix, interval: interval, allowUnlock: d.allowUnlock,
		csrf: d.csrf, held: map[holdKey]padlock.Holder{},
		subs: map[chan snapshot]struct{}{}, forcedHere: map[holdKey]bool{},
		open: map[holdKey]*span{}, leases: map[holdKey]int64{}, deck: d}
	c.attrBackend = attribute.String("padlock.backend", c.backend)
	m := d.meters.Meter("github.com/padlock-go/padlock/cmd/padlock")
	c.seen, _ = m.Int64Counter("padlock.console.events", metric.WithUnit("{event}"),
		metric.WithDescription("Changes the console saw: acquired, handed off, released, force-unlocked."))
	_, _ = m.Int64ObservableGauge("padlock.console.holders", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds at the console's last look: a lock's holder, each reader, each permit."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			o.Observe(int64(len(c.held)), metric.WithAttributes(c.attrBackend))
			return nil
		}))
	return c, nil
}

// close closes every console's Locker, then the meter provider.
func (d *deck) close() {
	for _, c := range d.consoles {
		c.l.Close()
	}
	d.meters.Shutdown(context.Background())
}

func (c *console) close() { c.deck.close() }

// pushGap is the shortest time between two looks that a backend's pushed
// changes start (--interval, if shorter): a hold that begins and ends
// within it can go unseen, and a busy prefix costs at most a look per gap.
const pushGap = 20 * time.Millisecond

// failedLookRetry is how soon a look that failed is made again, if the
// interval is longer: where changes are pushed, the interval may be long
// (an hour), and a look that failed after the last change pushed would
// otherwise leave the page on its error, and the holders it last knew,
// until the next change or the interval.
const failedLookRetry = time.Second

// run reads the holders every interval until ctx ends; where the backend
// pushes changes (Locker.WatchHolders: etcd), also as soon as they change,
// at most once every pushGap, so that a hold shorter than the interval is
// seen. Without the push (or once it ends) it only polls. A look that
// failed is made again within failedLookRetry.
func (c *console) run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	pushed, err := c.l.WatchHolders(ctx, c.prefix)
	if err != nil {
		pushed = nil // ErrUnsupported, or no watch: poll
	}
	c.mu.Lock()
	c.follows = pushed != nil
	c.mu.Unlock()
	gap := min(pushGap, c.interval)
	for {
		ok := c.poll(ctx)
		last := time.Now()
		var retry <-chan time.Time // nil: no retry
		var rt *time.Timer
		if !ok && c.interval > failedLookRetry {
			rt = time.NewTimer(failedLookRetry)
			retry = rt.C
		}
		more := c.next(ctx, t.C, retry, &pushed, last, gap)
		if rt != nil {
			rt.Stop()
		}
		if !more {
			return
		}
	}
}

// next waits for the next look: the ticker, the retry of a failed look,
// or a pushed change no sooner than gap after the last look. A push
// channel that closes is dropped (the console polls on). It reports false
// once ctx ends.
func (c *console) next(ctx context.Context, tick, retry <-chan time.Time, pushed *<-chan struct{}, last time.Time, gap time.Duration) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case <-retry:
			return true
		case _, ok := <-*pushed:
			if !ok {
				*pushed = nil
				c.mu.Lock()
				c.follows = false
				c.mu.Unlock()
				continue
			}
			if wait := gap - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return false
				case <-t.C:
				}
			}
			return true
		}
	}
}

// poll reads the holders once, records what changed since the last look,
// and pushes the new snapshot to every page. It reports whether the look
// succeeded. A hold that is gone was
// released by its holder, or force-unlocked if the server keeps a record
// of that (ForcedReleases, read after the holders, so a record written
// with or before the release is seen) or this console's page did it.
func (c *console) poll(ctx context.Context) bool {
	hs, err := c.l.Holders(ctx, c.prefix)
	forced := map[holdKey]bool{}
	if err == nil {
		var fs []padlock.ForcedRelease
		fs, err = c.l.ForcedReleases(ctx, c.prefix)
		if errors.Is(err, padlock.ErrUnsupported) {
			err = nil // only this page's own force-unlocks are known
		}
		for _, f := range fs {
			forced[holdKey{f.Name, f.ID, f.Token}] = true
		}
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	snap := snapshot{At: now, Holders: []holderView{}}
	if err != nil {
		snap.Error = err.Error()
		snap.Holders = c.snap.Holders // the last known, marked stale by the error
	} else {
		kinds := kindsOf(hs)
		kindOf := make(map[holdKey]string, len(hs))
		for i, h := range hs {
			kindOf[keyOf(h)] = kinds[i]
		}
		c.compare(ctx, now, hs, forced, kindOf)
		for i, h := range hs {
			v := view(h, kinds[i], now)
			if v.LeftMs != nil {
				k := keyOf(h)
				c.leases[k] = max(c.leases[k], *v.LeftMs)
				lease := c.leases[k]
				v.LeaseMs = &lease
			}
			snap.Holders = append(snap.Holders, v)
		}
		for k := range c.leases {
			if _, ok := c.held[k]; !ok {
				delete(c.leases, k)
			}
		}
		c.addLoad(now, hs)
	}
	snap.History = append([]event(nil), c.history...)
	snap.Counters = c.counters
	snap.Spans = c.timeline(now)
	snap.Load = slices.Clone(c.load)
	snap.Follows, snap.IntervalMs = c.follows, c.interval.Milliseconds()
	snap.Apps = c.deck.apps.current()
	c.snap = snap
	for ch := range c.subs {
		select { // one pending snapshot per page: a slow page gets the newest
		case <-ch:
		default:
		}
		ch <- snap
	}
	return err == nil
}

// compare records what changed between the holds of the last look and
// hs, one event per hold: a name can have several (readers, permits).
// A new hold of a name whose hold of the last look is gone is a hand-off
// from it (or, when that hold was force-unlocked, a force-unlock and an
// acquisition); any other new hold is acquired, any other gone hold
// released or force-unlocked. c.mu is held.
func (c *console) compare(ctx context.Context, now time.Time, hs []padlock.Holder, forced map[holdKey]bool, kindOf map[holdKey]string) {
	wasForced := func(k holdKey) bool { return forced[k] || c.forcedHere[k] }
	// How a gone hold ended, when no hand-off explains it: forced, or
	// expired when its lease may have run out by now as the server last
	// told it (Holder.Expires is the earliest the server lets it lapse,
	// so a hold that expired is never taken for released however late
	// this look comes), or when it had stopped renewing: a live holder
	// renews once a third of its lease has passed, so one last seen with
	// half of its lease or less left had stopped (paused, cut off,
	// crashed). Else released.
	ended := func(h padlock.Holder) string {
		if wasForced(keyOf(h)) {
			return "force-unlocked"
		}
		if !h.Expires.IsZero() {
			left, lease := h.Expires.Sub(c.heldAt).Milliseconds(), c.leases[keyOf(h)]
			if !h.Expires.After(now) || lease > 0 && 2*left <= lease {
				return "expired"
			}
		}
		return "released"
	}
	acquired := func(h padlock.Holder) {
		c.open[keyOf(h)] = &span{Name: h.Name, Kind: kindOf[keyOf(h)], Token: h.Token, Holder: who(h), From: now}
	}
	next := make(map[holdKey]padlock.Holder, len(hs))
	for _, h := range hs {
		next[keyOf(h)] = h
	}
	gone := map[string][]padlock.Holder{} // by name, in token order
	for _, h := range sortedHolds(c.held) {
		if _, ok := next[keyOf(h)]; !ok {
			gone[h.Name] = append(gone[h.Name], h)
		}
	}
	for _, h := range hs {
		if _, was := c.held[keyOf(h)]; was {
			continue
		}
		acquired(h)
		if g := gone[h.Name]; len(g) > 0 {
			prev := g[0]
			gone[h.Name] = g[1:]
			if end := ended(prev); end != "released" {
				c.closeSpan(prev, now, end)
				c.record(ctx, event{At: now, Name: h.Name, Event: end, Token: prev.Token, Holder: who(prev)})
				c.record(ctx, event{At: now, Name: h.Name, Event: "acquired", Token: h.Token, Holder: who(h)})
			} else {
				c.closeSpan(prev, now, "handed off")
				c.record(ctx, event{At: now, Name: h.Name, Event: "handed off", Token: h.Token, Holder: who(h)})
			}
			continue
		}
		c.record(ctx, event{At: now, Name: h.Name, Event: "acquired", Token: h.Token, Holder: who(h)})
	}
	for _, g := range gone {
		for _, h := range g {
			end := ended(h)
			c.closeSpan(h, now, end)
			c.record(ctx, event{At: now, Name: h.Name, Event: end, Token: h.Token, Holder: who(h)})
		}
	}
	c.held, c.heldAt = next, now
	for k := range c.forcedHere {
		if _, ok := next[k]; !ok {
			delete(c.forcedHere, k) // counted above, or never seen held
		}
	}
}

// closeSpan ends h's span at now, as end says; c.mu is held.
func (c *console) closeSpan(h padlock.Holder, now time.Time, end string) {
	k := keyOf(h)
	sp := c.open[k]
	if sp == nil {
		return
	}
	delete(c.open, k)
	sp.To, sp.End = &now, end
	c.spans = append(c.spans, *sp)
	if len(c.spans) > maxSpans {
		c.spans = slices.Delete(c.spans, 0, len(c.spans)-maxSpans)
	}
}

// addLoad records what the look at now found in hs, and forgets the looks
// older than spanWindow; c.mu is held. A name's waiters are counted once
// whatever the number of its holds (readers, permits each report them); a
// backend that cannot count them (Waiters < 0) adds none.
func (c *console) addLoad(now time.Time, hs []padlock.Holder) {
	waiting := map[string]int{}
	for _, h := range hs {
		waiting[h.Name] = max(waiting[h.Name], h.Waiters)
	}
	p := loadPoint{At: now, Holds: len(hs)}
	for _, n := range waiting {
		if n > 0 {
			p.Waiters += n
			p.Contended++
		}
	}
	if n := len(c.load); n > 0 && now.Sub(c.load[n-1].At) < time.Second {
		// Looks more often than a second apart share a point: the most
		// each found, so that a short spell of waiting is not lost.
		q := &c.load[n-1]
		q.Holds, q.Waiters, q.Contended = max(q.Holds, p.Holds), max(q.Waiters, p.Waiters), max(q.Contended, p.Contended)
		return
	}
	from := now.Add(-spanWindow)
	i, _ := slices.BinarySearchFunc(c.load, from, func(p loadPoint, t time.Time) int { return p.At.Compare(t) })
	c.load = append(slices.Delete(c.load, 0, i), p) // a point a second: at most the window's seconds
}

// timeline returns the spans of the last spanWindow, ended or not, oldest
// first; c.mu is held.
func (c *console) timeline(now time.Time) []span {
	from := now.Add(-spanWindow)
	i, _ := slices.BinarySearchFunc(c.spans, from, func(s span, t time.Time) int { return s.To.Compare(t) })
	c.spans = slices.Delete(c.spans, 0, i) // older than the window: gone
	out := make([]span, 0, len(c.spans)+len(c.open))
	out = append(out, c.spans...)
	for _, sp := range c.open {
		out = append(out, *sp)
	}
	slices.SortStableFunc(out, func(a, b span) int { return a.From.Compare(b.From) })
	return out
}

// sortedHolds lists holds by name, then token: events come in one order.
func sortedHolds(m map[holdKey]padlock.Holder) []padlock.Holder {
	out := make([]padlock.Holder, 0, len(m))
	for _, h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b padlock.Holder) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Token, b.Token), strings.Compare(a.ID, b.ID))
	})
	return out
}

// record adds an event; c.mu is held.
func (c *console) record(ctx context.Context, e event) {
	switch e.Event {
	case "acquired":
		c.counters.Acquired++
	case "handed off":
		c.counters.Acquired++
		c.counters.Handoffs++
	case "released":
		c.counters.Released++
	case "force-unlocked":
		c.counters.Forced++
	case "expired":
		c.counters.Expired++
	}
	c.seen.Add(ctx, 1, metric.WithAttributes(attrEvent(e.Event), c.attrBackend))
	c.history = append([]event{e}, c.history...)
	if len(c.history) > historyLen {
		c.history = c.history[:historyLen]
	}
}

func who(h padlock.Holder) string {
	s := h.Host
	if h.PID != 0 {
		s += fmt.Sprintf(" pid %d", h.PID)
	}
	if h.Owner != "" {
		s += " (" + h.Owner + ")"
	}
	return s
}

func view(h padlock.Holder, kind string, now time.Time) holderView {
	v := holderView{Name: h.Name, Kind: kind, Value: h.Value, Token: h.Token, Owner: h.Owner, Host: h.Host, PID: h.PID, Waiters: h.Waiters}
	if !h.Since.IsZero() {
		ms := now.Sub(h.Since).Milliseconds()
		v.AgeMs = &ms
	}
	if !h.Expires.IsZero() {
		ms := h.Expires.Sub(now).Milliseconds()
		v.LeftMs = &ms
	}
	return v
}

func (d *deck) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.index)
	mux.HandleFunc("GET /events", d.route((*console).events))
	mux.HandleFunc("POST /unlock", d.route((*console).unlock))
	mux.HandleFunc("GET /healthz", d.healthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{}))
	return mux
}

func (c *console) handler() http.Handler { return c.deck.handler() }

// pick is the console that the request's ?backend=N names (0 if none),
// or nil if there is none such.
func (d *deck) pick(r *http.Request) *console {
	s := r.URL.Query().Get("backend")
	if s == "" {
		return d.consoles[0]
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= len(d.consoles) {
		return nil
	}
	return d.consoles[i]
}

// route hands a request to the console of the backend it names.
func (d *deck) route(h func(*console, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := d.pick(r)
		if c == nil {
			http.Error(w, fmt.Sprintf("no backend %q: this console has backends 0 to %d", r.URL.Query().Get("backend"), len(d.consoles)-1), http.StatusNotFound)
			return
		}
		h(c, w, r)
	}
}

// tab is one backend's tab on the page.
type tab struct {
	Index    int
	Label    string
	Selected bool
}

func (d *deck) index(w http.ResponseWriter, r *http.Request) {
	c := d.pick(r)
	if c == nil {
		http.Error(w, fmt.Sprintf("no backend %q", r.URL.Query().Get("backend")), http.StatusNotFound)
		return
	}
	var tabs []tab
	sel := 0
	for i, o := range d.consoles {
		tabs = append(tabs, tab{i, o.backend, o == c})
		if o == c {
			sel = i
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	_ = indexPage.Execute(w, struct {
		CSRF, Backend, Prefix string
		AllowUnlock           bool
		Selected              int
		Tabs                  []tab
	}{d.csrf, c.backend, d.prefix, d.allowUnlock, sel, tabs})
}

// events streams snapshots as server-sent events until the page goes.
func (c *console) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ch := make(chan snapshot, 1)
	c.mu.Lock()
	c.subs[ch] = struct{}{}
	if !c.snap.At.IsZero() {
		ch <- c.snap
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.subs, ch)
		c.mu.Unlock()
	}()
	for {
		select {
		case <-r.Context().Done():
			return
		case snap := <-ch:
			b, _ := json.Marshal(snap)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

// unlock force-releases a lock, for a page of this console only: the
// request must carry the page's token and come from the page's origin.
func (c *console) unlock(w http.ResponseWriter, r *http.Request) {
	if !c.allowUnlock {
		http.Error(w, "read-only console: start it with --allow-unlock", http.StatusForbidden)
		return
	}
	if r.Header.Get("X-Padlock-CSRF") != c.csrf {
		http.Error(w, "missing or wrong X-Padlock-CSRF token", http.StatusForbidden)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
		http.Error(w, "want a JSON body {\"name\": ...}", http.StatusBadRequest)
		return
	}
	// The name's holds as they are now, not as the last look saw them: a
	// hold released since then by its holder was not forced.
	now, nowErr := c.l.Holders(r.Context(), req.Name)
	h, err := c.l.ForceUnlock(r.Context(), req.Name)
	switch {
	case errors.Is(err, padlock.ErrNotHeld):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case errors.Is(err, padlock.ErrInvalidName):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	// The next look at the holders records it, once, with the others. A
	// name's holds all went (its readers or permits): h is the oldest,
	// and the others are those read just before (Holders reads a prefix:
	// only this name's), or, if that read failed, those the last look saw.
	c.mu.Lock()
	c.forcedHere[keyOf(h)] = true
	if nowErr == nil {
		for _, o := range now {
			if o.Name == h.Name {
				c.forcedHere[keyOf(o)] = true
			}
		}
	} else {
		for k := range c.held {
			if k.name == h.Name {
				c.forcedHere[k] = true
			}
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"name": h.Name, "token": h.Token})
}

// healthz is 200 while the last look at every backend succeeded
// recently, 503 otherwise; with several backends each has a line.
func (d *deck) healthz(w http.ResponseWriter, r *http.Request) {
	var lines []string
	bad := false
	for _, c := range d.consoles {
		msg := c.health()
		bad = bad || msg != "ok"
		if len(d.consoles) > 1 {
			msg = c.backend + ": " + msg
		}
		lines = append(lines, msg)
	}
	if bad {
		http.Error(w, strings.Join(lines, "\n"), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// health is "ok" while the last look at the backend succeeded recently,
// or what is wrong.
func (c *console) health() string {
	c.mu.Lock()
	snap := c.snap
	c.mu.Unlock()
	switch {
	case snap.At.IsZero():
		return "starting"
	case snap.Error != "":
		return snap.Error
	case time.Since(snap.At) > 3*c.interval+5*time.Second:
		return "no look at the backend since " + snap.At.Format(time.RFC3339)
	}
	return "ok"
}

func attrEvent(e string) attribute.KeyValue { return attribute.String("padlock.event", e) }
