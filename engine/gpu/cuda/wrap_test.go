package cuda

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyMappedPastEnd: the backend wraps weights in 16 KiB pages, which
// on a 4 KiB-page machine reach past the end of a mapped file; the copy
// that WrapBytes makes must take the file's bytes and stop there instead
// of faulting (it did, on the H200 machine, with the demo model).
func TestCopyMappedPastEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w")
	want := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 1000) // 5000 bytes: two 4 KiB pages
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 16<<10, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	dst := make([]byte, len(m))
	copyMapped(dst, m)
	if !bytes.Equal(dst[:len(want)], want) {
		t.Error("the file's bytes were not copied")
	}
	for i, b := range dst[len(want):] {
		if b != 0 {
			t.Fatalf("byte %d past the file's end is %d, want 0", len(want)+i, b)
		}
	}
}
