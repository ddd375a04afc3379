//go:build !linux

package faults

import "syscall"

// sysProcAttr: without Linux's Pdeathsig, the run stops its children on
// every path it controls.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
