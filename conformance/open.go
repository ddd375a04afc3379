package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"

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
// expected sentinel and message. Backends call it with their own bad URLs.
func CheckOpenErrors(t *testing.T, cases []OpenCase) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range cases {
		l, err := padlock.Open(ctx, tc.URL)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", tc.URL)
			continue
		}
		if !errors.Is(err, tc.Want) || !strings.Contains(err.Error(), tc.Msg) {
			t.Errorf("Open(%q) = %v, want %v mentioning %q", tc.URL, err, tc.Want, tc.Msg)
		}
	}
}
