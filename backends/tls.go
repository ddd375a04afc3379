package backends

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// TLSParams are the URL parameters TLSConfig reads: files of a CA bundle,
// a client certificate and its key (mutual TLS), and the server name to
// verify when it differs from the host dialed.
var TLSParams = []string{"ca", "cert", "key", "server_name"}

// PasswordParams are the URL parameters Password reads: a file, or an
// environment variable, that holds the password.
var PasswordParams = []string{"password_file", "password_env"}

// SecurityParams are PasswordParams and TLSParams, for a backend that takes
// both.
var SecurityParams = append(append([]string{}, PasswordParams...), TLSParams...)

// TLSConfig returns the TLS configuration a URL asks for: base (the
// Config.TLS an application passed to Open, cloned; a new one if nil) with
// the files of u's ca=, cert= and key= parameters loaded and server_name=
// set. on reports whether any TLS was asked for (a base, or a parameter).
// A file that cannot be read or parsed is ErrInvalidOption naming it.
func TLSConfig(u *url.URL, base *tls.Config) (cfg *tls.Config, on bool, err error) {
	q := u.Query()
	on = base != nil
	if base != nil {
		cfg = base.Clone()
	} else {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if ca := q.Get("ca"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, false, fmt.Errorf("%w: ca=%s: %v", ErrInvalidOption, ca, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("%w: ca=%s holds no PEM certificate", ErrInvalidOption, ca)
		}
		cfg.RootCAs, on = pool, true
	}
	cert, key := q.Get("cert"), q.Get("key")
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, false, fmt.Errorf("%w: cert=%s key=%s: %v", ErrInvalidOption, cert, key, err)
		}
		cfg.Certificates, on = []tls.Certificate{pair}, true
	case cert != "" || key != "":
		return nil, false, fmt.Errorf("%w: cert= and key= go together (a client certificate and its key)", ErrInvalidOption)
	}
	if name := q.Get("server_name"); name != "" {
		cfg.ServerName, on = name, true
	}
	return cfg, on, nil
}

// Password returns the password of u: the contents of the file named by
// its password_file= parameter (trailing newlines dropped), or the value
// of the environment variable named by password_env=, so that a secret
// need not sit in the URL; or else the URL's own. Two sources at once, a
// file that cannot be read or an unset variable is ErrInvalidOption (the
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
		return "", fmt.Errorf("%w: more than one of a password in the URL, password_file= and password_env= at once", ErrInvalidOption)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%w: password_file=%s: %v", ErrInvalidOption, file, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case env != "":
		p, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("%w: password_env=%s: the variable is not set", ErrInvalidOption, env)
		}
		return p, nil
	}
	_, p := Credentials(u)
	return p, nil
}
