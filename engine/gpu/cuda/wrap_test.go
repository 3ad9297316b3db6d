package cuda

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyMappedSkipsUnmapped: the backend wraps weights in 16 KiB pages,
// which on a 4 KiB-page machine can begin before a mapped file or end past
// it; the copy WrapBytes makes must take every readable byte and leave the
// rest zero instead of faulting (it faulted on the H200 machine with the
// demo model) or stopping at the first unreadable page (the fixtures' bf16
// embedding then came out zero).
func TestCopyMappedSkipsUnmapped(t *testing.T) {
	const page = 4096
	m, err := unix.Mmap(-1, 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	for i := range m {
		m[i] = byte(i%251) + 1
	}
	want := append([]byte(nil), m...)
	clear(want[:page])
	clear(want[3*page:])
	if err := unix.Mprotect(m[:page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(m[3*page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, len(m))
	if n := copyMapped(dst, m[100:]); n != 2*page {
		t.Errorf("copied %d bytes, want the %d readable ones", n, 2*page)
	}
	if !bytes.Equal(dst[:len(m)-100], want[100:]) {
		t.Error("the readable pages were not copied, or the unreadable ones not left zero")
	}
}
