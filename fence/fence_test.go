package fence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/padlock-go/padlock"
	_ "github.com/padlock-go/padlock/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every helper refuses an invalid resource or token before it touches its
// store (here, nil clients that would panic if used).
func TestInvalidArguments(t *testing.T) {
	ctx := context.Background()
	helpers := map[string]func(resource string, token uint64) error{
		"Memory":    func(r string, tok uint64) error { return NewMemory().Record(ctx, r, tok) },
		"Table.Do":  func(r string, tok uint64) error { return PostgresTable.Do(ctx, nil, r, tok, nil) },
		"Check":     func(r string, tok uint64) error { return MySQLTable.Check(ctx, nil, r, tok) },
		"CheckPgx":  func(r string, tok uint64) error { return PostgresTable.CheckPgx(ctx, nil, r, tok) },
		"Redis":     func(r string, tok uint64) error { return Redis(ctx, nil, r, tok) },
		"Etcd":      func(r string, tok uint64) error { _, err := Etcd(ctx, nil, r, tok); return err },
		"ZooKeeper": func(r string, tok uint64) error { _, err := ZooKeeper(ctx, nil, r, tok); return err },
	}
	cases := []struct {
		resource string
		token    uint64
		says     string
	}{
		{"", 1, "resource is empty"},
		{strings.Repeat("x", MaxResourceLen+1), 1, "longer than 255"},
		{"bad\xff", 1, "not valid UTF-8"},
		{"a\x00b", 1, "NUL"},
		{"r", 0, "token is 0"},
		{"r", MaxToken + 1, "above MaxToken"},
		{"r", 1, "needs"}, // a valid call with a nil client
	}
	for name, h := range helpers {
		for _, c := range cases {
			if name == "Memory" && c.says == "needs" {
				continue
			}
			err := h(c.resource, c.token)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s(%q, %d) = %v, want ErrInvalid saying %q", name, c.resource, c.token, err, c.says)
			}
		}
	}
}

func TestNewTableInvalid(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		name string
	}{{"sqlite", "t"}, {Postgres, ""}, {Postgres, "1t"}, {MySQL, "t; DROP TABLE x"}, {MySQL, `a"b`}, {Postgres, "a.b.c"}, {Postgres, strings.Repeat("t", 64)}} {
		if _, err := NewTable(c.d, c.name); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewTable(%q, %q) = %v, want ErrInvalid", c.d, c.name, err)
		}
	}
	tb, err := NewTable(MySQL, "app.fence_tokens")
	if err != nil || !strings.Contains(tb.Schema(), "`app`.`fence_tokens`") {
		t.Fatalf("NewTable(MySQL, app.fence_tokens) = %v, schema %q", err, tb.Schema())
	}
	if !strings.Contains(PostgresTable.Schema(), `"padlock_fence"`) {
		t.Errorf("PostgresTable.Schema() = %q, want the quoted default table", PostgresTable.Schema())
	}
}

// Writes Redis refuses before sending anything (the client's server does
// not exist: a write that got past the checks would fail otherwise), and
// the clients it refuses.
func TestRedisWritesInvalid(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	fields := make([]any, 7002)
	for i := range fields {
		fields[i] = i
	}
	for _, w := range []struct {
		w    RedisWrite
		says string
	}{
		{RedisWrite{}, "zero RedisWrite"},
		{RedisSet("", 1), "empty key"},
		{RedisSet(RedisKeyPrefix+"r", 1), "the token key"},
		{RedisHSet("h"), "want field-value pairs"},
		{RedisHSet("h", "f"), "want field-value pairs"},
		{RedisHSet("h", fields...), "more than the 7000 one write may have"},
	} {
		if err := Redis(ctx, c, "r", 1, w.w); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), w.says) {
			t.Errorf("Redis(%.60v) = %v, want ErrInvalid saying %q", w.w, err, w.says)
		}
	}
	if err := Redis(ctx, nil, "r", 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("Redis with no client = %v, want ErrInvalid", err)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if err := Redis(ctx, ring, "r", 1, RedisSet("k", 1)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Ring") {
		t.Errorf("Redis over a Ring = %v, want ErrInvalid naming the Ring", err)
	}
}

func TestMiddlewareAnswers(t *testing.T) {
	failing := StoreFunc(func(context.Context, string, uint64) error { return errors.New("store down") })
	var calls int
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		res, tok, ok := FromContext(r.Context())
		if !ok || res == "" || tok == 0 {
			t.Errorf("FromContext = %q, %d, %v", res, tok, ok)
		}
	})
	mem := NewMemory()
	mem.Record(context.Background(), "r", 5)
	h := Middleware(mem, nil)(next)
	for _, c := range []struct {
		headers map[string][]string
		h       http.Handler
		code    int
		says    string
	}{
		{map[string][]string{ResourceHeader: {"r"}}, h, 400, "missing Padlock-Fencing-Token"},
		{map[string][]string{ResourceHeader: {"r"}, TokenHeader: {"x"}}, h, 400, "not a decimal token"},
		{map[string][]string{ResourceHeader: {"r"}, TokenHeader: {"-1"}}, h, 400, "not a decimal token"},
		{map[string][]string{ResourceHeader: {"r"}, TokenHeader: {"1", "2"}}, h, 400, "2 Padlock-Fencing-Token headers"},
		{map[string][]string{ResourceHeader: {"r"}, TokenHeader: {"0"}}, h, 400, "token is 0"},
		{map[string][]string{TokenHeader: {"5"}}, h, 400, "missing Padlock-Resource"},
		{map[string][]string{ResourceHeader: {"r"}, TokenHeader: {"4"}}, h, 409, `resource "r" refused token 4, below the highest seen, 5`},
		{map[string][]string{ResourceHeader: {"r"}, TokenHeader: {"5"}}, h, 200, ""},
		{map[string][]string{ResourceHeader: {"r"}, TokenHeader: {"6"}}, Middleware(failing, nil)(next), 503, "store down"},
	} {
		req := httptest.NewRequest("POST", "/", nil)
		for k, v := range c.headers {
			req.Header[k] = v
		}
		before := calls
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != c.code || !strings.Contains(string(body), c.says) {
			t.Errorf("%v: %d %q, want %d saying %q", c.headers, rec.Code, body, c.code, c.says)
		}
		if ran := calls > before; ran != (c.code == 200) {
			t.Errorf("%v: handler ran: %v, answer %d", c.headers, ran, rec.Code)
		}
	}
}

// Requests for one resource run one at a time (correct code can only ever
// see one inside; without the per-resource lock, many goroutines started
// together and yielding inside overlap at once), while another resource's
// requests are not held up by them: across routes wrapped each by a
// Middleware of its own, as the docs' one line per route wraps them.
func TestMiddlewareSerializesPerResource(t *testing.T) {
	var mu sync.Mutex
	inside, most := map[string]int{}, map[string]int{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _, _ := FromContext(r.Context())
		mu.Lock()
		inside[res]++
		most[res] = max(most[res], inside[res])
		mu.Unlock()
		for range 200 {
			runtime.Gosched()
		}
		mu.Lock()
		inside[res]--
		mu.Unlock()
	})
	routes := []http.Handler{Middleware(nil, nil)(handler), Middleware(nil, nil)(handler)}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := httptest.NewRequest("POST", "/", nil)
			req.Header.Set(ResourceHeader, []string{"serial/a", "serial/b"}[i%2])
			req.Header.Set(TokenHeader, "9")
			routes[i/2%2].ServeHTTP(httptest.NewRecorder(), req)
		}()
	}
	close(start)
	wg.Wait()
	if most["serial/a"] != 1 || most["serial/b"] != 1 {
		t.Errorf("requests inside at once: %v, want 1 per resource", most)
	}
}

// Routes wrapped each by a Middleware of its own with no store share one
// (DefaultMemory): a newer holder's request on one route shuts the older
// holder out of the other. With a Memory per Middleware, the older
// holder's late write on the route the newer one had not used yet was
// accepted.
func TestMiddlewareRoutesShareTheDefaultStore(t *testing.T) {
	var wrote []string
	route := func(name string) http.Handler {
		return Middleware(nil, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, tok, _ := FromContext(r.Context())
			wrote = append(wrote, fmt.Sprintf("%s:%d", name, tok))
		}))
	}
	pay, update := route("pay"), route("update")
	send := func(h http.Handler, token string) int {
		req := httptest.NewRequest("POST", "/", nil)
		req.Header.Set(ResourceHeader, "routes/orders/42")
		req.Header.Set(TokenHeader, token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := send(update, "6"); code != 200 {
		t.Fatalf("the newer holder's request: %d, want 200", code)
	}
	if code := send(pay, "5"); code != http.StatusConflict {
		t.Errorf("the older holder's late request on another route: %d, want 409", code)
	}
	if len(wrote) != 1 || wrote[0] != "update:6" {
		t.Errorf("writes %v, want only the newer holder's", wrote)
	}
	if h := DefaultMemory.Highest("routes/orders/42"); h != 6 {
		t.Errorf("DefaultMemory has %d, want 6", h)
	}
}

func TestKeyedMutexForgets(t *testing.T) {
	var k keyedMutex
	u1 := k.lock("a")
	u2 := k.lock("b")
	u1()
	u2()
	if len(k.m) != 0 {
		t.Errorf("keyedMutex keeps %d entries after every unlock", len(k.m))
	}
}

func TestTransport(t *testing.T) {
	ctx := context.Background()
	l, err := padlock.Open(ctx, "mem://fence-transport")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lk, err := l.Lock(ctx, "jobs/1")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(ctx)
	var got http.Header
	rt := Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}), lk)
	req, _ := http.NewRequest("GET", "http://example.invalid/", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got.Get(TokenHeader) == "" || got.Get(TokenHeader) == "0" || got.Get(ResourceHeader) != "jobs/1" {
		t.Errorf("headers sent = %v", got)
	}
	if len(req.Header) != 0 {
		t.Errorf("the caller's request was changed: %v", req.Header)
	}
	if _, err := Transport(nil, nil).RoundTrip(req); !errors.Is(err, ErrInvalid) {
		t.Errorf("Transport with a nil lock: %v, want ErrInvalid", err)
	}
	req.Header.Set(ResourceHeader, "mine")
	SetHeader(req, lk)
	if req.Header.Get(ResourceHeader) != "mine" {
		t.Errorf("SetHeader replaced the caller's resource: %v", req.Header)
	}
	// A leader's term carries its token; it names no resource.
	ld, err := l.Election("jobs/leader").Campaign(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Resign(ctx)
	req, _ = http.NewRequest("GET", "http://example.invalid/", nil)
	if err := SetHeader(req, ld); err != nil || req.Header.Get(TokenHeader) != strconv.FormatUint(ld.Token(), 10) || req.Header.Get(ResourceHeader) != "" {
		t.Errorf("SetHeader from a leadership: %v, headers %v", err, req.Header)
	}
	var nilLd *padlock.Leadership
	if err := SetHeader(req, nilLd); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetHeader from a nil leadership: %v, want ErrInvalid", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// sameSlot refuses keys on several Redis Cluster slots (driverkit.ClusterSlot,
// which tests/fence compares with a live cluster) and takes keys under one
// hash tag.
func TestSameSlot(t *testing.T) {
	if err := sameSlot([]string{RedisKeyPrefix + "{o}", "{o}:a", "x"}); !errors.Is(err, ErrCrossSlot) || !errors.Is(err, ErrInvalid) {
		t.Errorf("sameSlot across slots = %v, want ErrCrossSlot and ErrInvalid", err)
	}
	if err := sameSlot([]string{RedisKeyPrefix + "{o}", "{o}:a", "{o}:b"}); err != nil {
		t.Errorf("sameSlot in one slot = %v", err)
	}
}
