//go:build unix

package node

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfs returns the bytes of dir's file system available to the node's
// user and its size.
func statfs(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
