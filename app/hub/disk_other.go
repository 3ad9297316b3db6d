//go:build !unix

package hub

import "errors"

// FreeSpace is not known on this system.
func FreeSpace(dir string) (int64, error) {
	return 0, errors.New("free space unknown on this system")
}
