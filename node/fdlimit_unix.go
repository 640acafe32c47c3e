//go:build unix

package node

import "syscall"

// openFileLimit is the process's soft limit on open files (the Go runtime
// raises it to the hard limit at start), or 0 when unknown.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
