//go:build !unix

package node

import "errors"

// statfs is not available here: the disk guard keeps the node running.
func statfs(dir string) (free, total uint64, err error) {
	return 0, 0, errors.New("statfs: not supported on this system")
}
