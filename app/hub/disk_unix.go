//go:build unix

package hub

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FreeSpace is how many bytes an unprivileged user may still write on the
// disk that holds dir (or would hold it: the nearest existing parent is
// asked when dir does not exist yet).
func FreeSpace(dir string) (int64, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
