package padlocktest

import "net"

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server a test starts itself (another process may take it meanwhile:
// retry on "address in use").
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
