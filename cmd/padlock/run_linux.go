//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// childAttr puts the command in a process group of its own and has the
// kernel kill it if padlock dies, whose lease would then lapse.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupRuns reports whether a process of group pgid runs. A zombie does
// not: what the command started is reparented when the command exits,
// and the reaper it goes to (init, or a container's first process) may
// take seconds or never come, while kill(-pgid, 0) still finds it.
func groupRuns(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: the caller waits out its grace
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything but
		// ends at the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) >= 3 && bytes.Equal(f[2], want) && !bytes.Equal(f[0], []byte("Z")) {
			return true
		}
	}
	return false
}
