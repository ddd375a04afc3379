package padlocktest

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// startOrSkip starts a server, skipping the test when it is not installed
// (unless RequireServers).
func startOrSkip[S interface{ Close() }](t *testing.T, ctx context.Context, start func(context.Context) (S, error)) S {
	t.Helper()
	begin := time.Now()
	s, err := start(ctx)
	if errors.Is(err, ErrMissing) && !RequireServers() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Logf("started in %v", time.Since(begin).Round(time.Millisecond))
	return s
}

func sqlCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// refused checks that nothing listens on addr any more.
func refused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Kill", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s after Kill: %v, want connection refused", addr, err)
	}
}

// gone checks that Close removed the server's directory.
func gone(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind after Close: %v", dir, err)
	}
}

// PostgreSQL: padlock's role is not a superuser, the superuser reaches
// padlock's database, a killed server refuses connections and starts again
// with its data, and a paused one answers nothing, established sessions
// included.
func TestPostgres(t *testing.T) {
	ctx := sqlCtx(t)
	pg := startOrSkip(t, ctx, startPostgresDefault)

	conn, err := pgx.Connect(ctx, pg.url(pg.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var user string
	var super bool
	if err := conn.QueryRow(ctx, "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&user, &super); err != nil {
		t.Fatal(err)
	}
	if user != "padlock" || super {
		t.Errorf("app user %q superuser=%v, want padlock, not a superuser", user, super)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}

	admin, err := pgx.Connect(ctx, pg.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	var db string
	if err := admin.QueryRow(ctx, "SELECT current_user, current_database(), rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&user, &db, &super); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	if user != "postgres" || db != "padlock" || !super {
		t.Errorf("admin is %q on %q, superuser=%v; want postgres on padlock, a superuser", user, db, super)
	}

	// Pause freezes the established session, not only the postmaster.
	if err := pg.Pause(); err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	var one int
	err = conn.QueryRow(qctx, "SELECT 1").Scan(&one)
	cancel()
	if err == nil {
		t.Error("a session answered while the server was paused")
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background()) // its protocol state is lost to the timeout

	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	refused(t, pg.Addr)
	if c, err := pgx.Connect(ctx, pg.url(pg.Addr)); err == nil {
		c.Close(ctx)
		t.Fatal("connected to a killed server")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect to a killed server: %v, want connection refused", err)
	}

	begin := time.Now()
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("started again (crash recovery) in %v", time.Since(begin).Round(time.Millisecond))
	conn, err = pgx.Connect(ctx, pg.url(pg.Addr))
	if err != nil {
		t.Fatal(err)
	}
	var x int
	if err := conn.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 42 {
		t.Errorf("after the restart: x = %d, %v; want 42", x, err)
	}
	conn.Close(ctx)

	begin = time.Now()
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %v", time.Since(begin).Round(time.Millisecond))
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if pids := pg.serverPIDs(); len(pids) != 0 {
		t.Errorf("server processes %v left after Stop", pids)
	}

	pg.Close()
	gone(t, pg.Dir)
}

// MariaDB: padlock's user reaches its database (from the URL's parts), the
// admin user has every privilege, a killed server refuses connections and
// starts again with its data.
func TestMariaDB(t *testing.T) {
	ctx := sqlCtx(t)
	m := startOrSkip(t, ctx, startMariaDBDefault)

	u, err := url.Parse(m.url(m.Addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, u.Path[1:]
	cfg.Timeout = 2 * time.Second
	if u.Scheme != "mysql" || u.Host != m.Addr || cfg.DBName != "padlock" {
		t.Fatalf("URL %s does not name the server's padlock database", m.url(m.Addr))
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var user, dbName string
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER(), DATABASE()").Scan(&user, &dbName); err != nil {
		t.Fatal(err)
	}
	if user != "padlock@%" || dbName != "padlock" {
		t.Errorf("app user %q on %q, want padlock@%% on padlock", user, dbName)
	}
	for _, q := range []string{"CREATE TABLE kept (x int) ENGINE=InnoDB", "INSERT INTO kept VALUES (42)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE other"); err == nil {
		t.Error("the app user may create databases")
	}

	admin, err := sql.Open("mysql", m.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var processes int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'padlock'").Scan(&processes); err != nil {
		t.Fatal(err)
	}
	if processes == 0 {
		t.Error("admin sees no padlock connection in the processlist")
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE other"); err != nil {
		t.Errorf("admin lacks global privileges: %v", err)
	}
	admin.Close()

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	refused(t, m.Addr)
	db.Close()
	db, err = sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("connected to a killed server")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connect to a killed server: %v, want connection refused", err)
	}

	begin := time.Now()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("started again (crash recovery) in %v", time.Since(begin).Round(time.Millisecond))
	var x int
	if err := db.QueryRowContext(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 42 {
		t.Errorf("after the restart: x = %d, %v; want 42", x, err)
	}
	db.Close()

	m.Close()
	gone(t, m.Dir)
}
