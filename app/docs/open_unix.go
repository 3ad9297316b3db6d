//go:build unix

package docs

import (
	"os"
	"syscall"
)

// openNoBlock opens a file for reading without waiting: a named pipe opens
// at once even with no writer, instead of blocking until one comes. On a
// regular file the flag changes nothing.
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
