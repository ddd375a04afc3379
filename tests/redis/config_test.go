package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/padlock-go/padlock"
)

// A database number the server does not have (redis-server has 16 by
// default) is a mistake in the URL, with the server's words, not an
// outage: no retry mends it.
func TestOpenDatabaseOutOfRange(t *testing.T) {
	needServers(t)
	for _, u := range []string{"redis://" + single.Addrs() + "/99", "redis://" + single.Addrs() + "/?db=99"} {
		l, err := padlock.Open(context.Background(), u)
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", u)
			continue
		}
		if !errors.Is(err, padlock.ErrInvalidURL) || errors.Is(err, padlock.ErrUnavailable) || !strings.Contains(err.Error(), "DB index is out of range") {
			t.Errorf("Open(%s) = %v, want ErrInvalidURL with the server's words", u, err)
		}
	}
}
