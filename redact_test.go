package padlock_test

import (
	"testing"

	"github.com/padlock-go/padlock"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"etcd://root:s3cret@127.0.0.1:2379/p", "etcd://root:xxxxx@127.0.0.1:2379/p"},
		{"zk://h:2181/locks?digest=alice:s3cret&ttl=6s", "zk://h:2181/locks?digest=alice%3Axxxxx&ttl=6s"},
		{"zk://h:2181/locks?digest=alice&password_file=/run/pw", "zk://h:2181/locks?digest=alice&password_file=/run/pw"},
		{"redis://h:6379/0", "redis://h:6379/0"},
		{"redis://u:s3cret@h:6379/%zz", "(unparsable url)"},
	} {
		if got := padlock.RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
