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
// its password_file= parameter (trailing newlines dropped), so that a
// secret need not sit in the URL, or else the URL's own. Both at once is
// ErrInvalidOption.
func Password(u *url.URL) (string, error) {
	inURL := false
	if u.User != nil {
		_, inURL = u.User.Password()
	}
	file := u.Query().Get("password_file")
	if file == "" {
		_, p := Credentials(u)
		return p, nil
	}
	if inURL {
		return "", fmt.Errorf("%w: a password in the URL and password_file= at once", ErrInvalidOption)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: password_file=%s: %v", ErrInvalidOption, file, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
