package benchutil

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/padlock-go/padlock/padlocktest"
)

// shared holds the servers a benchmark package shares, by key, each
// started on first use: a package's tests (go test without -bench) start
// none.
var shared sync.Map // key -> *lazyServer

type lazyServer struct {
	once sync.Once
	srv  *padlocktest.Server
	err  error
}

// Server returns the package's server named key, started with kind and
// opts by the first benchmark that asks for it and stopped by Main. Like
// padlocktest.Start, it skips the benchmark when the server is not
// installed, unless padlocktest.RequireServers.
func Server(b testing.TB, key string, kind padlocktest.Kind, opts ...padlocktest.Option) *padlocktest.Server {
	b.Helper()
	v, _ := shared.LoadOrStore(key, &lazyServer{})
	s := v.(*lazyServer)
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		s.srv, s.err = padlocktest.New(ctx, kind, opts...)
	})
	if errors.Is(s.err, padlocktest.ErrMissing) && !padlocktest.RequireServers() {
		b.Skip(s.err)
	}
	if s.err != nil {
		b.Fatal(s.err)
	}
	return s.srv
}

// Main is a benchmark package's TestMain: it runs the package and then
// stops the servers Server started (padlocktest.Main, with its goroutine
// check).
func Main(m *testing.M) {
	padlocktest.Main(m, func(context.Context) (func(), error) {
		return func() {
			shared.Range(func(_, v any) bool {
				if s := v.(*lazyServer); s.srv != nil {
					s.srv.Close()
				}
				return true
			})
		}, nil
	})
}
