package driverkit

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/padlock-go/padlock/backends"
)

// PasswordParams are the URL parameters Password reads: a file, or an
// environment variable, that holds the password.
var PasswordParams = []string{"password_file", "password_env"}

// Password returns the password of u: the contents of the file named by
// its password_file= parameter (trailing newlines dropped), or the value
// of the environment variable named by password_env=, so that a secret
// need not sit in the URL; or else the URL's own. Two sources at once, a
// file that cannot be read or an unset variable is backends.ErrInvalidOption (the
// message names the file or variable, never the password).
func Password(u *url.URL) (string, error) {
	q := u.Query()
	file, env := q.Get("password_file"), q.Get("password_env")
	inURL := false
	if u.User != nil {
		_, inURL = u.User.Password()
	}
	n := 0
	for _, on := range []bool{inURL, file != "", env != ""} {
		if on {
			n++
		}
	}
	switch {
	case n > 1:
		return "", fmt.Errorf("%w: more than one of a password in the URL, password_file= and password_env= at once", backends.ErrInvalidOption)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%w: password_file=%s: %v", backends.ErrInvalidOption, file, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case env != "":
		p, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("%w: password_env=%s: the variable is not set", backends.ErrInvalidOption, env)
		}
		return p, nil
	}
	_, p := Credentials(u)
	return p, nil
}
