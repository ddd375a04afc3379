//go:build unix

package padlocktest

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// credential returns the credential to run a process as name, and gives
// dir (recursively) to that user, when the tests run as root; nil when
// name is empty or the tests do not run as root (the process then runs as
// the test's own user).
func credential(name, dir string) (*syscall.Credential, error) {
	if name == "" || os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("run as %s: %w", name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	if dir != "" {
		err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(path, int(uid), int(gid))
		})
		if err != nil {
			return nil, fmt.Errorf("give %s to %s: %w", dir, name, err)
		}
		// Temporary directories are made 0700: let the user pass through
		// the ones above dir (search permission only, nothing readable).
		for up := filepath.Dir(dir); up != filepath.Dir(up) && up != os.TempDir(); up = filepath.Dir(up) {
			st, err := os.Stat(up)
			if err != nil {
				return nil, err
			}
			if st.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(up, st.Mode().Perm()|0o001); err != nil {
					return nil, fmt.Errorf("let %s through %s: %w", name, up, err)
				}
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
