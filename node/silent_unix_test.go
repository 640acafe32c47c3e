//go:build unix

package node

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// silentListener listens on loopback with a backlog of 0 and fills its one
// queue place with a connection of its own that is never accepted: the
// kernel drops every further SYN, so a connect to it waits for the
// client's connect timeout (a host behind a black hole), until the
// listener is accepted from (listen). close undoes it.
func silentListener(t testing.TB) (addr string, listen func() net.Listener) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.Dial("tcp", addr) // takes the queue's one place
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "silent")
	t.Cleanup(func() {
		filler.Close()
		f.Close()
	})
	return addr, func() net.Listener {
		ln, err := net.FileListener(f) // a copy of fd; f is closed by Cleanup
		if err != nil {
			t.Error(err)
			return nil
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
}

// silentHost is a loopback address that accepts nothing (silentListener).
func silentHost(t testing.TB) string {
	addr, _ := silentListener(t)
	return addr
}
