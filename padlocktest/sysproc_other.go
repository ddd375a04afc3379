//go:build unix && !linux

package padlocktest

import "syscall"

// sysProcAttr runs a server in its own process group, as user (see
// credential). Without Linux's Pdeathsig, a server outlives a test process
// that is killed; Main and Close stop it on every other path.
func sysProcAttr(user, dir string) (*syscall.SysProcAttr, error) {
	cred, err := credential(user, dir)
	if err != nil {
		return nil, err
	}
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}, nil
}
