//go:build unix && !linux

package main

import "syscall"

// childAttr puts the command in a process group of its own. (Only Linux
// can have it killed when padlock dies.)
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
