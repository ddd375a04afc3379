package etcd_test

import (
	"testing"

	"github.com/padlock-go/padlock"
	"github.com/padlock-go/padlock/conformance"
)

func TestOpenErrors(t *testing.T) {
	conformance.CheckOpenErrors(t, []conformance.OpenCase{
		{URL: "etcd://127.0.0.1:1/p?bogus=1", Want: padlock.ErrInvalidOption, Msg: `"bogus"`},
		{URL: "etcd://127.0.0.1:1/p?dial_timeout=soon", Want: padlock.ErrInvalidOption, Msg: "dial_timeout"},
		{URL: "etcd:///p", Want: padlock.ErrInvalidURL, Msg: "host:port"},
		{URL: "etcd://127.0.0.1:1/p?dial_timeout=200ms", Want: padlock.ErrUnavailable, Msg: "127.0.0.1:1"},
	})
}
