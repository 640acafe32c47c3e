//go:build !linux

package archive

import "os"

// startWriteback does nothing where sync_file_range(2) is missing: the
// kernel writes the file out on its own schedule.
func startWriteback(f *os.File, off, n int64) {}

// dropCached does nothing where posix_fadvise(2) is missing.
func dropCached(f *os.File, off, n int64) {}
