package faults

import "syscall"

// sysProcAttr kills children with the run (Pdeathsig), whatever ends it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
