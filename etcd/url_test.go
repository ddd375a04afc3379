package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/padlock-go/padlock"
)

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		url  string
		want error
		msg  string
	}{
		{"etcd://127.0.0.1:1/p?bogus=1", padlock.ErrInvalidOption, `"bogus"`},
		{"etcd://127.0.0.1:1/p?dial_timeout=soon", padlock.ErrInvalidOption, "dial_timeout"},
		{"etcd:///p", padlock.ErrInvalidURL, "host:port"},
		{"etcd://127.0.0.1:1/p?dial_timeout=200ms", padlock.ErrUnavailable, "127.0.0.1:1"},
	} {
		l, err := padlock.Open(ctx, tc.url)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Open(%q) = %v, want %v mentioning %q", tc.url, err, tc.want, tc.msg)
		}
	}
}
