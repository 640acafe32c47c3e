package harness

import (
	"os"
	"os/exec"
	"testing"
)

// MountTmpfs mounts a tmpfs of size (mount's size= syntax: 8m, 1g) on dir,
// creating dir, and unmounts it when the test ends; the function it
// returns changes the size (mount -o remount). It needs root: the tests
// that call it skip without (CI runs as root).
func MountTmpfs(t testing.TB, dir, size string) (resize func(size string)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs of %s on %s: %v: %s", size, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return func(size string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
			t.Fatalf("remount %s with size %s: %v: %s", dir, size, err, out)
		}
	}
}
