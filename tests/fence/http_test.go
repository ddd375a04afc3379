package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/padlock-go/padlock/fence"
)

// httpRegister is a service whose POST /r/{resource} sets a value behind
// fence.Middleware over store, and whose GET /r/{resource} reads it
// unguarded; a 409 is a refusal.
func httpRegister(t *testing.T, store fence.Store) register {
	var mu sync.Mutex
	values := map[string]int64{}
	resource := func(r *http.Request) (string, error) { return r.PathValue("resource"), nil }
	mux := http.NewServeMux()
	mux.Handle("POST /r/{resource...}", fence.Middleware(store, resource)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseInt(r.FormValue("value"), 10, 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		values[r.PathValue("resource")] = v
		mu.Unlock()
	})))
	mux.HandleFunc("GET /r/{resource...}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, values[r.PathValue("resource")])
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := srv.Client()
	t.Cleanup(client.CloseIdleConnections)
	return register{
		write: func(ctx context.Context, resource string, token uint64, value int64) error {
			req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/r/"+resource+"?value="+strconv.FormatInt(value, 10), nil)
			if err != nil {
				return err
			}
			req.Header.Set(fence.TokenHeader, strconv.FormatUint(token, 10))
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			switch resp.StatusCode {
			case http.StatusOK:
				return nil
			case http.StatusConflict:
				// The client side of a refusal: the body says the tokens.
				var res string
				var tok, highest uint64
				if _, err := fmt.Sscanf(string(body), "fence: stale token: resource %q refused token %d, below the highest seen, %d", &res, &tok, &highest); err != nil {
					return fmt.Errorf("409 with body %q: %v", body, err)
				}
				return &fence.StaleError{Resource: res, Token: tok, Highest: highest}
			}
			return fmt.Errorf("%s: %s", resp.Status, body)
		},
		read: func(ctx context.Context, resource string) (int64, error) {
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/r/"+resource, nil)
			resp, err := client.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return strconv.ParseInt(string(body), 10, 64)
		},
	}
}

func TestHTTP(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		r := httpRegister(t, nil)
		t.Run("basics", func(t *testing.T) { checkBasics(t, r, "orders/1") })
		t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, r, "orders/2") })
	})
	// The middleware over a SQL token table: what a service with its
	// tokens in PostgreSQL runs.
	t.Run("postgres store", func(t *testing.T) {
		need(t, pg)
		db, err := sql.Open("pgx", pg.AdminURL())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		tb, _ := fence.NewTable(fence.Postgres, "fence_tokens_http")
		if _, err := db.Exec("DROP TABLE IF EXISTS fence_tokens_http"); err != nil {
			t.Fatal(err)
		}
		if err := tb.Migrate(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		r := httpRegister(t, tb.Store(db))
		t.Run("basics", func(t *testing.T) { checkBasics(t, r, "orders/1") })
		t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, r, "orders/2") })
		if err := r.write(context.Background(), "", 1, 1); err == nil || errors.Is(err, fence.ErrStale) {
			t.Errorf("an empty resource: %v, want a 400", err)
		}
	})
}
