package main

import (
	"errors"
	"flag"
	"os"
	"strings"

	"github.com/padlock-go/padlock"
)

// usageError is a command-line mistake: exit status 2. A flag that does
// not parse, a flag value out of range and a URL that is not valid are
// all usage errors.
type usageError struct{ error }

// Unwrap lets errors.Is see the cause (a sentinel such as
// padlock.ErrInvalidOption).
func (e usageError) Unwrap() error { return e.error }

// exitError ends the command with its own documented status.
type exitError struct {
	code int
	error
}

// errHelp is returned after a command printed its -h help: exit status 0.
var errHelp = errors.New("help")

// parseFlags parses args into fs (made with flag.ContinueOnError): -h is
// errHelp (status 0), any other flag error a usageError (status 2). The
// flag package has printed the usage by then.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return errHelp
	}
	return usageError{err}
}

// urlValue is a URL flag's value. It prints itself redacted: the flag
// package prints a flag's default in -h and after every flag error, and
// the default comes from $PADLOCK_URL, password and all.
type urlValue struct{ raw string }

func (v *urlValue) String() string {
	if v == nil {
		return ""
	}
	return padlock.RedactURL(v.raw)
}

func (v *urlValue) Set(s string) error {
	v.raw = s
	return nil
}

// urlFlag defines --url on fs, defaulting to $PADLOCK_URL, and returns
// where its value goes. usage names the value `URL` (in back quotes).
func urlFlag(fs *flag.FlagSet, usage string) *string {
	v := &urlValue{raw: os.Getenv(padlock.EnvURL)}
	fs.Var(v, "url", usage)
	return &v.raw
}

// asUsage makes an error that says what the command line gave is wrong (a
// URL that does not parse, names no known scheme, or has a bad or unknown
// parameter; a lock name that is not valid) a usage error: no retry can
// fix it.
func asUsage(err error) error {
	for _, class := range []error{padlock.ErrInvalidURL, padlock.ErrInvalidOption, padlock.ErrUnknownScheme, padlock.ErrInvalidName} {
		if errors.Is(err, class) {
			return usageError{err}
		}
	}
	return err
}

// urlsValue is a URL flag that may be given several times: the first
// --url replaces the default ($PADLOCK_URL), later ones add to it. It
// prints itself redacted, as urlValue does.
type urlsValue struct {
	urls []string
	set  bool // a --url was given
}

func (v *urlsValue) String() string {
	if v == nil {
		return ""
	}
	var out []string
	for _, u := range v.urls {
		out = append(out, padlock.RedactURL(u))
	}
	return strings.Join(out, " ")
}

func (v *urlsValue) Set(s string) error {
	if !v.set {
		v.urls, v.set = nil, true
	}
	v.urls = append(v.urls, s)
	return nil
}

// list is the URLs given, or the default.
func (v *urlsValue) list() []string { return v.urls }

// urlsFlag defines a --url on fs that may be repeated, defaulting to
// $PADLOCK_URL.
func urlsFlag(fs *flag.FlagSet, usage string) *urlsValue {
	v := &urlsValue{}
	if env := os.Getenv(padlock.EnvURL); env != "" {
		v.urls = []string{env}
	}
	fs.Var(v, "url", usage)
	return v
}
