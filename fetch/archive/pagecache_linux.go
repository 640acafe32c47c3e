//go:build linux

package archive

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts the write-out of f's dirty pages in [off, off+n)
// without waiting for it (sync_file_range(2), SYNC_FILE_RANGE_WRITE).
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// dropCached asks the kernel to drop f's clean cached pages in [off, off+n)
// (posix_fadvise(2), POSIX_FADV_DONTNEED); pages still being written out stay.
func dropCached(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
