package padlocktest

import "syscall"

// sysProcAttr runs a server in its own process group, as user (see
// credential), and kills it with the test process, whatever happens to
// that (Pdeathsig is Linux's).
func sysProcAttr(user, dir string) (*syscall.SysProcAttr, error) {
	cred, err := credential(user, dir)
	if err != nil {
		return nil, err
	}
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Credential: cred}, nil
}
