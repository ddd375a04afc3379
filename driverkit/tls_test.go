package driverkit_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/padlock-go/padlock/backends"
	"github.com/padlock-go/padlock/driverkit"
)

func TestTLSConfigErrors(t *testing.T) {
	p := newTestPKI(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct{ query, msg string }{
		{"ca=" + missing, "ca=" + missing},
		{"ca=" + notPEM, "ca=" + notPEM + " holds no PEM certificate"},
		{"cert=" + p.certFile, "cert= and key= go together"},
		{"key=" + p.keyFile, "cert= and key= go together"},
		{"cert=" + p.certFile + "&key=" + missing, "cert=" + p.certFile + " key=" + missing},
		{"cert=" + p.keyFile + "&key=" + p.certFile, "cert="}, // swapped
		{"cert=" + p.certFile + "&key=" + notPEM, "key=" + notPEM},
	} {
		cfg, on, err := driverkit.TLSConfig(mustURL(t, "x://h:1?"+c.query), nil)
		checkErr(t, "TLSConfig(?"+c.query+")", err, backends.ErrInvalidOption, []string{c.msg})
		if cfg != nil || on {
			t.Errorf("TLSConfig(?%s) = %v, %v with an error", c.query, cfg, on)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	p := newTestPKI(t)
	base := &tls.Config{ServerName: "from-base", MinVersion: tls.VersionTLS13}

	cfg, on, err := driverkit.TLSConfig(mustURL(t, "x://h:1"), nil)
	if err != nil || on || cfg == nil || cfg.MinVersion < tls.VersionTLS12 {
		t.Errorf("no TLS asked for: %v, on=%v, %v; want off, with a TLS 1.2 floor ready", cfg, on, err)
	}

	cfg, on, err = driverkit.TLSConfig(mustURL(t, "x://h:1"), base)
	if err != nil || !on || cfg == base || cfg.ServerName != "from-base" || cfg.MinVersion != tls.VersionTLS13 {
		t.Errorf("a base alone: %v, on=%v, %v; want on, a clone of the base", cfg, on, err)
	}

	u := mustURL(t, "x://h:1?ca="+p.caFile+"&cert="+p.certFile+"&key="+p.keyFile+"&server_name=padlock.test")
	cfg, on, err = driverkit.TLSConfig(u, base)
	if err != nil || !on {
		t.Fatalf("every parameter: on=%v, %v", on, err)
	}
	if cfg.RootCAs == nil || !cfg.RootCAs.Equal(p.pool) || len(cfg.Certificates) != 1 || cfg.ServerName != "padlock.test" {
		t.Errorf("every parameter: RootCAs %v, %d certificates, ServerName %q; want the CA, one, padlock.test",
			cfg.RootCAs, len(cfg.Certificates), cfg.ServerName)
	}
	if base.RootCAs != nil || base.Certificates != nil || base.ServerName != "from-base" {
		t.Errorf("TLSConfig changed the caller's base: %+v", base)
	}

	for _, q := range []string{"ca=" + p.caFile, "server_name=padlock.test", "cert=" + p.certFile + "&key=" + p.keyFile} {
		if _, on, err := driverkit.TLSConfig(mustURL(t, "x://h:1?"+q), nil); err != nil || !on {
			t.Errorf("?%s alone: on=%v, %v; want TLS on", q, on, err)
		}
	}
}
