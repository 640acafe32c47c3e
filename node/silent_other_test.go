//go:build !unix

package node

import (
	"net"
	"testing"
)

func silentListener(t testing.TB) (string, func() net.Listener) {
	t.Skip("a host that accepts nothing needs a unix listen backlog")
	return "", nil
}

func silentHost(t testing.TB) string {
	t.Skip("a host that accepts nothing needs a unix listen backlog")
	return ""
}
