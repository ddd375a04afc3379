package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock/fence"
	"github.com/padlock-go/padlock/padlocktest"
)

// testResource is the resource served in this process, with the events
// it logged.
type testResource struct {
	addr string
	mu   sync.Mutex
	evs  []Event
}

func startResource(t *testing.T) *testResource {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- runResource(ctx, pw)
		pw.Close()
	}()
	r := &testResource{}
	ready := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), resourceReady); ok {
				ready <- addr
				continue
			}
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("resource wrote %q: %v", sc.Text(), err)
				continue
			}
			r.mu.Lock()
			r.evs = append(r.evs, e)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("resource: %v", err)
		}
		<-read
	})
	select {
	case r.addr = <-ready:
	case <-time.After(time.Minute):
		t.Fatal("resource not ready within a minute")
	}
	return r
}

// do sends a worker's request: path with the client, kind and values in
// its query, the token and name in fence's headers (none if token is 0).
func (r *testResource) do(t *testing.T, method, path string, client int, kind Kind, name string, token uint64, vals url.Values) (int, string) {
	t.Helper()
	if vals == nil {
		vals = url.Values{}
	}
	vals.Set("client", strconv.Itoa(client))
	vals.Set("kind", string(kind))
	req, err := http.NewRequest(method, "http://"+r.addr+path+"?"+vals.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(fence.ResourceHeader, name)
	if token != 0 {
		req.Header.Set(fence.TokenHeader, strconv.FormatUint(token, 10))
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// write writes v to both registers with token, and returns the answer.
func (r *testResource) write(t *testing.T, client int, name string, token uint64, v int64) writeResult {
	t.Helper()
	vals := url.Values{"unfenced": {fmt.Sprint(v)}, "fenced": {fmt.Sprint(v)}}
	code, body := r.do(t, http.MethodPost, "/write", client, Writer, name, token, vals)
	return r.result(t, code, body)
}

func (r *testResource) check(t *testing.T, client int, kind Kind, name string, token uint64) writeResult {
	t.Helper()
	code, body := r.do(t, http.MethodPost, "/check", client, kind, name, token, nil)
	return r.result(t, code, body)
}

func (r *testResource) read(t *testing.T, client int, kind Kind, name string, token uint64) readings {
	t.Helper()
	code, body := r.do(t, http.MethodGet, "/read", client, kind, name, token, nil)
	var got readings
	if code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("read by client %d, token %d: %d %s", client, token, code, body)
	}
	return got
}

func (r *testResource) result(t *testing.T, code int, body string) writeResult {
	t.Helper()
	var res writeResult
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil {
		t.Fatalf("answer %d %s", code, body)
	}
	return res
}

// The fenced register is fence's middleware: a write below the highest
// token seen on a read or write of its name is refused with fence's
// StaleError, the unfenced register takes it, names are apart, and the
// refusal is logged as today's OpApply event.
func TestResourceFencesWrites(t *testing.T) {
	r := startResource(t)
	r.read(t, 1, Writer, "hot", 5)
	r.read(t, 2, Writer, "hot", 6) // the newer holder's contact
	r.read(t, 3, Writer, "cold", 2)
	res := r.write(t, 1, "hot", 5, 1)
	want := `fence: stale token: resource "hot" refused token 5, below the highest seen, 6`
	if res.FencedAccepted || res.Refused != want {
		t.Errorf("stale write answered %+v, want refused with %q", res, want)
	}
	if res := r.write(t, 2, "hot", 6, 1); !res.FencedAccepted {
		t.Errorf("the newer holder's write answered %+v", res)
	}
	if res := r.write(t, 2, "hot", 6, 2); !res.FencedAccepted {
		t.Errorf("the same holder's second write answered %+v: an equal token is accepted", res)
	}
	if res := r.write(t, 3, "cold", 2, 1); !res.FencedAccepted {
		t.Errorf("a write on another name answered %+v", res)
	}
	// A read below the highest token is contact, never refused.
	if got := r.read(t, 1, Writer, "hot", 5); got != (readings{Unfenced: 2, Fenced: 2}) {
		t.Errorf("a stale holder's read = %+v, want both registers at 2", got)
	}
	var st ResourceState
	code, body := r.do(t, http.MethodGet, "/state", 0, "", "", 0, nil)
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("state: %d %s", code, body)
	}
	if want := (ResourceState{Unfenced: 3, Fenced: 3, AppliedUnfenced: 4, AppliedFenced: 3}); st != want {
		t.Errorf("state = %+v, want %+v", st, want)
	}
	// The events reach the test through a pipe, read on a goroutine of
	// its own: the last read's may still be on the way.
	count := func(op string) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, e := range r.evs {
			if e.Op == op {
				n++
			}
		}
		return n
	}
	padlocktest.WaitFor(t, "the resource's four reads logged", 30*time.Second, func() bool { return count(OpSeen) >= 4 })
	r.mu.Lock()
	defer r.mu.Unlock()
	var refused, seen int
	for _, e := range r.evs {
		switch {
		case e.Op == OpSeen:
			seen++
		case e.Op == OpApply && e.Register == "fenced" && !*e.Accepted:
			refused++
			if e.Client != 1 || e.Token != 5 || e.Name != "hot" || !e.Stale {
				t.Errorf("refusal logged as %+v", e)
			}
		}
	}
	if seen != 4 || refused != 1 {
		t.Errorf("logged %d reads and %d refusals, want 4 and 1: %+v", seen, refused, r.evs)
	}
}

// A reader's check is refused only when a writer with a higher token has
// made contact: readers share the name and do not fence each other, but
// a reader's read fences an older writer's write.
func TestResourceReadersRule(t *testing.T) {
	r := startResource(t)
	r.read(t, 1, Writer, "hot", 3)
	r.read(t, 2, Reader, "hot", 5)
	r.read(t, 3, Permit, "hot", 4)
	if res := r.check(t, 3, Permit, "hot", 4); !res.FencedAccepted {
		t.Errorf("a check below a newer reader's token answered %+v", res)
	}
	if res := r.write(t, 1, "hot", 3, 1); res.FencedAccepted {
		t.Errorf("a write below a reader's contact answered %+v", res)
	}
	r.read(t, 4, Writer, "hot", 7)
	if res := r.check(t, 2, Reader, "hot", 5); res.FencedAccepted || !strings.Contains(res.Refused, "refused token 5, below the highest seen, 7") {
		t.Errorf("a check below a newer writer's contact answered %+v", res)
	}
	if res := r.check(t, 5, Reader, "hot", 7); !res.FencedAccepted {
		t.Errorf("a check equal to the writer's token answered %+v", res)
	}
}

// A request without fence's headers is refused with a clear 400 and
// touches neither register.
func TestResourceBadRequest(t *testing.T) {
	r := startResource(t)
	code, body := r.do(t, http.MethodPost, "/write", 1, Writer, "hot", 0, url.Values{"unfenced": {"1"}, "fenced": {"1"}})
	if code != http.StatusBadRequest || !strings.Contains(body, fence.TokenHeader+` "" is not a token`) {
		t.Errorf("a write without a token answered %d %q", code, body)
	}
	code, body = r.do(t, http.MethodGet, "/read", 1, Writer, "", 4, nil)
	if code != http.StatusBadRequest || !strings.Contains(body, fence.ResourceHeader) {
		t.Errorf("a read without a name answered %d %q", code, body)
	}
}
