package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

// security reads u's credentials and TLS settings (base is the
// application's WithTLSConfig): the user and password to log in with, and
// the TLS configuration, nil for plain text. With TLS it probes the
// endpoints first: gRPC keeps a failed handshake to itself, as a connection
// that never becomes ready, and the probe names the cause (an unknown
// authority, an expired certificate) at once.
func security(ctx context.Context, u *url.URL, base *tls.Config, dial backends.DialFunc, endpoints []string) (user, pass string, cfg *tls.Config, err error) {
	user, _ = driverkit.Credentials(u)
	if pass, err = driverkit.Password(u); err != nil {
		return "", "", nil, err
	}
	switch {
	case user == "" && pass != "":
		return "", "", nil, fmt.Errorf("%w: a password without a user (etcds://user@host/…)", backends.ErrInvalidURL)
	case user != "" && pass == "":
		return "", "", nil, fmt.Errorf("%w: etcd user %q without a password (in the URL, or password_file= or password_env=)", backends.ErrInvalidURL, user)
	}
	cfg, on, err := driverkit.TLSConfig(u, base)
	if err != nil {
		return "", "", nil, err
	}
	if !on && u.Scheme != SchemeTLS {
		return user, pass, nil, nil
	}
	// A probe that only ran out of time proves nothing: the client then
	// tries for the whole dial timeout.
	if err := probe(ctx, dial, endpoints, cfg); err != nil && !timedOut(err) {
		return "", "", nil, driverkit.Unavailable("etcd "+u.Host, err)
	}
	return user, pass, cfg, nil
}

// timedOut reports whether err is only a probe running out of time.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}
