package driverkit

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/padlock-go/padlock/backends"
)

// Hosts splits the comma-separated host list of u into host:port
// addresses. Each must have a host and a port (defaultPort fills a missing
// port when it is not empty), and none may repeat: two entries for one
// server would count it twice towards a quorum.
func Hosts(u *url.URL, defaultPort string) ([]string, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %s:// needs host:port[,host:port...]", backends.ErrInvalidURL, u.Scheme)
	}
	var out []string
	seen := map[string]bool{}
	for _, h := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil && defaultPort != "" && !strings.Contains(strings.TrimPrefix(h, "["), ":") {
			host, port, err = h, defaultPort, nil
		}
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("%w: %q in %s:// is not host:port", backends.ErrInvalidURL, h, u.Scheme)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("%w: %q in %s:// has no valid port", backends.ErrInvalidURL, h, u.Scheme)
		}
		addr := net.JoinHostPort(strings.ToLower(host), port)
		if seen[addr] {
			return nil, fmt.Errorf("%w: %s appears twice in %s://", backends.ErrInvalidURL, addr, u.Scheme)
		}
		seen[addr] = true
		out = append(out, addr)
	}
	return out, nil
}

// Credentials returns the user name and password of u, if any.
func Credentials(u *url.URL) (user, password string) {
	if u.User == nil {
		return "", ""
	}
	p, _ := u.User.Password()
	return u.User.Username(), p
}
