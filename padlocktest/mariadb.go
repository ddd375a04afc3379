package padlocktest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDB is one MariaDB server (the Debian mariadb-server package) with a
// fresh data directory in a temporary directory, with its Unix socket and
// log. The user padlock (password padlock) has all privileges on the
// database padlock; the user admin (password admin) has all privileges.
// Data survives Kill and Start.
type mariaServer struct {
	*process
	Addr string // 127.0.0.1:port

	dir    string // the temporary directory (Process.Dir)
	socket string // root's way in: root has no password and no TCP grant
	tls    string // the driver's registered TLS configuration; "" for plain TCP
}

// mariaOptions configure a server beyond the defaults.
type mariaOptions struct {
	// TLS, when set, makes the server take TCP connections over TLS only
	// (require_secure_transport), with its server certificate and CA; the
	// users padlock and admin must give a client certificate (REQUIRE
	// X509). AdminDSN and URL carry the matching TLS settings.
	TLS *Certs
}

// startMariaDBDefault makes a data directory with mariadb-install-db, starts
// mariadbd on a free loopback port and creates the padlock database and the
// padlock and admin users.
func startMariaDBDefault(ctx context.Context) (*mariaServer, error) {
	return startMariaDBWith(ctx, mariaOptions{})
}

// startMariaDBWith starts a server configured by o.
func startMariaDBWith(ctx context.Context, o mariaOptions) (*mariaServer, error) {
	return retryStart(ctx, func(ctx context.Context) (*mariaServer, error) { return startMariaDB(ctx, o) })
}

// lookBin finds a program on PATH or in the sbin directories, which are not
// on every user's PATH.
func lookBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin"} {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// mariaBins finds mariadbd and mariadb-install-db.
func mariaBins() (bin, install string, err error) {
	if bin, err = lookBin("mariadbd"); err != nil {
		return "", "", fmt.Errorf("%w: mariadbd (Debian package mariadb-server)", ErrMissing)
	}
	if install, err = lookBin("mariadb-install-db"); err != nil {
		return "", "", fmt.Errorf("%w: mariadb-install-db (Debian package mariadb-server)", ErrMissing)
	}
	return bin, install, nil
}

func startMariaDB(ctx context.Context, o mariaOptions) (*mariaServer, error) {
	bin, install, err := mariaBins()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "padlock-mariadb-")
	if err != nil {
		return nil, err
	}
	m := &mariaServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, socket: filepath.Join(dir, "mysqld.sock")}
	data := filepath.Join(dir, "data")
	// Options of both mariadb-install-db's bootstrap and the server: the
	// redo log is made at its size once; synchronous I/O, since io_uring
	// and libaio are not allowed in every container or sandbox.
	common := []string{"--no-defaults", "--datadir=" + data,
		"--innodb-log-file-size=48M", "--innodb-use-native-aio=OFF"}
	if os.Geteuid() == 0 {
		// mariadbd refuses root unless told to run as it.
		common = append(common, "--user=root")
	}
	common = slices.Clip(common) // appended to twice
	m.process = &process{
		Name: "mariadb", Path: bin, Dir: dir,
		Args: append(common,
			"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--socket="+m.socket, "--pid-file="+filepath.Join(dir, "mysqld.pid"),
			"--tmpdir="+dir,
			"--skip-name-resolve", "--skip-log-bin",
			"--max-connections=400",
			// Connection attributes (program_name) name each client's sessions.
			"--performance-schema=ON",
			"--innodb-buffer-pool-size=64M",
			// Durability against a crash of the machine, which tests do not
			// simulate; a killed server still recovers from its redo log.
			"--innodb-flush-log-at-trx-commit=2",
			// Debian's defaults, which --no-defaults skips.
			"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci"),
		Ready: "ready for connections",
		Init: func(ctx context.Context) error {
			out, err := runAs(ctx, "", dir, install, append(common,
				"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")...)
			if err != nil {
				return fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
			}
			return nil
		},
	}
	if o.TLS != nil {
		m.Args = append(m.Args, "--ssl-cert="+o.TLS.ServerCert, "--ssl-key="+o.TLS.ServerKey,
			"--ssl-ca="+o.TLS.CA, "--require-secure-transport=ON")
		t, err := o.TLS.ClientTLS()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		m.tls = "padlock-test-" + strconv.Itoa(port)
		if err := mysql.RegisterTLSConfig(m.tls, t); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	m.Probe = func(ctx context.Context) error { return ping(ctx, m.rootDSN()) }
	if err := m.Start(ctx); err != nil {
		m.Close()
		return nil, err
	}
	if err := m.createAppDB(ctx); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// createAppDB creates the database and users, as root over the socket.
func (m *mariaServer) createAppDB(ctx context.Context) error {
	return createMariaAppDB(ctx, m.rootDSN(), m.tls != "", true)
}

// createMariaAppDB creates the users padlock and admin (with x509, they
// must give a client certificate) and, with db, the database padlock, as
// the root user at dsn.
func createMariaAppDB(ctx context.Context, dsn string, x509, db bool) error {
	conn, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer conn.Close()
	require := ""
	if x509 {
		require = " REQUIRE X509"
	}
	var qs []string
	if db {
		qs = append(qs, "CREATE DATABASE padlock")
	}
	for _, q := range append(qs,
		"CREATE USER 'padlock'@'%' IDENTIFIED BY 'padlock'"+require,
		"GRANT ALL ON padlock.* TO 'padlock'@'%'",
		"CREATE USER 'admin'@'%' IDENTIFIED BY 'admin'"+require,
		"GRANT ALL PRIVILEGES ON *.* TO 'admin'@'%' WITH GRANT OPTION",
	) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mariadb: %s: %w", q, err)
		}
	}
	return nil
}

// url is padlock's connection URL through hosts: the user padlock on the
// database padlock.
func (m *mariaServer) url(hosts string) string {
	if m.tls != "" {
		return fmt.Sprintf("mysql://padlock:padlock@%s/padlock?tls=%s", hosts, m.tls)
	}
	return fmt.Sprintf("mysql://padlock:padlock@%s/padlock", hosts)
}

// AdminURL is the user admin's padlock URL on the database padlock (for
// padlock's Migrate run as a user that may create tables).
func (m *mariaServer) AdminURL() string {
	if m.tls != "" {
		return fmt.Sprintf("mysql://admin:admin@%s/padlock?tls=%s", m.Addr, m.tls)
	}
	return fmt.Sprintf("mysql://admin:admin@%s/padlock", m.Addr)
}

// AdminDSN is a go-sql-driver/mysql DSN for the user admin, over TCP, for
// what tests do behind padlock's back (KILL CONNECTION,
// information_schema.processlist, IS_USED_LOCK).
func (m *mariaServer) AdminDSN() string {
	if m.tls != "" {
		return fmt.Sprintf("admin:admin@tcp(%s)/padlock?tls=%s", m.Addr, m.tls)
	}
	return fmt.Sprintf("admin:admin@tcp(%s)/padlock", m.Addr)
}

func (m *mariaServer) rootDSN() string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr = "root", "unix", m.socket
	c.Timeout = 2 * time.Second
	return c.FormatDSN()
}

// ping is the readiness probe: a new connection answers a ping.
func ping(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

// Close kills the server and removes its directory.
func (m *mariaServer) Close() {
	m.Kill()
	if m.tls != "" {
		mysql.DeregisterTLSConfig(m.tls)
	}
	os.RemoveAll(m.dir)
}
