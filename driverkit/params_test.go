package driverkit_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

func TestBoolParam(t *testing.T) {
	for _, c := range []struct {
		raw       string
		def, want bool
		err       error
	}{
		{raw: "x://h", def: true, want: true},
		{raw: "x://h", def: false, want: false},
		{raw: "x://h?k=true", want: true},
		{raw: "x://h?k=1", want: true},
		{raw: "x://h?k=false", def: true, want: false},
		{raw: "x://h?k=yes", err: backends.ErrInvalidOption},
		{raw: "x://h?k=", err: backends.ErrInvalidOption},
	} {
		got, err := driverkit.BoolParam(mustURL(t, c.raw), "k", c.def)
		checkErr(t, "BoolParam("+c.raw+")", err, c.err, []string{"k=", "not a boolean"})
		if c.err == nil && got != c.want {
			t.Errorf("BoolParam(%s, %v) = %v, want %v", c.raw, c.def, got, c.want)
		}
	}
}

func TestIntParam(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want int
		err  error
	}{
		{raw: "x://h", want: 7}, // the default, even below min
		{raw: "x://h?n=2", want: 2},
		{raw: "x://h?n=40", want: 40},
		{raw: "x://h?n=1", err: backends.ErrInvalidOption},
		{raw: "x://h?n=-3", err: backends.ErrInvalidOption},
		{raw: "x://h?n=2.5", err: backends.ErrInvalidOption},
		{raw: "x://h?n=many", err: backends.ErrInvalidOption},
	} {
		got, err := driverkit.IntParam(mustURL(t, c.raw), "n", 2, 7)
		checkErr(t, "IntParam("+c.raw+")", err, c.err, []string{"n=", "at least 2"})
		if c.err == nil && got != c.want {
			t.Errorf("IntParam(%s) = %d, want %d", c.raw, got, c.want)
		}
	}
}

func TestDurationParam(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want time.Duration
		err  error
	}{
		{raw: "x://h", want: time.Minute},
		{raw: "x://h?d=1500ms", want: 1500 * time.Millisecond},
		{raw: "x://h?d=2h", want: 2 * time.Hour},
		{raw: "x://h?d=0s", err: backends.ErrInvalidOption},
		{raw: "x://h?d=-1s", err: backends.ErrInvalidOption},
		{raw: "x://h?d=5", err: backends.ErrInvalidOption}, // no unit
		{raw: "x://h?d=soon", err: backends.ErrInvalidOption},
	} {
		got, err := driverkit.DurationParam(mustURL(t, c.raw), "d", time.Minute)
		checkErr(t, "DurationParam("+c.raw+")", err, c.err, []string{"d=", "not a positive duration"})
		if c.err == nil && got != c.want {
			t.Errorf("DurationParam(%s) = %v, want %v", c.raw, got, c.want)
		}
	}
}

func TestTimeouts(t *testing.T) {
	for _, c := range []struct {
		raw           string
		dial, request time.Duration
		err           error
		msg           string
	}{
		{raw: "x://h", dial: 3 * time.Second, request: driverkit.DefaultRequestTimeout},
		{raw: "x://h?dial_timeout=1s", dial: time.Second, request: driverkit.DefaultRequestTimeout},
		{raw: "x://h?request_timeout=250ms", dial: 3 * time.Second, request: 250 * time.Millisecond},
		{raw: "x://h?dial_timeout=2s&request_timeout=9s", dial: 2 * time.Second, request: 9 * time.Second},
		{raw: "x://h?dial_timeout=0s", err: backends.ErrInvalidOption, msg: "dial_timeout"},
		{raw: "x://h?request_timeout=never", err: backends.ErrInvalidOption, msg: "request_timeout"},
	} {
		dial, request, err := driverkit.Timeouts(mustURL(t, c.raw), 3*time.Second)
		checkErr(t, "Timeouts("+c.raw+")", err, c.err, []string{c.msg})
		if c.err == nil && (dial != c.dial || request != c.request) {
			t.Errorf("Timeouts(%s) = %v, %v, want %v, %v", c.raw, dial, request, c.dial, c.request)
		}
	}
}

func ExampleCheckParams() {
	u, _ := url.Parse("x://127.0.0.1:9999/prefix?fair=true&prefx=a")
	fmt.Println(driverkit.CheckParams(u, "fair", "prefix"))
	// Output: padlock: invalid option: unknown url parameter "prefx" for x:// (known: ttl, wait, fair, prefix)
}

func TestLimitMismatchNamesBoth(t *testing.T) {
	err := driverkit.LimitMismatch("jobs", 3, 2)
	if !errors.Is(err, backends.ErrInvalidOption) {
		t.Fatalf("LimitMismatch = %v, want ErrInvalidOption", err)
	}
	for _, want := range []string{`"jobs"`, "limit 3", "limit 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LimitMismatch = %q, want it to say %s", err, want)
		}
	}
}
