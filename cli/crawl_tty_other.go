//go:build !linux

package cli

import "os"

// isTerminal reports false: the redrawn progress line is for Linux
// terminals; elsewhere progress is the plain line of a pipe.
func isTerminal(*os.File) bool { return false }
