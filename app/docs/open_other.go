//go:build !unix

package docs

import "os"

// openNoBlock opens a file for reading; systems other than Unix have no
// named pipes in the file system to block on.
func openNoBlock(path string) (*os.File, error) { return os.Open(path) }
