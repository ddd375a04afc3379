package padlocktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs is a throwaway certificate authority and the certificates the TLS
// tests need, generated in a directory (no network): a server certificate
// for 127.0.0.1 and localhost, a client certificate, an expired client
// certificate, a client certificate whose common name is "root" (etcd takes
// it for its root user), and a second, unrelated CA (the wrong one).
type Certs struct {
	Dir                     string
	CA, OtherCA             string // PEM files
	ServerCert, ServerKey   string
	ClientCert, ClientKey   string
	ExpiredCert, ExpiredKey string
	RootCert, RootKey       string
}

// NewCerts writes the certificates into a temporary directory of tb's, which
// goes when tb ends.
func NewCerts(tb testing.TB) *Certs {
	tb.Helper()
	c, err := newCerts(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// newCerts writes the certificates into dir.
func newCerts(dir string) (*Certs, error) {
	c := &Certs{Dir: dir}
	ca, caKey, err := newCA("padlock test CA")
	if err != nil {
		return nil, err
	}
	other, _, err := newCA("some other CA")
	if err != nil {
		return nil, err
	}
	c.CA, c.OtherCA = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other-ca.pem")
	if err := writePEM(c.CA, "CERTIFICATE", ca.Raw); err != nil {
		return nil, err
	}
	if err := writePEM(c.OtherCA, "CERTIFICATE", other.Raw); err != nil {
		return nil, err
	}
	now := time.Now()
	for _, leaf := range []struct {
		name             string
		cert, key        *string
		server           bool
		notBefore, after time.Time
	}{
		{"server", &c.ServerCert, &c.ServerKey, true, now.Add(-time.Hour), now.Add(24 * time.Hour)},
		{"client", &c.ClientCert, &c.ClientKey, false, now.Add(-time.Hour), now.Add(24 * time.Hour)},
		{"expired", &c.ExpiredCert, &c.ExpiredKey, false, now.Add(-48 * time.Hour), now.Add(-24 * time.Hour)},
		{"root", &c.RootCert, &c.RootKey, false, now.Add(-time.Hour), now.Add(24 * time.Hour)},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
		cn := "padlock " + leaf.name
		if leaf.name == "root" {
			cn = "root"
		}
		tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
			NotBefore: leaf.notBefore, NotAfter: leaf.after, KeyUsage: x509.KeyUsageDigitalSignature}
		if leaf.server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			tmpl.DNSNames = []string{"localhost"}
		} else {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		*leaf.cert, *leaf.key = filepath.Join(dir, leaf.name+".pem"), filepath.Join(dir, leaf.name+"-key.pem")
		if err := writePEM(*leaf.cert, "CERTIFICATE", der); err != nil {
			return nil, err
		}
		if err := writePEM(*leaf.key, "EC PRIVATE KEY", keyDER); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ClientTLS is the TLS configuration of a client of a server started with
// these certificates: their CA, and their client certificate.
func (c *Certs) ClientTLS() (*tls.Config, error) {
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", c.CA)
	}
	pair, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1"}, nil
}

// SecretFile writes secret, with a trailing newline as secrets files often
// have, to a file (mode 0600) in a temporary directory of tb's, for a URL's
// password_file=, and returns its path. It goes when tb ends.
func SecretFile(tb testing.TB, secret string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func writePEM(path, typ string, der []byte) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if b == nil {
		return fmt.Errorf("encoding %s", path)
	}
	return os.WriteFile(path, b, 0o644) // the servers may run as another user
}
