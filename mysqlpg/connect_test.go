package mysqlpg

import (
	"crypto/tls"
	"testing"

	"github.com/jackc/pgx/v5"
)

// padlock's TLS parameters make every host of a multi-host PostgreSQL URL
// take TLS, each verifying its own name, where pgx's default
// (sslmode=prefer) would also try each host in plain text.
func TestRequireTLSOnEveryHost(t *testing.T) {
	pc, err := pgx.ParseConfig("postgres://u@h1:5432,h2:5433/db")
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.Fallbacks) != 3 {
		t.Fatalf("pgx's fallbacks: %d, want 3 (h1 plain, h2 TLS, h2 plain): the premise changed", len(pc.Fallbacks))
	}
	requireTLS(pc, &tls.Config{MinVersion: tls.VersionTLS12})
	if pc.TLSConfig == nil || pc.TLSConfig.ServerName != "h1" || pc.TLSConfig.InsecureSkipVerify {
		t.Errorf("first host's TLS = %+v, want verified h1", pc.TLSConfig)
	}
	if len(pc.Fallbacks) != 1 {
		t.Fatalf("fallbacks %d, want 1 (h2 over TLS)", len(pc.Fallbacks))
	}
	f := pc.Fallbacks[0]
	if f.Host != "h2" || f.Port != 5433 || f.TLSConfig == nil || f.TLSConfig.ServerName != "h2" {
		t.Errorf("fallback = %s:%d %+v, want h2:5433 verifying h2", f.Host, f.Port, f.TLSConfig)
	}
}
