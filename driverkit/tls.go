package driverkit

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"slices"

	"github.com/padlock-go/padlock/backends"
)

// TLSParams are the URL parameters TLSConfig reads: files of a CA bundle,
// a client certificate and its key (mutual TLS), and the server name to
// verify when it differs from the host dialed.
var TLSParams = []string{"ca", "cert", "key", "server_name"}

// SecurityParams are PasswordParams and TLSParams, for a backend that takes
// both.
var SecurityParams = slices.Clip(slices.Concat(PasswordParams, TLSParams))

// TLSConfig returns the TLS configuration a URL asks for: base (the
// Config.TLS an application passed to Open, cloned; a new one if nil) with
// the files of u's ca=, cert= and key= parameters loaded and server_name=
// set. on reports whether any TLS was asked for (a base, or a parameter).
// A file that cannot be read or parsed is backends.ErrInvalidOption naming it.
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
			return nil, false, fmt.Errorf("%w: ca=%s: %v", backends.ErrInvalidOption, ca, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("%w: ca=%s holds no PEM certificate", backends.ErrInvalidOption, ca)
		}
		cfg.RootCAs, on = pool, true
	}
	cert, key := q.Get("cert"), q.Get("key")
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, false, fmt.Errorf("%w: cert=%s key=%s: %v", backends.ErrInvalidOption, cert, key, err)
		}
		cfg.Certificates, on = []tls.Certificate{pair}, true
	case cert != "" || key != "":
		return nil, false, fmt.Errorf("%w: cert= and key= go together (a client certificate and its key)", backends.ErrInvalidOption)
	}
	if name := q.Get("server_name"); name != "" {
		cfg.ServerName, on = name, true
	}
	return cfg, on, nil
}
