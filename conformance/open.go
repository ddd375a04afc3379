package conformance

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock"
)

// OpenCase is a URL that padlock.Open must refuse, the sentinel its error
// must match, and a fragment its message must contain to say what was wrong.
type OpenCase struct {
	URL  string
	Want error
	Msg  string
}

// CheckOpenErrors opens every case's URL and checks that it fails with the
// expected sentinel and message, and that the message does not show the
// URL's password. Backends call it with their own bad URLs.
func CheckOpenErrors(t *testing.T, cases []OpenCase) {
	t.Helper()
	CheckRefused(t, cases)
}

// RefusalBound is how long a refused Open may take: a misconfiguration
// (a wrong CA, a wrong password) must fail fast, not wait out a timeout.
const RefusalBound = 15 * time.Second

// CheckRefused is CheckOpenErrors with opts given to every Open (a logger
// whose lines the caller checks, say), each refusal bounded by
// RefusalBound. It returns the errors' messages, for the caller to check
// for secrets with NoSecrets.
func CheckRefused(t *testing.T, cases []OpenCase, opts ...padlock.OpenOption) []string {
	t.Helper()
	ctx := context.Background()
	var msgs []string
	for _, tc := range cases {
		start := time.Now()
		l, err := padlock.Open(ctx, tc.URL, opts...)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", padlock.RedactURL(tc.URL))
			continue
		}
		msgs = append(msgs, err.Error())
		if !errors.Is(err, tc.Want) || !strings.Contains(err.Error(), tc.Msg) {
			t.Errorf("Open(%q) = %v, want %v mentioning %q", padlock.RedactURL(tc.URL), err, tc.Want, tc.Msg)
		}
		if d := time.Since(start); d > RefusalBound {
			t.Errorf("Open(%q) took %v to fail", padlock.RedactURL(tc.URL), d)
		}
		if u, perr := url.Parse(tc.URL); perr == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(err.Error(), pw) {
				t.Errorf("Open(%q) = %v: the error shows the password", padlock.RedactURL(tc.URL), err)
			}
		}
	}
	return msgs
}

// NoSecrets fails t if text (errors and log lines a test collected) holds
// any of secrets.
func NoSecrets(t *testing.T, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("a secret appears in an error or log line:\n%s", text)
			return
		}
	}
}
