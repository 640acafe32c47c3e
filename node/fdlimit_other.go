//go:build !unix

package node

// openFileLimit is unknown on this system.
func openFileLimit() uint64 { return 0 }
