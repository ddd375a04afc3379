//go:build unix && !linux

package main

import "syscall"

// childAttr puts the command in a process group of its own. (Only Linux
// can have it killed when padlock dies.)
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// groupRuns reports whether any process of group pgid is left (zombies
// awaiting their reaper included: telling them apart needs /proc).
func groupRuns(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
