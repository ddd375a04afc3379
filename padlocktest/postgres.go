package padlocktest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is one PostgreSQL server (the Debian postgresql package) with a
// fresh cluster in a temporary directory: the data directory, the Unix
// socket and the log. The superuser is postgres (password postgres); the
// database padlock belongs to the role padlock (password padlock), which is
// not a superuser. Data survives Kill and Start.
//
// Kill, Pause, Resume, Stop and Restart act on the whole server: the
// postmaster and every backend and auxiliary process it forked, which do
// not share its process group.
type pgServer struct {
	*process
	Addr string // 127.0.0.1:port

	dir  string // the temporary directory (Process.Dir)
	data string // the data directory; every server process's working directory
	tls  *Certs // nil: plain TCP
}

// pgOptions configure a server beyond the defaults.
type pgOptions struct {
	// TLS, when set, makes the server accept TCP connections over TLS
	// only, with its server certificate, and require a client certificate
	// signed by its CA (pg_hba.conf hostssl … clientcert=verify-ca; no
	// host line). The URLs this Postgres returns carry the matching
	// sslmode=verify-full and certificate parameters.
	TLS *Certs
}

// startPostgresDefault initializes a cluster with initdb, starts postgres on a free
// loopback port and creates the padlock role and database. As root, both
// run as the postgres account, since neither runs as root.
func startPostgresDefault(ctx context.Context) (*pgServer, error) {
	return startPostgresWith(ctx, pgOptions{})
}

// startPostgresWith starts a server configured by o.
func startPostgresWith(ctx context.Context, o pgOptions) (*pgServer, error) {
	return retryStart(ctx, func(ctx context.Context) (*pgServer, error) { return startPostgres(ctx, o) })
}

// postgresBin finds the newest PostgreSQL's binaries: Debian installs each
// major version side by side under /usr/lib/postgresql.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(bin string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(bin)), 64)
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "postgres")) && isExecutable(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: /usr/lib/postgresql/*/bin/postgres and initdb (Debian package postgresql)", ErrMissing)
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

func startPostgres(ctx context.Context, o pgOptions) (*pgServer, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "padlock-pg-")
	if err != nil {
		return nil, err
	}
	// Server processes are found by their working directory, which the
	// kernel reports with symbolic links resolved.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	pg := &pgServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, data: filepath.Join(dir, "data"), tls: o.TLS}
	var ssl []string
	if o.TLS != nil {
		// The server's own copies, in its directory (given to its user):
		// it refuses a key file that others may read.
		for _, f := range [][2]string{{o.TLS.ServerCert, "server.crt"}, {o.TLS.ServerKey, "server.key"}, {o.TLS.CA, "ca.crt"}} {
			b, err := os.ReadFile(f[0])
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, f[1]), b, 0o600)
			}
			if err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		ssl = []string{"-c", "ssl=on", "-c", "ssl_cert_file=" + filepath.Join(dir, "server.crt"),
			"-c", "ssl_key_file=" + filepath.Join(dir, "server.key"), "-c", "ssl_ca_file=" + filepath.Join(dir, "ca.crt")}
	}
	pg.process = &process{
		Name: "postgres", Path: filepath.Join(bin, "postgres"), Dir: dir, User: "postgres",
		Args: []string{"-D", pg.data, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir,
			// A Locker uses up to its pool, a listening connection and two
			// queue connections; stress tests open dozens of Lockers at once.
			"-c", "max_connections=1000",
			"-c", "shared_buffers=32MB",
			// Durability against a crash of the machine, which tests do
			// not simulate: a killed server still recovers from its WAL.
			// synchronous_commit stays on: off, a commit returns before
			// its WAL leaves shared memory for the kernel, and a Kill
			// within 600ms (3 wal_writer_delay) loses it. With fsync off,
			// on costs one write(2) per commit.
			"-c", "fsync=off", "-c", "full_page_writes=off",
			// Logical decoding, for WatchHolders (each watch is a
			// replication connection with a temporary slot).
			"-c", "wal_level=logical", "-c", "max_wal_senders=32", "-c", "max_replication_slots=32",
			"-c", "logging_collector=off", "-c", "log_destination=stderr"},
		Ready: "database system is ready to accept connections",
		Init:  func(ctx context.Context) error { return pg.initdb(ctx, bin) },
	}
	pg.Args = append(pg.Args, ssl...)
	pg.Probe = func(ctx context.Context) error { return pg.selectOne(ctx, pg.adminURL("postgres")) }
	if err := pg.Start(ctx); err != nil {
		pg.Close()
		return nil, err
	}
	if err := pg.createAppDB(ctx); err != nil {
		pg.Close()
		return nil, err
	}
	return pg, nil
}

// initdb makes the cluster: superuser postgres with a password, which every
// connection (TCP and Unix socket) must give.
func (pg *pgServer) initdb(ctx context.Context, bin string) error {
	pwfile := filepath.Join(pg.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte("postgres\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	out, err := runAs(ctx, pg.User, pg.dir, filepath.Join(bin, "initdb"),
		"-D", pg.data, "-U", "postgres", "--pwfile", pwfile, "-A", "scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if pg.tls != nil {
		// TCP over TLS with a client certificate only.
		hba := "local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n" +
			"hostssl replication all 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n"
		if err := os.WriteFile(filepath.Join(pg.data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// runAs runs a setup command (initdb, mariadb-install-db) in dir, as user
// like the server it prepares, and returns its output. Cancelling ctx kills
// the command's whole process group.
func runAs(ctx context.Context, user, dir, path string, args ...string) ([]byte, error) {
	attr, err := sysProcAttr(user, dir)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	return out.Bytes(), err
}

// createAppDB creates the role and database padlock uses.
func (pg *pgServer) createAppDB(ctx context.Context) error {
	return createPostgresAppDB(ctx, pg.adminURL("postgres"))
}

// createPostgresAppDB creates the role and database padlock uses, as the
// superuser at adminURL. The role may replicate, so that WatchHolders can
// follow the lock table by logical decoding.
func createPostgresAppDB(ctx context.Context, adminURL string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("postgres: connect as superuser: %w", err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		"ALTER ROLE postgres PASSWORD '" + PostgresPassword("postgres") + "'",
		"CREATE ROLE padlock LOGIN REPLICATION PASSWORD '" + PostgresPassword("padlock") + "'",
		"CREATE DATABASE padlock OWNER padlock",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: %s: %w", q, err)
		}
	}
	return nil
}

// PostgresPassword returns password as a test server stores it, for
// CREATE ROLE or ALTER ROLE … PASSWORD '…': a SCRAM-SHA-256 verifier
// (RFC 7677) made with one iteration of its key derivation, where
// PostgreSQL makes 4096. Logging in is the same exchange, checked the
// same way, but a client derives its key from the password once per
// connection, by the iteration count the server names, and 4096 cost
// 7ms of a -race test process's CPU per connection on a 2-core machine:
// seconds for a suite that opens thousands. The superuser and the role
// padlock of padlocktest's servers have such passwords. For test servers
// only: a stolen verifier of one iteration is cheap to guess from. The
// password must be ASCII: clients normalize others (SASLprep) before they
// derive the key, and this does not.
func PostgresPassword(password string) string {
	var salt [16]byte
	if _, err := rand.Read(salt[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	const iterations = 1
	salted, err := pbkdf2.Key(sha256.New, password, salt[:], iterations, sha256.Size)
	if err != nil {
		panic(err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt[:]), b64(stored[:]), b64(mac(salted, "Server Key")))
}

// url is padlock's connection URL through hosts: the role padlock on the
// database padlock.
func (pg *pgServer) url(hosts string) string {
	return fmt.Sprintf("postgres://padlock:padlock@%s/padlock?%s", hosts, pg.ssl())
}

// ssl is the driver's TLS parameters for this server.
func (pg *pgServer) ssl() string {
	if pg.tls == nil {
		return "sslmode=disable"
	}
	return url.Values{"sslmode": {"verify-full"}, "sslrootcert": {pg.tls.CA},
		"sslcert": {pg.tls.ClientCert}, "sslkey": {pg.tls.ClientKey}}.Encode()
}

// AdminURL is the superuser's connection URL on the database padlock, for
// what tests do behind padlock's back (pg_terminate_backend, pg_locks,
// pg_stat_activity).
func (pg *pgServer) AdminURL() string { return pg.adminURL("padlock") }

func (pg *pgServer) adminURL(db string) string {
	return fmt.Sprintf("postgres://postgres:postgres@%s/%s?%s", pg.Addr, db, pg.ssl())
}

// selectOne is the readiness probe: a new connection answers SELECT 1.
func (pg *pgServer) selectOne(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// serverPIDs returns the server's processes that are alive: those whose
// working directory is the data directory (the postmaster changes to it, its
// children inherit it; an exited process has none).
func (pg *pgServer) serverPIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == pg.data {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalAll sends sig to the postmaster first, so that it forks nothing
// more, then to every other server process.
func (pg *pgServer) signalAll(sig syscall.Signal) {
	pg.signal(sig)
	for _, pid := range pg.serverPIDs() {
		syscall.Kill(pid, sig)
	}
}

// Kill kills every server process with SIGKILL, like a crash of the
// machine (but the data directory survives: the next Start recovers), and
// waits for them to exit.
func (pg *pgServer) Kill() error {
	// Freeze every process first, then kill them: killed one by one, a
	// backend whose postmaster is already gone would exit cleanly and free
	// its locks, and another could grant one to a client after the
	// "crash".
	pg.signalAll(syscall.SIGSTOP)
	pg.signalAll(syscall.SIGKILL)
	// The Process waits until its output pipe closes, which all server
	// processes hold: until none is left.
	return pg.process.Kill()
}

// Pause stops every server process with SIGSTOP: the established sessions
// freeze too, not only new connections.
func (pg *pgServer) Pause() error {
	if err := pg.process.Pause(); err != nil {
		return err
	}
	pg.signalAll(syscall.SIGSTOP)
	return nil
}

// Resume continues every server process.
func (pg *pgServer) Resume() error {
	if err := pg.process.Resume(); err != nil {
		return err
	}
	pg.signalAll(syscall.SIGCONT)
	return nil
}

// Stop shuts the server down fast (SIGINT: sessions are ended; the
// Process's SIGTERM is PostgreSQL's smart shutdown, which waits for every
// client to disconnect).
func (pg *pgServer) Stop() error {
	pg.signalAll(syscall.SIGCONT)
	pg.signal(syscall.SIGINT)
	return pg.process.Stop()
}

// Restart kills the server and starts it again on the same data.
func (pg *pgServer) Restart(ctx context.Context) error {
	if err := pg.Kill(); err != nil {
		return err
	}
	return pg.Start(ctx)
}

// Close kills the server and removes its directory.
func (pg *pgServer) Close() {
	pg.Kill()
	os.RemoveAll(pg.dir)
}
