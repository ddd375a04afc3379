//go:build !linux

package padlocktest

import "fmt"

// lockFile: network labs are Linux's only.
func lockFile(path string) (func(), error) {
	return nil, fmt.Errorf("%w: network namespaces (Partitions) on this system", ErrUnsupported)
}
